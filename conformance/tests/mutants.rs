//! The suite proves its own checks can fail: it runs against broken variants of the reference
//! server (one piece swapped each) and every variant must fail exactly the checks listed here,
//! while the correct server passes everything. `docs/conformance.md` shows this matrix and the
//! registry's table of checks; tests keep both in step (`PLIMSOLL_UPDATE_DOCS=1` rewrites them).
//!
//! Cost: the reference server runs the whole suite; a broken variant runs only the checks it must
//! fail (plus those that provoke the replies they judge, [`ALSO_RUN`]), and must fail exactly
//! those. `PLIMSOLL_MUTANTS_FULL=1` runs the whole suite against every variant instead, which
//! also proves every ✓ cell of the matrix (about 20 minutes on a 2-core machine).

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
    // The rows below are the holes. Several are caught only by the client-evidence
    // checks (T1 burst timings, T3 two wait levels, B1 queued deadline and stalled upload, B3
    // probe after a drop, B2 just under the cap, capacity proofs after faults); until those
    // merge, `reference-server/tests/server/mutants_*.rs` show each variant misbehaves.
    (
        Mutant::ConstantRetryAfter,
        &[Clause(T3)],
        "Retry-After is always 1 s, whatever the load",
    ),
    (
        Mutant::DeadlineFromStart,
        &[Clause(B1)],
        "the deadline counts from the worker's start (queue time free)",
    ),
    (
        Mutant::GaugeDropsOnDisconnect,
        &[Clause(B3)],
        "on a disconnect the gauge drops but the job runs on, holding its slot",
    ),
    (
        Mutant::SlotLeakHonestGauge,
        &[Clause(B3)],
        "a cancelled job's slot leaks; `/metrics` hides it",
    ),
    (
        Mutant::ExportUnbounded,
        &[Clause(T1), Clause(T3)],
        "the export pool admits everything",
    ),
    (
        Mutant::BodyIdMismatch,
        &[Clause(F4)],
        "503/504 bodies carry another `request_id` than the header",
    ),
    (
        Mutant::RelayWrongId,
        &[Clause(R3)],
        "concurrent relay responses go out under each other's ids",
    ),
    (
        Mutant::LeakTempOnTimeout,
        &[Clause(B1)],
        "a timed-out job's temp dir is kept",
    ),
    (
        Mutant::LeakTempOnPanic,
        &[Clause(F1)],
        "a panicked job's temp dir is kept",
    ),
    (
        Mutant::MemoryCapTooLow,
        &[Clause(B2)],
        "the memory cap is half the contract's",
    ),
    (
        Mutant::NoHeadTimeout,
        &[Clause(B4)],
        "a stalled or idle connection is never closed",
    ),
    (
        Mutant::NoConnectionCap,
        &[Clause(B4)],
        "every connection is served, however many are open",
    ),
    (
        Mutant::HeadTimeoutTooShort,
        &[Clause(B4)],
        "connections are closed at a quarter of the head timeout",
    ),
    (
        Mutant::NoServerTiming,
        &[Clause(T1), Clause(T2)],
        "no `Server-Timing` header",
    ),
    (
        Mutant::WrongLogStage,
        &[Clause(F3)],
        "the error log's `stage` is not the failed stage",
    ),
    (
        Mutant::UploadHoldsSlot,
        &[Clause(B1)],
        "a slow upload holds a worker slot",
    ),
    (
        Mutant::ContractClaimsLooser,
        &[CheckId::Contract, Clause(B3)],
        "`/v1/contract` claims a 5 s stop bound and 50x tolerances; a dropped job runs 2.5 s",
    ),
    // Like no-admission-limit: nothing is ever refused, so B3 cannot see a place free and
    // says so (skip) rather than fail for T1's defect; T1 catches the clamp by client timings.
    (
        Mutant::ClampedBusyGauge,
        &[Clause(T1), Clause(T2), Clause(T3)],
        "no admission limit; `/metrics` clamps the busy gauge to the limit",
    ),
];

