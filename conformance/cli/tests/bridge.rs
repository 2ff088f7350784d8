//! Bridge mode end to end: `plimsoll check --bridge-command` starts a bridge, plays the relay it
//! dials and the local handler it relays to, and judges R1–R6 at those two ends. The reference
//! bridge (`plimsoll serve --relay-url … --relay-upstream …`) passes; every broken variant with a
//! bridge row (`bridge [...]` in the server's `mutant/mod.rs`) fails exactly that row; a bridge
//! that exits before dialling stops the run with exit 2 and says why.

#[allow(
    dead_code,
    reason = "the shared helpers; this binary reads reports with two of them"
)]
mod common;

use std::collections::BTreeSet;

use common::{failed, why};
use plimsoll::check::{self, CheckArgs};
use plimsoll_conformance::session::Fatal;
use plimsoll_conformance::verdict::RunReport;
use plimsoll_fault::standard;
use plimsoll_server::Mutant;

/// The reference bridge, `mutant` swapped in when given, as a `--bridge-command`.
fn reference_bridge(mutant: Option<Mutant>) -> String {
    let env = mutant
        .map(|m| format!("PLIMSOLL_MUTANT={} ", m.name()))
        .unwrap_or_default();
    format!(
        "{env}exec {} serve --port 0 --log-file /dev/null --relay-url {{relay_url}} --relay-upstream {{upstream_url}}",
        env!("CARGO_BIN_EXE_plimsoll")
    )
}

async fn run(command: String) -> Result<RunReport, Fatal> {
    run_under(command, None).await
}

/// A bridge run whose relay sockets cross `fault` (`--fault NAME`).
async fn run_under(command: String, fault: Option<&str>) -> Result<RunReport, Fatal> {
    let args = CheckArgs {
        bridge_command: Some(command),
        fault: fault.map(|f| standard::parse(f).unwrap()),
        ..CheckArgs::embedded()
    };
    let subject = check::bridge::subject(&args).await?;
    check::execute(&args, subject).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_bridge_passes_r1_to_r6_judged_at_both_ends() {
    let report = run(reference_bridge(None)).await.unwrap();
    let ids: Vec<String> = report.results.iter().map(|r| r.id.to_string()).collect();
    assert_eq!(ids, ["R1", "R2", "R3", "R4", "R5", "R6"]);
    assert_eq!(report.manifest.mode, "bridge");
    assert!(failed(&report).is_empty(), "{}", why(&report));
    // Judged at the checker's own ends: counts at its upstream, the stop timed by it.
    let r1 = &report.results[0];
    assert!(
        r1.observed.contains("requests at the upstream"),
        "{}",
        r1.observed
    );
    let r6 = &report.results[5];
    assert!(r6.observed.contains("after SIGTERM"), "{}", r6.observed);
}

/// Through a fault the bridge's sockets cross it: the reference bridge survives a relay that
/// vanishes (R6's drop reaches it as a reset) with every clause intact, and a bridge that gives
/// up after a reset is caught by R6, and by every later check left without a socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_vanish_a_bridge_must_dial_again_after_a_reset() {
    let report = run_under(reference_bridge(None), Some("vanish"))
        .await
        .unwrap();
    assert!(failed(&report).is_empty(), "{}", why(&report));
    let fault = report.manifest.fault.as_ref().and_then(|f| f.fault.clone());
    assert_eq!(
        fault.as_deref(),
        Some("reset_peer:on_close=1,stream=upstream")
    );

    let broken = Some(Mutant::RelayResetNoRedial);
    let clean = run(reference_bridge(broken)).await.unwrap();
    assert!(failed(&clean).is_empty(), "{}", why(&clean));
    let vanished = run_under(reference_bridge(broken), Some("vanish"))
        .await
        .unwrap();
    assert!(failed(&vanished).contains("R6"), "{}", why(&vanished));
}

/// The variants with a bridge row (`bridge [...]` in the server's table), in declaration order.
fn bridge_variants() -> Vec<Mutant> {
    Mutant::ALL
        .iter()
        .copied()
        .filter(|m| !m.bridge_fails().is_empty())
        .collect()
}

/// How many tests share the bridge rows: each runs a bridge per variant (about 5 s each), so the
/// rows are cut in this many tests that run side by side rather than one of nearly two minutes.
const SHARDS: usize = 4;

/// Every variant of shard `shard` (the `i`-th bridge variant is in shard `i % SHARDS`) fails
/// exactly its bridge row.
async fn bridge_rows(shard: usize) {
    let variants = bridge_variants();
    assert!(variants.len() >= 10, "{variants:?}");
    let mut wrong = Vec::new();
    for m in variants.into_iter().skip(shard).step_by(SHARDS) {
        let report = run(reference_bridge(Some(m))).await.unwrap();
        m.report_judged("its bridge row");
        let expected: BTreeSet<String> = m.bridge_fails().iter().map(|s| s.to_string()).collect();
        let got = failed(&report);
        if got != expected {
            wrong.push(format!(
                "{}: failed {got:?}, expected {expected:?}\n{}",
                m.name(),
                why(&report)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// One test per shard of the bridge rows (`every_bridge_variant_fails_exactly_its_row::shard_0`,
/// …), and how many there are.
macro_rules! bridge_row_tests {
    ($($shard:ident = $index:literal),* $(,)?) => {
        mod every_bridge_variant_fails_exactly_its_row {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $shard() {
                    super::bridge_rows($index).await;
                }
            )*
        }

        /// The shards the tests above run.
        const SHARD_TESTS: &[usize] = &[$($index),*];
    };
}

bridge_row_tests!(shard_0 = 0, shard_1 = 1, shard_2 = 2, shard_3 = 3);

/// A shard without its test would leave its variants unjudged.
#[test]
fn every_shard_of_the_bridge_rows_has_its_test() {
    assert_eq!(SHARD_TESTS, (0..SHARDS).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_bridge_that_exits_before_dialling_stops_the_run_saying_why() {
    let e = run("echo no relay here; exit 3 # {relay_url}".to_owned())
        .await
        .expect_err("a bridge that never dials cannot be judged");
    let text = e.to_string();
    assert!(matches!(e, Fatal::Unreachable(_)), "{text}");
    assert!(
        text.contains("exited (exit status: 3) before it dialled"),
        "{text}"
    );
    assert!(text.contains("no relay here"), "{text}");
}

#[tokio::test]
async fn a_command_that_cannot_know_the_relay_is_a_usage_error() {
    let e = run("true".to_owned()).await.unwrap_err();
    assert!(matches!(e, Fatal::Usage(_)), "{e}");
}
