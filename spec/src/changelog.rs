//! The contract's changelog (`spec/changelog.toml`): what each version changed, in the words an
//! implementer acts on. Kept beside the contract rather than in it, so a target's
//! `/v1/contract` claim is not compared on its history; [`Changelog::violations`] ties the two
//! together (the contract's version must be the newest entry).

use std::sync::OnceLock;

use serde::Deserialize;

use crate::ClauseId;
use crate::model::Contract;

/// The changelog's text, as checked in.
pub const CHANGELOG_TOML: &str = include_str!("../changelog.toml");

/// Every release of the contract, newest first.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Changelog {
    /// The releases, newest first.
    pub release: Vec<Release>,
}

/// One version of the contract.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// The contract's `[contract].version` it describes (`MAJOR.MINOR.PATCH`).
    pub version: String,
    /// When it was published (`YYYY-MM-DD`).
    pub date: String,
    /// What changed, in a sentence.
    pub summary: String,
    /// The clauses it changed.
    pub clauses: Vec<ClauseId>,
    /// What an implementation of the previous version must change to conform, one step each.
    pub must_change: Vec<String>,
}

impl Changelog {
    /// The checked-in changelog. Panics if it does not parse: the spec crate's tests parse it.
    pub fn embedded() -> &'static Changelog {
        static EMBEDDED: OnceLock<Changelog> = OnceLock::new();
        EMBEDDED.get_or_init(|| {
            toml::from_str(CHANGELOG_TOML).expect("spec/changelog.toml parses (tested)")
        })
    }

    /// Why the changelog does not describe `contract`: its newest entry must be the contract's
    /// version (a bump without an entry fails), versions must strictly decrease, and every entry
    /// must say what to change.
    pub fn violations(&self, contract: &Contract) -> Vec<String> {
        let mut out = Vec::new();
        let version = &contract.contract.version;
        match self.release.first() {
            Some(newest) if &newest.version == version => {}
            Some(newest) => out.push(format!(
                "the contract is version {version} but the newest changelog entry is {}: add an entry for {version}",
                newest.version
            )),
            None => out.push("the changelog has no entry".into()),
        }
        for pair in self.release.windows(2) {
            match (semver(&pair[0].version), semver(&pair[1].version)) {
                (Some(newer), Some(older)) if newer > older => {}
                _ => out.push(format!(
                    "{} must be a newer MAJOR.MINOR.PATCH than the entry after it, {}",
                    pair[0].version, pair[1].version
                )),
            }
        }
        for r in &self.release {
            if r.summary.trim().is_empty() || r.must_change.iter().all(|m| m.trim().is_empty()) {
                out.push(format!(
                    "{}: a summary and at least one must_change step",
                    r.version
                ));
            }
            if !is_date(&r.date) {
                out.push(format!(
                    "{}: date `{}` is not YYYY-MM-DD",
                    r.version, r.date
                ));
            }
        }
        out
    }
}

/// `MAJOR.MINOR.PATCH` as numbers, for ordering.
fn semver(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let triple = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(triple)
}

fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}
