//! The suite proves its own checks can fail: it runs against broken variants of the reference
//! server (one piece swapped each) and every variant must fail exactly the checks listed here,
//! while the correct server passes everything. `docs/conformance.md` shows this matrix and the
//! registry's table of checks; tests keep both in step (`PLIMSOLL_UPDATE_DOCS=1` rewrites them).

use std::collections::BTreeSet;

use plimsoll_conformance::check::{CheckArgs, embedded_config, execute};
use plimsoll_conformance::checks::{CheckId, REGISTRY, markdown_table};
use plimsoll_server::Mutant;
use plimsoll_spec::ClauseId::*;
use plimsoll_spec::Contract;

use CheckId::{Api, Clause};

/// Each broken variant and the checks it must fail — no more, no fewer.
const MATRIX: &[(Mutant, &[CheckId], &str)] = &[
    // B3 judges a freed place by a request admitted where it would otherwise be refused; a
    // pool that never refuses leaves it nothing to judge, so it says so (skip, a failure under
    // --strict) instead of failing for T1's defect.
    (
        Mutant::NoAdmissionLimit,
        &[Clause(T1), Clause(T2), Clause(T3)],
        "admission lets every request run",
    ),
    // T2 orders requests that must wait; with a slot too many the first of them runs at once.
    (
        Mutant::LimitPlusOne,
        &[Clause(T1), Clause(T2), Clause(T3)],
        "one slot more than the contract",
    ),
    (
        Mutant::Lifo,
        &[Clause(T2)],
        "the queue serves the newest waiter first",
    ),
    (
        Mutant::NoRetryAfter,
        &[Clause(T3)],
        "503 without Retry-After",
    ),
    (Mutant::RetryAfterZero, &[Clause(T3)], "`Retry-After: 0`"),
    (
        Mutant::RetryAfterHttpDate,
        &[Clause(T3), Api],
        "Retry-After as an HTTP-date",
    ),
    (
        Mutant::RefusalWaits,
        &[Clause(T3)],
        "a refusal waits for a free slot",
    ),
    (
        Mutant::IgnoreTimeout,
        &[Clause(B1)],
        "the deadline is ignored (late 200)",
    ),
    (
        Mutant::TimeoutAs500,
        &[Clause(B1), Api],
        "a timeout is answered 500",
    ),
    (
        Mutant::IgnoreMemoryCap,
        &[Clause(B2)],
        "the memory cap is not enforced",
    ),
    (
        Mutant::IgnoreDisconnect,
        &[Clause(B3)],
        "client disconnects do not reach the job",
    ),
    (
        Mutant::LeakTempFiles,
        &[Clause(B1), Clause(B3), Clause(F1)],
        "temp files survive a failed job",
    ),
    (
        Mutant::WrongFailedStage,
        &[Clause(B1), Clause(F1)],
        "`failed_stage` names the next stage",
    ),
    (
        Mutant::WrongCompletedStages,
        &[Clause(B1), Clause(F1)],
        "`completed_stages` is empty",
    ),
    (
        Mutant::MalformedAs500,
        &[Clause(F2), Api],
        "a malformed image is answered 500",
    ),
    (
        Mutant::NoRequestId,
        &[Clause(F4)],
        "no `X-Request-Id` header",
    ),
    (
        Mutant::PlainTextLogs,
        &[Clause(F3)],
        "error logs are plain text",
    ),
    (
        Mutant::LeakSlotOnCancel,
        &[Clause(B3)],
        "a cancelled job never gives its slot back",
    ),
    // Serial dispatch breaks the bound's premise too: N never run at once, overflow and
    // orphans after a reconnect drain one at a time.
    (
        Mutant::RelaySerial,
        &[Clause(R1), Clause(R2), Clause(R4), Clause(R6)],
        "the relay handles envelopes one at a time",
    ),
    (
        Mutant::RelayUnbounded,
        &[Clause(R1), Clause(R4)],
        "the relay pool has no bound",
    ),
    (
        Mutant::RelaySplitFrames,
        &[Clause(R5)],
        "frames written without the per-frame lock (split)",
    ),
    (
        Mutant::RelayLeakSlot,
        &[Clause(R6)],
        "a relay slot leaks when the socket drops mid-flight",
    ),
];

fn args() -> CheckArgs {
    CheckArgs {
        target: None,
        contract: None,
        allow_overrides: false,
        strict: false,
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

/// The checks the suite failed, and why (for the assertion message).
async fn failing_checks(mutant: Option<Mutant>) -> (BTreeSet<CheckId>, String) {
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
    let ids = failed.map(|r| r.clause.parse().expect("a result names a check id"));
    (ids.collect(), why)
}

async fn assert_caught(mutant: Mutant) {
    let (_, expected, _) = MATRIX.iter().find(|(m, _, _)| *m == mutant).unwrap();
    let expected: BTreeSet<CheckId> = expected.iter().copied().collect();
    let (failed, why) = failing_checks(Some(mutant)).await;
    assert_eq!(
        failed,
        expected,
        "{}: failed {failed:?}, expected exactly {expected:?}\n{why}",
        mutant.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_passes_every_check() {
    let (failed, why) = failing_checks(None).await;
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

/// Renders the matrix section of docs/conformance.md: a column per check of the registry.
fn matrix_markdown() -> String {
    let columns: Vec<CheckId> = REGISTRY.iter().map(|c| c.id).collect();
    let names: Vec<&str> = columns.iter().map(|id| id.as_str()).collect();
    let mut md = String::from("| broken variant | what is broken | ");
    md.push_str(&names.join(" | "));
    md.push_str(" |\n|---|---|");
    md.push_str(&"---|".repeat(columns.len()));
    md.push('\n');
    md.push_str(&format!(
        "| *(reference server)* | nothing | {} |\n",
        vec!["✓"; columns.len()].join(" | ")
    ));
    for (m, failing, what) in MATRIX {
        let cells: Vec<&str> = columns
            .iter()
            .map(|id| {
                if failing.contains(id) {
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

/// Fails when the section of docs/conformance.md between `<!-- {name}:begin -->` and
/// `<!-- {name}:end -->` is not `fresh`; with `PLIMSOLL_UPDATE_DOCS` set, rewrites it instead.
fn docs_section_is_fresh(name: &str, fresh: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/conformance.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (begin, end) = (
        format!("<!-- {name}:begin -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let current = doc
        .split(&begin)
        .nth(1)
        .and_then(|rest| rest.split(&end).next());
    if current == Some(fresh) {
        return;
    }
    if std::env::var_os("PLIMSOLL_UPDATE_DOCS").is_some() {
        let (head, tail) = match (doc.split_once(&begin), doc.split_once(&end)) {
            (Some((head, _)), Some((_, tail))) => (head.to_owned(), tail.to_owned()),
            _ => (doc.clone(), String::new()),
        };
        std::fs::write(&path, format!("{head}{begin}{fresh}{end}{tail}")).unwrap();
    } else {
        panic!(
            "docs/conformance.md's {name} section is stale; run `PLIMSOLL_UPDATE_DOCS=1 cargo test -p plimsoll-conformance --test mutants docs_`"
        );
    }
}

#[test]
fn docs_show_the_tested_matrix() {
    docs_section_is_fresh("mutation-matrix", &matrix_markdown());
}

#[test]
fn docs_show_the_registered_checks() {
    docs_section_is_fresh("checks", &markdown_table(Contract::embedded()));
}