/// Checks a variant's run needs besides those it must fail: the ones whose replies the failing
/// checks judge (F4 and API judge every reply of the run).
const ALSO_RUN: &[(Mutant, &[CheckId])] = &[(
    Mutant::BodyIdMismatch,
    &[Clause(T3), Clause(B1)], // its 503s and 504s
)];

/// Whether every variant runs the whole suite (`PLIMSOLL_MUTANTS_FULL=1`).
fn full_matrix() -> bool {
    std::env::var_os("PLIMSOLL_MUTANTS_FULL").is_some_and(|v| v != "0")
}

/// The checks a run makes: all of them for the reference server (or in a full-matrix run),
/// else the variant's row and what provokes the replies its row judges.
fn args(mutant: Option<Mutant>) -> CheckArgs {
    let only = match mutant {
        Some(m) if !full_matrix() => {
            let row = MATRIX.iter().find(|(x, _, _)| *x == m).map(|(_, c, _)| *c);
            let also = ALSO_RUN.iter().find(|(x, _)| *x == m).map(|(_, c)| *c);
            row.into_iter().chain(also).flatten().copied().collect()
        }
        _ => Vec::new(),
    };
    CheckArgs {
        trials: Some(2),
        only,
        ..CheckArgs::embedded()
    }
}

/// The checks the suite failed, and why (for the assertion message).
async fn failing_checks(mutant: Option<Mutant>) -> (BTreeSet<CheckId>, String) {
    let mut config = embedded_config(false).unwrap();
    if let Some(m) = mutant {
        config = config.with_mutant(m);
    }
    let report = execute(&args(mutant), Some(config)).await.unwrap();
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
    caught_constant_retry_after => ConstantRetryAfter,
    caught_deadline_from_start => DeadlineFromStart,
    caught_gauge_drops_on_disconnect => GaugeDropsOnDisconnect,
    caught_slot_leak_honest_gauge => SlotLeakHonestGauge,
    caught_export_unbounded => ExportUnbounded,
    caught_body_id_mismatch => BodyIdMismatch,
    caught_relay_wrong_id => RelayWrongId,
    caught_leak_temp_on_timeout => LeakTempOnTimeout,
    caught_leak_temp_on_panic => LeakTempOnPanic,
    caught_memory_cap_too_low => MemoryCapTooLow,
    caught_no_head_timeout => NoHeadTimeout,
    caught_no_connection_cap => NoConnectionCap,
    caught_head_timeout_too_short => HeadTimeoutTooShort,
    caught_no_server_timing => NoServerTiming,
    caught_wrong_log_stage => WrongLogStage,
    caught_upload_holds_slot => UploadHoldsSlot,
    caught_contract_claims_looser => ContractClaimsLooser,
    caught_clamped_busy_gauge => ClampedBusyGauge,
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

/// Architecture invariant: every clause has at least one broken variant that must fail it, so
/// every check is proved able to fail.
#[test]
fn every_clause_has_a_broken_variant() {
    for id in plimsoll_spec::ClauseId::ALL {
        assert!(
            MATRIX
                .iter()
                .any(|(_, fails, _)| fails.contains(&Clause(id))),
            "no broken variant in MATRIX must fail {id}"
        );
    }
}

#[test]
fn every_mutant_is_in_the_matrix() {
    for m in Mutant::ALL {
        assert!(
            MATRIX.iter().any(|(x, _, _)| *x == m),
            "{} has no row",
            m.name()
        );
    }
}

/// Fails when the section of docs/conformance.md between `<!-- {name}:begin -->` and
/// `<!-- {name}:end -->` is not `fresh`; with `PLIMSOLL_UPDATE_DOCS` set, rewrites it instead.
fn docs_section_is_fresh(name: &str, fresh: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/conformance.md");
    let doc = std::fs::read_to_string(&path).expect("docs/conformance.md is readable");
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

/// One test for both generated sections: two tests rewriting the same file in parallel would
/// race (each writes the document it read, without the other's section).
#[test]
fn docs_show_the_tested_matrix_and_the_registered_checks() {
    docs_section_is_fresh("mutation-matrix", &matrix_markdown());
    docs_section_is_fresh("checks", &markdown_table(Contract::embedded()));
}
