//! `plimsoll load` proves its profiles can fail: each passes against the reference server, and
//! broken variants of it (the `check` harness's mutants) fail the profile that targets their
//! flaw. Durations are cut down from the contract's so the suite stays quick; the tests take a
//! file lock so they never load the machine at the same time as each other.

mod common;

use std::time::Instant;

use common::gate::{assert_reports, gate, serve_scaled};
use common::{failed, places, result, why};
use plimsoll::embedded::{self, load_config as embedded_config};
use plimsoll::load::{LoadArgs, ProfileName, execute};
use plimsoll_conformance::verdict::RunReport;
use plimsoll_server::{Config, Mutant};

async fn run(profile: ProfileName, duration: Option<f64>, config: Config) -> RunReport {
    let mut args = LoadArgs::new(profile);
    args.duration = duration;
    args.waves = Some(3);
    let started = Instant::now();
    let report = execute(&args, embedded::start(config, None).await.unwrap())
        .await
        .unwrap();
    eprintln!(
        "{} took {:.1} s",
        profile.as_str(),
        started.elapsed().as_secs_f64()
    );
    report
}

fn assert_passes(report: &RunReport) {
    assert!(
        failed(report).is_empty(),
        "failed {:?}\n{}",
        failed(report),
        why(report)
    );
    assert_eq!(report.skipped(), 0, "{}", why(report));
}

/// The profile fails, and among its failures are `must` (other verdicts may fail too).
fn assert_fails(report: &RunReport, must: &[&str]) {
    let failed = failed(report);
    for id in must {
        assert!(
            failed.contains(*id),
            "{id} passed; failed {failed:?}\n{}",
            why(report)
        );
    }
}

