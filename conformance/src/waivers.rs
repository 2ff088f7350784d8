//! `--waivers FILE`: the deviations a team knows of and gates around. A team that knows one
//! clause is not yet met can still gate every other one: a waived failure is reported as waived,
//! with its reason, link and expiry date, and does not fail the run. A waiver is a debt with a
//! date: once expired it fails the run, and one for a check that now passes is reported as no
//! longer needed (a failure under `--strict`), so the list only shrinks.
//!
//! ```toml
//! [[waiver]]
//! check = "T3"                     # a check id, as `--only` takes it
//! reason = "Retry-After is the p90 until the estimator rework lands"
//! link = "https://example.org/issues/123"   # optional
//! expires = 2027-01-31             # a TOML date; the waiver holds through that day (UTC)
//! ```

use std::path::{Path, PathBuf};

use plimsoll_spec::CheckId;
use serde::Deserialize;
use time::Date;

pub use crate::verdict::waiver::{Waiver, WaiverNote, WaiverState};
use crate::verdict::{CheckResult, ResultId, Verdict};

/// The day a run judges expiries by: today, in UTC.
pub fn today() -> Date {
    time::OffsetDateTime::now_utc().date()
}

/// Why a waivers file could not be used (the run stops with exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum WaiversError {
    /// The file could not be read.
    #[error("--waivers {}: {source}", path.display())]
    Read {
        /// The file named.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// Not TOML of the documented shape (the message names the line).
    #[error("--waivers {}: {message}", path.display())]
    Parse {
        /// The file named.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// Two waivers for one check: which one holds would be a guess.
    #[error("--waivers {}: two waivers for {check}", path.display())]
    Duplicate {
        /// The file named.
        path: PathBuf,
        /// The check named twice.
        check: CheckId,
    },
}

/// The waivers of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Waivers {
    /// One per check at most.
    #[serde(default, rename = "waiver")]
    pub waivers: Vec<Waiver>,
}

impl Waivers {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Waivers, WaiversError> {
        let text = std::fs::read_to_string(path).map_err(|source| WaiversError::Read {
            path: path.to_owned(),
            source,
        })?;
        let waivers: Waivers = toml::from_str(&text).map_err(|e| WaiversError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let mut seen = std::collections::BTreeSet::new();
        for w in &waivers.waivers {
            if !seen.insert(w.check) {
                return Err(WaiversError::Duplicate {
                    path: path.to_owned(),
                    check: w.check,
                });
            }
        }
        Ok(waivers)
    }

    /// Applies every waiver to its check's result, as of `today`; `strict` fails an unneeded
    /// one. A waiver for a check this run did not make (`--only`) changes nothing.
    pub fn apply(&self, results: &mut [CheckResult], today: Date, strict: bool) {
        for result in results {
            self.apply_one(result, today, strict);
        }
    }

    /// Applies the waiver naming `result`'s check, if there is one.
    pub fn apply_one(&self, result: &mut CheckResult, today: Date, strict: bool) {
        let waiver = self
            .waivers
            .iter()
            .find(|w| result.id == ResultId::Check(w.check));
        if let Some(waiver) = waiver {
            waive(result, waiver, today, strict);
        }
    }
}

/// One waiver on its result.
fn waive(result: &mut CheckResult, waiver: &Waiver, today: Date, strict: bool) {
    let since = format!("waived until {}: {}", waiver.expires, waiver.reason);
    let (state, verdict) = match std::mem::replace(&mut result.verdict, Verdict::Pass) {
        _ if today > waiver.expires => (
            WaiverState::Expired,
            Verdict::Fail(format!(
                "its waiver expired on {} ({}): fix the clause or renew the waiver",
                waiver.expires, waiver.reason
            )),
        ),
        Verdict::Fail(why) | Verdict::Waived(why) => (
            WaiverState::Applied,
            Verdict::Waived(format!("{why} ({since})")),
        ),
        unneeded if strict => (
            WaiverState::Unneeded,
            Verdict::Fail(format!(
                "{} although waived ({since}): remove the waiver (--strict)",
                unneeded.label()
            )),
        ),
        unneeded => (WaiverState::Unneeded, unneeded),
    };
    result.verdict = verdict;
    result.waiver = Some(WaiverNote {
        waiver: waiver.clone(),
        state,
    });
}

#[cfg(test)]
mod tests {
    use time::Month;

    use super::*;

    fn day(y: i32, m: u8, d: u8) -> Date {
        Date::from_calendar_date(y, Month::try_from(m).unwrap(), d).unwrap()
    }

    fn result(id: CheckId, verdict: Verdict) -> CheckResult {
        CheckResult::new(id, "", String::new(), "observed".into(), verdict)
    }

