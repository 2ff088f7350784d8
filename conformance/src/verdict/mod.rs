//! What a check found: the data every report renders.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

pub mod figure;
mod id;
pub mod series;
pub mod waiver;

pub use id::ResultId;

use figure::{Delta, Figure};
use waiver::WaiverNote;

/// pass | fail | skip | not applicable | waived, with the reason for all but a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "verdict", content = "reason", rename_all = "snake_case")]
pub enum Verdict {
    /// The clause held.
    Pass,
    /// The clause was broken; the reason says where and how.
    Fail(String),
    /// The evidence could not be gathered; the reason says what was missing.
    Skip(String),
    /// Nothing was judged: the clause cannot apply to the target's values or contract (T2 with
    /// no queue), or the run's fault removes its meaning. Counted apart from passes in every
    /// report, never a pass (`--require` turns it into a failure for the checks it names).
    NotApplicable(String),
    /// The clause was broken, but a waiver (`--waivers`) accepts it for now: the reason is the
    /// failure's, with the waiver's. Does not fail the run.
    Waived(String),
}

impl Verdict {
    /// Whether this verdict fails the run (exit code 1).
    pub fn is_fail(&self) -> bool {
        matches!(self, Verdict::Fail(_))
    }

    /// The verdict under `--strict`: a skip is missing evidence, so it fails with its reason.
    /// (A check that does not apply to the target stays not applicable: there was nothing to
    /// miss.)
    pub fn strict(self) -> Verdict {
        match self {
            Verdict::Skip(reason) => Verdict::Fail(format!("skipped under --strict: {reason}")),
            other => other,
        }
    }

    /// The verdict when the run requires the check to be judged (`--require`): not applicable
    /// or skipped is then a failure, with its reason.
    pub fn required(self) -> Verdict {
        match self {
            Verdict::NotApplicable(why) => {
                Verdict::Fail(format!("required (--require) but not applicable: {why}"))
            }
            Verdict::Skip(why) => Verdict::Fail(format!("required (--require) but skipped: {why}")),
            other => other,
        }
    }

    /// Whether the check judged its clause: a pass, a failure, or a waived failure.
    pub fn judged(&self) -> bool {
        matches!(self, Verdict::Pass | Verdict::Fail(_) | Verdict::Waived(_))
    }

    /// `pass`, `fail`, `skip`, `not_applicable` or `waived`, as the reports print it.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail(_) => "fail",
            Verdict::Skip(_) => "skip",
            Verdict::NotApplicable(_) => "not_applicable",
            Verdict::Waived(_) => "waived",
        }
    }

    /// Why, for anything but a pass.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Verdict::Pass => None,
            Verdict::Fail(why)
            | Verdict::Skip(why)
            | Verdict::NotApplicable(why)
            | Verdict::Waived(why) => Some(why),
        }
    }
}

/// What happened to one request, for the timeline picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaneOutcome {
    /// A success answer.
    Ok,
    /// Refused as `overloaded` (T3).
    Refused,
    /// The contract's timeout answer (B1), or no answer in the time allowed.
    TimedOut,
    /// Given up by the client on purpose, before an answer (a dropped or abandoned request).
    Cancelled,
    /// Any other answer, or a lost connection.
    Failed,
}

/// One request on the timeline: times in ms since the check started.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Lane {
    /// Which of the check's requests it was, as its row is named.
    pub label: String,
    /// The id the target answered with, to find the request in its log (none without an answer).
    pub request_id: Option<String>,
    /// Sent.
    pub start_ms: f64,
    /// Worker start (sent + Server-Timing `queue`), when known.
    pub run_start_ms: Option<f64>,
    /// Answered or abandoned.
    pub end_ms: f64,
    /// How it ended; the picture colours the row by it.
    pub outcome: LaneOutcome,
    /// The status answered, when there was an answer.
    pub status: Option<u16>,
    /// The pool whose endpoint it was sent to, when the checker sent it to one (a health or
    /// metrics read has none): how the run-wide charts tell pools apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// The result of one check.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckResult {
    /// What it judges; serialized as two members, `id` (`T3`, `L-overload.goodput`) and the
    /// `clause` derived from it (`T3`, `load.overload`).
    #[serde(flatten)]
    pub id: ResultId,
    /// What the check proves in a line: the clause's title, or the check's own.
    pub title: String,
    /// The contract's value, in words.
    pub expected: String,
    /// What was measured, in words.
    pub observed: String,
    /// Pass, fail or skip with the reason; the JSON report has it as `verdict` and `reason`.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// How long the check took, ms (a load verdict: the run it judges).
    pub duration_ms: f64,
    /// Request ids, timings and other facts behind the verdict.
    pub evidence: Vec<String>,
    /// Per-trial measurements of a timing check (worst judged, median reported).
    pub trials_ms: Vec<f64>,
    /// Every request the check sent, for the HTML report's timeline.
    pub timeline: Vec<Lane>,
    /// What the check measured, kept for a later run's `--baseline`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<Figure>,
    /// Each figure against the `--baseline` run's, when one was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deltas: Vec<Delta>,
    /// The waiver (`--waivers`) naming this check, and what it came to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiver: Option<WaiverNote>,
}

/// How a check that does not apply words its observation: the verdict's reason after this (see
/// [`crate::checks::ctx::Ctx::not_applicable`]).
pub const NOT_APPLICABLE: &str = "not applicable: ";

/// How a part of a check a fault removes is named in its observation: `<part> not applicable
/// under <fault>: <why>`.
pub const NOT_APPLICABLE_UNDER: &str = " not applicable under ";

