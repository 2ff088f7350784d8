//! The suite under injected faults (`check --fault`, `--fault-set quick`): the reference server
//! passes every check under every fault of the quick set — each a pass, or not applicable with
//! the reason the fault removes its meaning — and a bound the fault lengthens still fails a
//! broken server (an adjusted bound is no blanket widening).

use std::time::{Duration, Instant};

use plimsoll::embedded;
use plimsoll_conformance::check::matrix::{self, FaultSet};
use plimsoll_conformance::check::{CheckArgs, execute};
use plimsoll_conformance::checks::CheckId;
use plimsoll_conformance::verdict::Verdict;
use plimsoll_server::Mutant;
use plimsoll_spec::ClauseId;

/// The quick set's three runs took 91 s on the 2-core machine (docs/conformance.md); twice
/// that is a run gone wrong, not a slow machine.
const QUICK_SET_WITHIN: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_passes_the_quick_fault_set() {
    let args = CheckArgs {
        fault_set: Some(FaultSet::Quick),
        ..CheckArgs::embedded()
    };
    let started = Instant::now();
    let matrix = matrix::execute(&args, FaultSet::Quick, async || {
        embedded::start(
            embedded::check_config(false).unwrap(),
            Some(embedded::RELAY_ON_LOOPBACK),
        )
        .await
    })
    .await
    .unwrap();
    let took = started.elapsed();
    assert_eq!(matrix.runs.len(), FaultSet::Quick.specs().len());
    for run in &matrix.runs {
        let wrong: Vec<String> = run
            .report
            .results
            .iter()
            .filter(|r| r.verdict != Verdict::Pass)
            .map(|r| format!("{}: {:?}", r.id, r.verdict))
            .collect();
        assert!(
            wrong.is_empty(),
            "under {}:\n{}",
            run.fault,
            wrong.join("\n")
        );
        // Whatever a fault leaves out, it says so with the fault named.
        for r in &run.report.results {
            if r.not_applicable() || r.part_not_applicable() {
                assert!(
                    r.observed.contains(&run.fault.to_string()),
                    "{} under {}: {}",
                    r.id,
                    run.fault,
                    r.observed
                );
            }
        }
        assert_eq!(
            run.report
                .manifest
                .fault
                .as_ref()
                .and_then(|f| f.fault.clone()),
            Some(run.fault.to_string()),
            "the manifest names the fault"
        );
    }
    let text = matrix::text(&matrix);
    assert!(text.lines().any(|l| l.starts_with("T3 ")), "{text}");
    assert!(took < QUICK_SET_WITHIN, "the quick set took {took:?}");
}

/// `refusal-waits` answers a refusal only once a slot frees: under latency, T3's refusal bound
/// is lengthened by the latency each way (shown), and the variant still fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adjusted_bound_still_fails_a_broken_server() {
    let config = embedded::check_config(false)
        .unwrap()
        .with_mutant(Mutant::RefusalWaits);
    let subject = embedded::start(config, Some(embedded::RELAY_ON_LOOPBACK))
        .await
        .unwrap();
    let args = CheckArgs {
        trials: Some(2),
        only: vec![CheckId::Clause(ClauseId::T3)],
        fault: Some("latency:latency=20,jitter=5".parse().unwrap()),
        ..CheckArgs::embedded()
    };
    let report = execute(&args, subject).await.unwrap();
    let t3 = report
        .results
        .iter()
        .find(|r| r.id.check() == Some(CheckId::Clause(ClauseId::T3)))
        .expect("T3 ran");
    assert!(t3.verdict.is_fail(), "{:?}", t3.verdict);
    assert!(
        t3.expected.contains("100 ms + 50 ms injected"),
        "the adjusted bound is shown: {}",
        t3.expected
    );
}