    fn load(text: &str) -> Result<Waivers, WaiversError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("waivers.toml");
        std::fs::write(&path, text).unwrap();
        Waivers::load(&path)
    }

    const T3_UNTIL_JANUARY: &str = "[[waiver]]\ncheck = \"t3\"\nreason = \"p90 for now\"\n\
        link = \"https://example.org/1\"\nexpires = 2027-01-31\n";

    #[test]
    fn a_waiver_file_reads_its_check_reason_link_and_date() {
        let w = load(T3_UNTIL_JANUARY).unwrap();
        assert_eq!(w.waivers.len(), 1);
        assert_eq!(
            w.waivers[0].check,
            CheckId::Clause(plimsoll_spec::ClauseId::T3)
        );
        assert_eq!(w.waivers[0].expires, day(2027, 1, 31));
        assert_eq!(w.waivers[0].link.as_deref(), Some("https://example.org/1"));
    }

    #[test]
    fn a_bad_waiver_file_says_what_is_wrong() {
        let unknown = load("[[waiver]]\ncheck = \"X9\"\nreason = \"r\"\nexpires = 2027-01-31\n");
        assert!(
            unknown
                .unwrap_err()
                .to_string()
                .contains("`X9` is not a check id")
        );
        let time =
            load("[[waiver]]\ncheck = \"T1\"\nreason = \"r\"\nexpires = 2027-01-31T10:00:00\n");
        assert!(time.unwrap_err().to_string().contains("without a time"));
        let twice = load(&format!("{T3_UNTIL_JANUARY}{T3_UNTIL_JANUARY}"));
        assert!(
            twice
                .unwrap_err()
                .to_string()
                .contains("two waivers for T3")
        );
        let stray = load(
            "[[waiver]]\ncheck = \"T1\"\nreason = \"r\"\nexpires = 2027-01-31\nowner = \"me\"\n",
        );
        assert!(stray.unwrap_err().to_string().contains("owner"));
    }

    #[test]
    fn a_waived_failure_does_not_fail_the_run_until_the_waiver_expires() {
        let waivers = load(T3_UNTIL_JANUARY).unwrap();
        let t3 = CheckId::Clause(plimsoll_spec::ClauseId::T3);
        let mut results = vec![result(
            t3,
            Verdict::Fail("Retry-After 4, p50 says 1".into()),
        )];
        waivers.apply(&mut results, day(2027, 1, 31), false);
        assert!(
            matches!(&results[0].verdict, Verdict::Waived(why) if why.contains("Retry-After 4") && why.contains("waived until 2027-01-31")),
            "{:?}",
            results[0].verdict
        );
        assert_eq!(
            results[0].waiver.as_ref().unwrap().state,
            WaiverState::Applied
        );

        let mut results = vec![result(t3, Verdict::Fail("Retry-After 4".into()))];
        waivers.apply(&mut results, day(2027, 2, 1), false);
        assert!(
            matches!(&results[0].verdict, Verdict::Fail(why) if why.contains("expired on 2027-01-31")),
            "{:?}",
            results[0].verdict
        );
        assert_eq!(
            results[0].waiver.as_ref().unwrap().state,
            WaiverState::Expired
        );
    }

    #[test]
    fn a_waiver_for_a_passing_check_is_noted_and_fails_under_strict() {
        let waivers = load(T3_UNTIL_JANUARY).unwrap();
        let t3 = CheckId::Clause(plimsoll_spec::ClauseId::T3);
        let mut lenient = vec![result(t3, Verdict::Pass)];
        waivers.apply(&mut lenient, day(2026, 12, 3), false);
        assert_eq!(lenient[0].verdict, Verdict::Pass);
        let note = lenient[0].waiver.as_ref().unwrap();
        assert_eq!(note.state, WaiverState::Unneeded);
        assert_eq!(
            note.to_string(),
            "no longer needed: until 2027-01-31, p90 for now (https://example.org/1)"
        );
        let mut strict = vec![result(t3, Verdict::Pass)];
        waivers.apply(&mut strict, day(2026, 12, 3), true);
        assert!(strict[0].verdict.is_fail(), "{:?}", strict[0].verdict);
    }

    #[test]
    fn a_waiver_touches_only_its_own_check() {
        let waivers = load(T3_UNTIL_JANUARY).unwrap();
        let t1 = CheckId::Clause(plimsoll_spec::ClauseId::T1);
        let mut results = vec![result(t1, Verdict::Fail("no".into()))];
        waivers.apply(&mut results, day(2026, 12, 3), false);
        assert!(results[0].verdict.is_fail());
        assert!(results[0].waiver.is_none());
    }

    #[test]
    fn today_is_a_plausible_day() {
        assert!(today() > day(2024, 1, 1));
    }
}
