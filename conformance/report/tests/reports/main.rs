//! The report renderings from a hand-built run: one pass, one fail, one skip. Each rendering is
//! tested in its own module; the run they all render, and the preview switch, are here.
//!
//! Set `PLIMSOLL_REPORT_PREVIEW=DIR` to also leave the rendered files in DIR for a look.

mod charts;
mod files;
mod html;
mod json;
mod junit;
mod markdown;
mod matrix;
mod terminal;
mod terminal_lines;
mod xml;

use std::path::Path;

use plimsoll_conformance::verdict::{
    CheckResult, Lane, LaneOutcome, Manifest, ResultId, RunReport, Verdict,
};
use plimsoll_spec::{Adopted, ClauseId, Difference, Refused};

const FAIL_REASON: &str = "Retry-After 5 s is 400% off the p50 of 1.0 s";
const SKIP_REASON: &str = "needs --temp-dir";
const HOSTILE: &str = "<script>alert(1)</script>";

fn lane(
    label: &str,
    start: f64,
    run: Option<f64>,
    end: f64,
    outcome: LaneOutcome,
    status: Option<u16>,
) -> Lane {
    Lane {
        label: label.to_string(),
        request_id: Some(format!("req-{label}")),
        start_ms: start,
        run_start_ms: run,
        end_ms: end,
        outcome,
        status,
        pool: None,
    }
}

/// The result id of the check `id` (`T1`, `contract`).
fn check(id: &str) -> ResultId {
    ResultId::Check(id.parse().expect("a check id"))
}

fn sample() -> RunReport {
    let pass = CheckResult {
        id: check("T1"),
        title: "At most 2 digitize jobs run at once".into(),
        expected: "at most 2 running".into(),
        observed: "2 running, 3 queued".into(),
        verdict: Verdict::Pass,
        duration_ms: 412.6,
        evidence: vec!["req-a ran 0–200 ms".into(), "req-c queued 200 ms".into()],
        trials_ms: vec![401.0, 412.6, 398.2],
        timeline: vec![
            lane("job 1", 0.0, Some(1.0), 200.0, LaneOutcome::Ok, Some(200)),
            lane("job 2", 2.0, Some(3.0), 210.0, LaneOutcome::Ok, Some(200)),
            lane("job 3", 4.0, Some(201.0), 400.0, LaneOutcome::Ok, Some(200)),
            lane("job 4", 5.0, Some(211.0), 405.0, LaneOutcome::Ok, Some(200)),
            lane("job 5", 6.0, None, 7.0, LaneOutcome::Refused, Some(503)),
        ],
        figures: Vec::new(),
        deltas: Vec::new(),
        waiver: None,
    };
    let fail = CheckResult {
        id: check("T3"),
        title: "Retry-After tracks the median job time".into(),
        expected: "Retry-After within 20% of the observed p50 job time (1.0 s), rounded up to whole seconds"
            .into(),
        observed: format!("{HOSTILE} Retry-After: 5 s & rising"),
        verdict: Verdict::Fail(FAIL_REASON.into()),
        duration_ms: 1234.0,
        evidence: vec!["req-7 Retry-After: 5".into(), "x < y & z \"quoted\"".into()],
        trials_ms: vec![],
        timeline: vec![
            lane("<b>bold</b>", 0.0, Some(0.5), 900.0, LaneOutcome::Ok, Some(200)),
            lane("slow", 1.0, Some(300.0), 1200.0, LaneOutcome::TimedOut, Some(504)),
            lane("gone", 2.0, Some(350.0), 700.0, LaneOutcome::Cancelled, None),
            lane("broken", 3.0, Some(3.0), 50.0, LaneOutcome::Failed, Some(500)),
            lane("unknown queue", 4.0, None, 600.0, LaneOutcome::Ok, Some(200)),
            lane("refused", 5.0, None, 5.0, LaneOutcome::Refused, Some(503)),
        ],
        figures: Vec::new(),
        deltas: Vec::new(),
        waiver: None,
    };
    let skip = CheckResult {
        id: check("F4"),
        title: "Temp files are removed after failure".into(),
        expected: "no files left in the temp dir".into(),
        observed: String::new(),
        verdict: Verdict::Skip(SKIP_REASON.into()),
        duration_ms: 0.0,
        evidence: vec![],
        trials_ms: vec![],
        timeline: vec![],
        figures: Vec::new(),
        deltas: Vec::new(),
        waiver: None,
    };
    RunReport {
        manifest: Manifest {
            report_schema: plimsoll_conformance::verdict::REPORT_SCHEMA,
            tool: "plimsoll".into(),
            version: "0.1.0".into(),
            target: "http://127.0.0.1:8080/?a=1&b=<2>".into(),
            mode: "embedded".into(),
            contract_hash: "cbf29ce484222325".into(),
            contract_version: "1.0.0".into(),
            differences: vec![
                adopted().difference.to_string(),
                refused().difference.to_string(),
            ],
            adopted: vec![adopted()],
            refused: vec![refused()],
            claim_unreadable: None,
            scaled: true,
            strict: false,
            effective: serde_json::json!({"pools": {"digitize": {"workers": 2}}}),
            trials: 5,
            seed: 42,
            started_unix_ms: 1_767_225_600_000,
            fault: None,
            incomplete: None,
        },
        results: vec![pass, fail, skip],
        series: None,
    }
}

fn adopted() -> Adopted {
    Adopted {
        difference: Difference {
            path: "pools.digitize.queue.capacity".into(),
            ours: Some(0.into()),
            theirs: Some(2.into()),
        },
        clause: ClauseId::T2,
        env: "QUEUE_CAPACITY".into(),
    }
}

fn refused() -> Refused {
    Refused {
        difference: Difference {
            path: "pools.digitize.cancellation.stop_within_ms".into(),
            ours: Some(1000.into()),
            theirs: Some(5000.into()),
        },
        reason: "not an overridable field: the contract's own value applies".into(),
    }
}

/// Leaves a copy in `$PLIMSOLL_REPORT_PREVIEW` when set, for eyes and screenshots.
fn preview(name: &str, text: &str) {
    if let Ok(dir) = std::env::var("PLIMSOLL_REPORT_PREVIEW") {
        std::fs::write(Path::new(&dir).join(name), text).unwrap();
    }
}
