//! What a check found: the data every report renders.

use std::time::Duration;

use serde::Serialize;

/// pass | fail | skip, with the reason for the last two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "reason", rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail(String),
    Skip(String),
}

impl Verdict {
    pub fn is_fail(&self) -> bool {
        matches!(self, Verdict::Fail(_))
    }

    /// The verdict under `--strict`: a skip is missing evidence, so it fails with its reason.
    /// (A check that does not apply to the target's values passes, and stays a pass.)
    pub fn strict(self) -> Verdict {
        match self {
            Verdict::Skip(reason) => Verdict::Fail(format!("skipped under --strict: {reason}")),
            other => other,
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail(_) => "fail",
            Verdict::Skip(_) => "skip",
        }
    }
}

/// What happened to one request, for the timeline picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneOutcome {
    Ok,
    Refused,
    TimedOut,
    Cancelled,
    Failed,
}

/// One request on the timeline: times in ms since the check started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lane {
    pub label: String,
    pub request_id: Option<String>,
    /// Sent.
    pub start_ms: f64,
    /// Worker start (sent + Server-Timing `queue`), when known.
    pub run_start_ms: Option<f64>,
    /// Answered or abandoned.
    pub end_ms: f64,
    pub outcome: LaneOutcome,
    pub status: Option<u16>,
}

/// The result of one check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// Check id, e.g. `T3` or `T3.retry-after-tracks-p50`.
    pub id: String,
    /// The contract clause it judges.
    pub clause: String,
    pub title: String,
    /// The contract's value, in words.
    pub expected: String,
    /// What was measured, in words.
    pub observed: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    pub duration_ms: f64,
    /// Request ids, timings and other facts behind the verdict.
    pub evidence: Vec<String>,
    /// Per-trial measurements of a timing check (worst judged, median reported).
    pub trials_ms: Vec<f64>,
    pub timeline: Vec<Lane>,
}

/// How a check that does not apply to the target's values words its observation: a pass whose
/// observed text starts with this (see [`crate::checks::ctx::Ctx::not_applicable`]).
pub const NOT_APPLICABLE: &str = "not applicable: ";

impl CheckResult {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_ms / 1000.0)
    }

    /// A pass because the clause does not apply to the target's values (not a skip).
    pub fn not_applicable(&self) -> bool {
        self.verdict == Verdict::Pass && self.observed.starts_with(NOT_APPLICABLE)
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub manifest: Manifest,
    pub results: Vec<CheckResult>,
}

impl RunReport {
    pub fn passed(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.verdict == Verdict::Pass)
            .count()
    }
    pub fn failed(&self) -> usize {
        self.results.iter().filter(|r| r.verdict.is_fail()).count()
    }
    pub fn not_applicable(&self) -> usize {
        self.results.iter().filter(|r| r.not_applicable()).count()
    }
    pub fn skipped(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Skip(_)))
            .count()
    }
}

/// How the run was made, so a result can be reproduced and compared.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub tool: String,
    pub version: String,
    pub target: String,
    /// `embedded` or `external`.
    pub mode: String,
    /// FNV-1a 64 of the expected contract's TOML text.
    pub contract_hash: String,
    pub contract_version: String,
    /// Every difference between the contract and the target's claimed values (`/v1/contract`),
    /// adopted and refused alike, as `path: ours → theirs`.
    pub differences: Vec<String>,
    /// The claimed values taken over: overridable fields, with `--allow-overrides` or on the
    /// embedded server (which the checker itself started with them).
    pub adopted: Vec<plimsoll_spec::Adopted>,
    /// The claimed values not taken over, each with its reason; the contract's own apply.
    pub refused: Vec<plimsoll_spec::Refused>,
    /// Why the claim could not be read as a contract at all, when it could not.
    pub claim_unreadable: Option<String>,
    /// True when the checks judged values that differ from the contract (something adopted).
    pub scaled: bool,
    /// `--strict`: every skip counted as a failure.
    pub strict: bool,
    /// The values every check judged by: the contract with the adopted values.
    pub effective: serde_json::Value,
    pub trials: u32,
    pub seed: u64,
    pub started_unix_ms: u128,
    /// Why the run stopped before its end (a stop signal, `--timeout`), when it did: the
    /// results are the checks finished by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}
