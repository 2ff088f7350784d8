//! The suite proves its own checks can fail: it runs against broken variants of the reference
//! server (one piece swapped each) and every variant must fail exactly the clauses listed here,
//! while the correct server passes everything. `docs/conformance.md` shows this matrix; a test
//! keeps it in step (`PLIMSOLL_UPDATE_DOCS=1` rewrites it).

use std::collections::BTreeSet;

use plimsoll_conformance::check::{CheckArgs, embedded_config, execute};
use plimsoll_server::Mutant;

/// Each broken variant and the clauses it must fail — no more, no fewer.
const MATRIX: &[(Mutant, &[&str], &str)] = &[
    (
        Mutant::NoAdmissionLimit,
        &["T1", "T2", "T3", "B3"],
        "admission lets every request run",
    ),
    (
        Mutant::LimitPlusOne,
        &["T1", "T3"],
        "one slot more than the contract",
    ),
    (
        Mutant::Lifo,
        &["T2"],
        "the queue serves the newest waiter first",
    ),
    (Mutant::NoRetryAfter, &["T3"], "503 without Retry-After"),
    (Mutant::RetryAfterZero, &["T3"], "`Retry-After: 0`"),
    (
        Mutant::RetryAfterHttpDate,
        &["T3", "API"],
        "Retry-After as an HTTP-date",
    ),
    (
        Mutant::RefusalWaits,
        &["T3"],
        "a refusal waits for a free slot",
    ),
    (
        Mutant::IgnoreTimeout,
        &["B1"],
        "the deadline is ignored (late 200)",
    ),
    (
        Mutant::TimeoutAs500,
        &["B1", "API"],
        "a timeout is answered 500",
    ),
    (
        Mutant::IgnoreMemoryCap,
        &["B2"],
        "the memory cap is not enforced",
    ),
    (
        Mutant::IgnoreDisconnect,
        &["B3"],
        "client disconnects do not reach the job",
    ),
    (
        Mutant::LeakTempFiles,
        &["B1", "B3", "F1"],
        "temp files survive a failed job",
    ),
    (
        Mutant::WrongFailedStage,
        &["B1", "F1"],
        "`failed_stage` names the next stage",
    ),
    (
        Mutant::WrongCompletedStages,
        &["B1", "F1"],
        "`completed_stages` is empty",
    ),
    (
        Mutant::MalformedAs500,
        &["F2", "API"],
        "a malformed image is answered 500",
    ),
    (Mutant::NoRequestId, &["F4"], "no `X-Request-Id` header"),
    (Mutant::PlainTextLogs, &["F3"], "error logs are plain text"),
    (
        Mutant::LeakSlotOnCancel,
        &["B3"],
        "a cancelled job never gives its slot back",
    ),
    // Serial dispatch breaks the bound's premise too: N never run at once, overflow and
    // orphans after a reconnect drain one at a time.
    (
        Mutant::RelaySerial,
        &["R1", "R2", "R4", "R6"],
        "the relay handles envelopes one at a time",
    ),
    (
        Mutant::RelayUnbounded,
        &["R1", "R4"],
        "the relay pool has no bound",
    ),
    (
        Mutant::RelaySplitFrames,
        &["R5"],
        "frames written without the per-frame lock (split)",
    ),
    (
        Mutant::RelayLeakSlot,
        &["R6"],
        "a relay slot leaks when the socket drops mid-flight",
    ),
];

fn args() -> CheckArgs {
    CheckArgs {
        target: None,
        contract: None,
        allow_overrides: false,
        full_timeouts: false,
        only: Vec::new(),
        skip: Vec::new(),
        trials: Some(2),
        temp_dir: None,
        server_log: None,
        json: None,
        junit: None,
        html: None,
        quiet: true,
    }
}

/// The clauses the suite failed, and why (for the assertion message).
async fn failing_clauses(mutant: Option<Mutant>) -> (BTreeSet<String>, String) {
    let mut config = embedded_config(false).unwrap();
    if let Some(m) = mutant {
        config = config.with_mutant(m);
    }
    let report = execute(&args(), Some(config)).await.unwrap();
    let failed = report.results.iter().filter(|r| r.verdict.is_fail());
    let why = failed
        .clone()
        .map(|r| format!("{}: {:?}", r.id, r.verdict))
        .collect::<Vec<_>>()
        .join("\n");
    (failed.map(|r| r.clause.clone()).collect(), why)
}