fn mutant(m: Mutant) -> Config {
    embedded_config().unwrap().with_mutant(m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_admits_exactly_the_workers() {
    let _place = places::one();
    let report = run(ProfileName::Burst, None, embedded_config().unwrap()).await;
    assert_passes(&report);
    let burst = result(&report, "L-burst");
    assert!(
        burst.observed.contains("4/16, 4/16, 4/16"),
        "{}",
        burst.observed
    );
    assert_eq!(burst.timeline.len(), 48);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_admits_workers_plus_queue_when_there_is_a_queue() {
    let _place = places::one();
    // `check`'s embedded server: a queue of 2, scaled timeouts.
    let config = embedded::check_config(false).unwrap();
    let report = run(ProfileName::Burst, None, config).await;
    assert_passes(&report);
    let burst = result(&report, "L-burst");
    assert!(
        burst.observed.contains("6/16, 6/16, 6/16"),
        "{}",
        burst.observed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_matches_the_prediction() {
    let _place = places::one();
    let report = run(ProfileName::Steady, Some(6.0), embedded_config().unwrap()).await;
    assert_passes(&report);
    let r = result(&report, "L-steady.refusals");
    assert!(r.expected.contains("Engset"), "{}", r.expected);
    // The run over time, for the HTML report's charts: the pool's attempts binned, its gauges
    // as read, and the band the verdict judged by.
    let series = report.series.as_ref().expect("a load run keeps its series");
    let pool = &series.pools[0];
    assert_eq!(pool.pool, "digitize");
    let sent: u32 = pool.bins.iter().map(|b| b.sent).sum();
    assert!(sent > 0 && pool.bins.iter().any(|b| b.p99_ms.is_some()));
    assert!(pool.predicted_refused.is_some() && !pool.gauges.is_empty());
    let page = plimsoll_report::html::render(&report);
    assert_eq!(page.matches("<figure class=\"chart\"").count(), 4);
    assert!(page.contains("predicted band"), "the band is drawn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_keeps_workers_busy_and_refuses_fast() {
    let _place = places::one();
    let report = run(ProfileName::Overload, Some(5.0), embedded_config().unwrap()).await;
    assert_passes(&report);
}

/// The overload profile on Locust's distributed mode: a master and two worker processes on
/// loopback, judged by the same verdicts as goose's run. Needs Locust for `PLIMSOLL_PYTHON`
/// (the test command, `bash ci/test.sh`, installs it into a virtual environment and sets it).
async fn run_on_locust(profile: ProfileName, duration: f64, config: Config) -> RunReport {
    let mut args = LoadArgs::new(profile);
    args.duration = Some(duration);
    args.engine = plimsoll::load::EngineName::Locust;
    args.locust_workers = 2;
    match execute(&args, embedded::start(config, None).await.unwrap()).await {
        Ok(report) => report,
        Err(e) => panic!(
            "the Locust run could not be judged (is Locust installed for PLIMSOLL_PYTHON? `bash ci/test.sh` installs it): {e}"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_on_locust_with_two_workers_passes_like_goose() {
    let _place = places::one();
    let report = run_on_locust(ProfileName::Overload, 5.0, embedded_config().unwrap()).await;
    assert_passes(&report);
    let refusals = result(&report, "L-overload.refusals");
    assert!(
        refusals
            .evidence
            .iter()
            .any(|e| e.starts_with("Locust (2 workers) counted digitize: ")),
        "{:?}",
        refusals.evidence
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_admission_limit_fails_overload_on_locust() {
    let _place = places::one();
    let report = run_on_locust(ProfileName::Overload, 4.0, mutant(Mutant::NoAdmissionLimit)).await;
    assert!(
        failed(&report).contains("L-overload.refusals"),
        "{}",
        why(&report)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_stays_flat_and_gives_every_slot_back() {
    let _place = places::one();
    let report = run(ProfileName::Soak, Some(5.0), embedded_config().unwrap()).await;
    assert_passes(&report);
    let temp = result(&report, "L-soak.temp-files");
    assert!(
        !temp.evidence[0].starts_with("0 requests abandoned"),
        "{:?}",
        temp.evidence
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_admission_limit_fails_burst() {
    let _place = places::one();
    let report = run(ProfileName::Burst, None, mutant(Mutant::NoAdmissionLimit)).await;
    assert_fails(&report, &["L-burst", "L-burst.busy-limit"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_plus_one_fails_burst() {
    let _place = places::one();
    let report = run(ProfileName::Burst, None, mutant(Mutant::LimitPlusOne)).await;
    assert_fails(&report, &["L-burst", "L-burst.busy-limit"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_plus_one_fails_the_steady_prediction() {
    let _place = places::one();
    // The prediction alone must catch one slot too many, whatever the gauge says.
    let report = run(ProfileName::Steady, Some(8.0), mutant(Mutant::LimitPlusOne)).await;
    assert_fails(&report, &["L-steady.refusals"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_waits_fails_overload() {
    let _place = places::one();
    let report = run(
        ProfileName::Overload,
        Some(5.0),
        mutant(Mutant::RefusalWaits),
    )
    .await;
    assert_fails(&report, &["L-overload.refusal-latency"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaked_slots_on_cancel_fail_soak() {
    let _place = places::one();
    let report = run(
        ProfileName::Soak,
        Some(6.0),
        mutant(Mutant::LeakSlotOnCancel),
    )
    .await;
    assert_fails(&report, &["L-soak.recovery"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaked_temp_files_fail_soak() {
    let _place = places::one();
    // Abandoned requests are failed jobs; this variant leaves their temp dirs behind.
    let report = run(ProfileName::Soak, Some(5.0), mutant(Mutant::LeakTempFiles)).await;
    assert_fails(&report, &["L-soak.temp-files", "L-soak.recovery"]);
}

#[test]
fn the_gate_loads_a_conforming_server_in_another_process() {
    let _place = places::one();
    let dir = tempfile::tempdir().unwrap();
    let (_served, url) = serve_scaled(dir.path(), &[]);
    let started = Instant::now();
    let (status, reports) = gate(&url, dir.path(), "burst overload");
    eprintln!("gate took {:.1} s", started.elapsed().as_secs_f64());
    assert!(status.success(), "gate failed: {status}");
    assert_reports(&reports, &["load-burst", "load-overload"]);
    let junit = std::fs::read_to_string(reports.join("load-overload.junit.xml")).unwrap();
    assert!(junit.contains("L-overload.refusal-latency"), "{junit}");
    assert!(!junit.contains("<failure"), "{junit}");
}

#[test]
fn the_gate_fails_a_server_that_admits_one_too_many() {
    let _place = places::one();
    let dir = tempfile::tempdir().unwrap();
    // Test builds of the binary carry the mutants (dev-dependency feature).
    let (_served, url) = serve_scaled(dir.path(), &[("PLIMSOLL_MUTANT", "limit-plus-one")]);
    let (status, reports) = gate(&url, dir.path(), "burst");
    assert_eq!(status.code(), Some(1), "gate passed a broken server");
    let junit = std::fs::read_to_string(reports.join("load-burst.junit.xml")).unwrap();
    assert!(junit.contains("<failure"), "{junit}");
}