impl CheckResult {
    /// A result with what every result says (what it judges, its line, the value, what was
    /// measured, the verdict) and nothing gathered yet: evidence, trials, timeline, figures,
    /// deltas and waiver are filled by whoever has them.
    pub fn new(
        id: impl Into<ResultId>,
        title: impl Into<String>,
        expected: String,
        observed: String,
        verdict: Verdict,
    ) -> CheckResult {
        CheckResult {
            id: id.into(),
            title: title.into(),
            expected,
            observed,
            verdict,
            duration_ms: 0.0,
            evidence: Vec::new(),
            trials_ms: Vec::new(),
            timeline: Vec::new(),
            figures: Vec::new(),
            deltas: Vec::new(),
            waiver: None,
        }
    }

    /// [`duration_ms`](Self::duration_ms) as a `Duration`.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.duration_ms / 1000.0)
    }

    /// Whether nothing was judged because the clause does not apply (not a skip, not a pass).
    pub fn not_applicable(&self) -> bool {
        matches!(self.verdict, Verdict::NotApplicable(_))
    }

    /// A pass with a part of the check left out because the run's fault (`check --fault`)
    /// removes its meaning, the part named in the observation
    /// ([`crate::checks::ctx::Ctx::fault_removes`]).
    pub fn part_not_applicable(&self) -> bool {
        self.verdict == Verdict::Pass && self.observed.contains(NOT_APPLICABLE_UNDER)
    }

    /// The verdict in a fault matrix's cell: `pass`, `n/a` (the fault removes the whole
    /// check's meaning), `pass, part n/a` (a part of it), `fail`, `skip`, `waived`.
    pub fn matrix_word(&self) -> &'static str {
        match &self.verdict {
            Verdict::NotApplicable(_) => "n/a",
            Verdict::Pass if self.part_not_applicable() => "pass, part n/a",
            verdict => verdict.label(),
        }
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunReport {
    /// How the run was made, for every report's header.
    pub manifest: Manifest,
    /// Every check's result, in run order.
    pub results: Vec<CheckResult>,
    /// The run over time, binned from the requests it sent: the HTML report's charts. `None`
    /// for a run that kept none (a stopped run's partial report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<series::RunSeries>,
}

impl RunReport {
    /// Checks that passed (not the not-applicable ones: nothing was judged there).
    pub fn passed(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.verdict == Verdict::Pass)
            .count()
    }
    /// Checks that failed: one is enough for exit code 1.
    pub fn failed(&self) -> usize {
        self.results.iter().filter(|r| r.verdict.is_fail()).count()
    }
    /// Checks that judged nothing because their clause does not apply, each with its reason.
    pub fn not_applicable(&self) -> usize {
        self.results.iter().filter(|r| r.not_applicable()).count()
    }
    /// Failures a waiver (`--waivers`) accepts for now: they do not fail the run.
    pub fn waived(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Waived(_)))
            .count()
    }
    /// Whether any check other than the ones that judge the run as a whole (`contract`, `API`)
    /// judged its clause: a run that judged none has nothing to say (exit code 2).
    pub fn judged_a_clause(&self) -> bool {
        self.results
            .iter()
            .any(|r| r.id.clause_check() && r.verdict.judged())
    }
    /// Checks skipped for missing evidence (none under `--strict`, which fails them).
    pub fn skipped(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Skip(_)))
            .count()
    }
}

/// The version of the JSON report's layout (`manifest.report_schema`): raised when a member
/// changes meaning or goes, so a `--baseline` of another layout is refused rather than misread.
pub const REPORT_SCHEMA: u32 = 2;

/// Where the JSON report's schema is published, from the repository's root: the `--json` file
/// and the `--baseline` file alike (a baseline is an earlier run's report). It is of one layout
/// version, [`REPORT_SCHEMA`] (its title says which, and `manifest.report_schema` must equal
/// it); `plimsoll docs` regenerates it, and a stale copy fails a test.
pub const REPORT_SCHEMA_PATH: &str = "spec/schemas/report.schema.json";

/// The JSON report's schema (draft 2020-12), as [`REPORT_SCHEMA_PATH`] holds it.
pub fn report_schema() -> serde_json::Value {
    let mut schema = plimsoll_spec::render::root_schema::<RunReport>();
    schema["title"] = format!("Plimsoll run report, schema {REPORT_SCHEMA}").into();
    let version = &mut schema["$defs"]["Manifest"]["properties"]["report_schema"];
    if version.is_object() {
        version["const"] = REPORT_SCHEMA.into();
    }
    schema
}

/// [`report_schema`] as the checked-in file's text.
pub fn report_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&report_schema()).expect("JSON values serialize");
    text.push('\n');
    text
}

/// How the run was made, so a result can be reproduced and compared.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Manifest {
    /// [`REPORT_SCHEMA`]: the layout of this report.
    pub report_schema: u32,
    /// What made the run: `plimsoll` for `check`, the profile's command line for `load`.
    pub tool: String,
    /// The checker's version: which checks ran, and how they judged.
    pub version: String,
    /// The base URL judged: `--target`, or the embedded server's loopback address.
    pub target: String,
    /// `embedded` or `external`.
    pub mode: String,
    /// FNV-1a 64 of the expected contract's TOML text.
    pub contract_hash: String,
    /// The version the expected contract declares.
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
    /// Trials per timing check (`--trials`, else the contract's `tolerances.trials`).
    pub trials: u32,
    /// Seed of the load profile's random draws (`check` draws none).
    pub seed: u64,
    /// When the run started, ms since the Unix epoch.
    pub started_unix_ms: u128,
    /// The fault the run went through (`check --fault`) and every bound it lengthened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<plimsoll_fault::Adjustments>,
    /// Why the run stopped before its end (a stop signal, `--timeout`), when it did: the
    /// results are the checks finished by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}