async fn assert_caught(mutant: Mutant) {
    let (_, expected, _) = MATRIX.iter().find(|(m, _, _)| *m == mutant).unwrap();
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    let (failed, why) = failing_clauses(Some(mutant)).await;
    assert_eq!(
        failed,
        expected,
        "{}: failed {failed:?}, expected exactly {expected:?}\n{why}",
        mutant.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_passes_every_check() {
    let (failed, why) = failing_clauses(None).await;
    assert!(
        failed.is_empty(),
        "the reference server failed {failed:?}\n{why}"
    );
}

macro_rules! mutant_tests {
    ($($name:ident => $mutant:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                assert_caught(Mutant::$mutant).await;
            }
        )*
    };
}

mutant_tests! {
    caught_no_admission_limit => NoAdmissionLimit,
    caught_limit_plus_one => LimitPlusOne,
    caught_lifo => Lifo,
    caught_no_retry_after => NoRetryAfter,
    caught_retry_after_zero => RetryAfterZero,
    caught_retry_after_http_date => RetryAfterHttpDate,
    caught_refusal_waits => RefusalWaits,
    caught_ignore_timeout => IgnoreTimeout,
    caught_timeout_as_500 => TimeoutAs500,
    caught_ignore_memory_cap => IgnoreMemoryCap,
    caught_ignore_disconnect => IgnoreDisconnect,
    caught_leak_temp_files => LeakTempFiles,
    caught_wrong_failed_stage => WrongFailedStage,
    caught_wrong_completed_stages => WrongCompletedStages,
    caught_malformed_as_500 => MalformedAs500,
    caught_no_request_id => NoRequestId,
    caught_plain_text_logs => PlainTextLogs,
    caught_leak_slot_on_cancel => LeakSlotOnCancel,
    caught_relay_serial => RelaySerial,
    caught_relay_unbounded => RelayUnbounded,
    caught_relay_split_frames => RelaySplitFrames,
    caught_relay_leak_slot => RelayLeakSlot,
}

/// Renders the matrix section of docs/conformance.md from MATRIX.
fn matrix_markdown() -> String {
    let clauses: Vec<&str> = plimsoll_conformance::checks::ALL.to_vec();
    let mut md = String::from("| broken variant | what is broken | ");
    md.push_str(&clauses.join(" | "));
    md.push_str(" |\n|---|---|");
    md.push_str(&"---|".repeat(clauses.len()));
    md.push('\n');
    md.push_str(&format!(
        "| *(reference server)* | nothing | {} |\n",
        vec!["✓"; clauses.len()].join(" | ")
    ));
    for (m, failing, what) in MATRIX {
        let cells: Vec<&str> = clauses
            .iter()
            .map(|c| {
                if failing.contains(c) {
                    "**✗**"
                } else {
                    "✓"
                }
            })
            .collect();
        md.push_str(&format!(
            "| `{}` | {what} | {} |\n",
            m.name(),
            cells.join(" | ")
        ));
    }
    md
}

#[test]
fn every_mutant_is_in_the_matrix() {
    for m in Mutant::ALL {
        let relay = m.name().starts_with("relay-");
        assert!(
            relay || MATRIX.iter().any(|(x, _, _)| *x == m),
            "{} has no row",
            m.name()
        );
    }
}

#[test]
fn docs_show_the_tested_matrix() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/conformance.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (begin, end) = (
        "<!-- mutation-matrix:begin -->\n",
        "<!-- mutation-matrix:end -->",
    );
    let fresh = matrix_markdown();
    let current = doc
        .split(begin)
        .nth(1)
        .and_then(|rest| rest.split(end).next());
    if current != Some(fresh.as_str()) {
        if std::env::var_os("PLIMSOLL_UPDATE_DOCS").is_some() {
            let (head, tail) = match (doc.split_once(begin), doc.split_once(end)) {
                (Some((head, _)), Some((_, tail))) => (head.to_owned(), tail.to_owned()),
                _ => (doc.clone(), String::new()),
            };
            std::fs::write(&path, format!("{head}{begin}{fresh}{end}{tail}")).unwrap();
        } else {
            panic!(
                "docs/conformance.md's mutation matrix is stale; run `PLIMSOLL_UPDATE_DOCS=1 cargo test -p plimsoll-conformance --test mutants docs_show_the_tested_matrix`"
            );
        }
    }
}
