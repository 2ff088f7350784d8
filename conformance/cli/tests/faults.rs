//! The suite under injected faults (`check --fault`, `--fault-set full`): the reference server
//! passes every check under every standard fault (one test each, `under::*`) — each a pass, or not applicable with the
//! reason the fault removes its meaning —, a bound the fault lengthens still fails a broken
//! server (an adjusted bound is no blanket widening), and each broken variant only a fault
//! reveals passes its checks without the fault and fails exactly them under it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use plimsoll::check::matrix::{self, FaultSet};
use plimsoll::check::{CheckArgs, execute};
use plimsoll::embedded;
use plimsoll_conformance::checks::{CheckId, REGISTRY};
use plimsoll_conformance::verdict::RunReport;
use plimsoll_conformance::verdict::Verdict;
use plimsoll_fault::standard;
use plimsoll_server::Mutant;
use plimsoll_spec::ClauseId;

/// One standard fault's run took 27 to 34 s on the 2-core machine (docs/faults.md); four
/// times that is a run gone wrong, not a slow or busy machine.
const FAULT_RUN_WITHIN: Duration = Duration::from_secs(120);

/// The reference server passes every check under the standard fault `name` (each a pass, or not
/// applicable with the reason the fault removes its meaning, the fault named), and the
/// manifest names the fault. One test per fault, so the set's runs go side by side.
async fn passes_under(name: &str) {
    let started = Instant::now();
    let report = run_as(None, CheckArgs::embedded(), Some(name)).await;
    let took = started.elapsed();
    let fault = standard::named(name).unwrap().fault();
    let wrong: Vec<String> = report
        .results
        .iter()
        .filter(|r| !matches!(r.verdict, Verdict::Pass | Verdict::NotApplicable(_)))
        .map(|r| format!("{}: {:?}", r.id, r.verdict))
        .collect();
    assert!(wrong.is_empty(), "under {fault}:\n{}", wrong.join("\n"));
    // Whatever a fault leaves out, it says so with the fault named (what the contract gives
    // nothing to judge is not the fault's).
    let undeclared = undeclared();
    for r in &report.results {
        if r.id.check().is_some_and(|id| undeclared.contains(&id)) {
            continue;
        }
        if r.not_applicable() || r.part_not_applicable() {
            assert!(
                r.observed.contains(&fault.to_string()),
                "{} under {fault}: {}",
                r.id,
                r.observed
            );
        }
    }
    assert_eq!(
        report.manifest.fault.as_ref().and_then(|f| f.fault.clone()),
        Some(fault.to_string()),
        "the manifest names the fault"
    );
    // The run over time keeps the fault's stretch, which the HTML report's charts shade.
    let series = report
        .series
        .as_ref()
        .expect("a check run keeps its series");
    let shaded = series.fault.as_ref().map(|f| f.label.clone());
    assert_eq!(
        shaded,
        Some(fault.to_string()),
        "the series names the fault"
    );
    let page = plimsoll_report::html::render(&report);
    assert!(page.contains("Shaded red: the fault"), "the charts say so");
    assert!(
        took < FAULT_RUN_WITHIN,
        "the run under {name} took {took:?}"
    );
}

/// One test per standard fault (`under::latency`, …), and the list of them.
macro_rules! fault_tests {
    ($($fault:ident),* $(,)?) => {
        mod under {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $fault() {
                    super::passes_under(stringify!($fault)).await;
                }
            )*
        }

        /// The standard faults the tests above run.
        const TESTED: &[&str] = &[$(stringify!($fault)),*];
    };
}

fault_tests!(latency, slicer, bandwidth, trickle, vanish);

/// A standard fault added to the set without a test of its own fails here.
#[test]
fn every_standard_fault_has_its_test() {
    let standard: Vec<&str> = standard::STANDARD.iter().map(|f| f.name).collect();
    assert_eq!(TESTED, standard);
}

/// `--fault-set full` runs the suite once per standard fault and prints a row per check with a
/// cell per fault (what each run judged is `under::*`'s; here only the contract runs, so the
/// set's machinery is shown in seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_fault_set_runs_every_fault_and_prints_its_matrix() {
    let args = CheckArgs {
        fault_set: Some(FaultSet::Full),
        only: vec![CheckId::Contract],
        ..CheckArgs::embedded()
    };
    let matrix = matrix::execute(&args, FaultSet::Full, async |run: &CheckArgs| {
        embedded::start(
            embedded::check_config(false).unwrap(),
            Some(run.relay_end()),
        )
        .await
    })
    .await
    .unwrap();
    let names: Vec<&str> = matrix.runs.iter().map(|r| r.name).collect();
    let standard: Vec<&str> = FaultSet::Full.faults().iter().map(|f| f.name).collect();
    assert_eq!(names, standard);
    for run in &matrix.runs {
        assert_eq!(
            run.report
                .manifest
                .fault
                .as_ref()
                .and_then(|f| f.fault.clone()),
            Some(run.fault.to_string()),
            "the manifest of the {} run names its fault",
            run.name
        );
    }
    assert_eq!(matrix.failed(), 0);
    let text = matrix::text(&matrix);
    assert!(text.lines().any(|l| l.starts_with("contract ")), "{text}");
}

/// `refusal-waits` answers a refusal only once a slot frees: under latency, T3's refusal bound
/// is lengthened by the latency each way (shown), and the variant still fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adjusted_bound_still_fails_a_broken_server() {
    let t3 = CheckId::Clause(ClauseId::T3);
    let jitter = Some("latency:latency=20,jitter=5");
    let report = run(Some(Mutant::RefusalWaits), &check_ids(&[t3]), jitter).await;
    let t3 = report
        .results
        .iter()
        .find(|r| r.id.check() == Some(t3))
        .expect("T3 ran");
    assert!(t3.verdict.is_fail(), "{:?}", t3.verdict);
    assert!(
        t3.expected.contains("100 ms + 50 ms injected"),
        "the adjusted bound is shown: {}",
        t3.expected
    );
}

/// A path so slow one way that the checker sees its saturation of a pool full only after its
/// own holds have ended (every answer 700 ms late, the gauges' included: two polls of two
/// gauges each take 2.8 s, the longest hold 1.5 s): no refusal can be timed into a full pool,
/// and T3 says so (a skip) rather than failing the reference server for the 200s such refusals
/// get, as it did before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturation_seen_full_too_late_skips_t3_rather_than_failing_the_target() {
    let t3 = CheckId::Clause(ClauseId::T3);
    let slow = "latency:latency=700,stream=downstream";
    let report = run(None, &check_ids(&[t3]), Some(slow)).await;
    let t3 = (report.results.iter())
        .find(|r| r.id.check() == Some(t3))
        .expect("T3 ran");
    let Verdict::Skip(why) = &t3.verdict else {
        panic!("{:?}\n{:#?}", t3.verdict, t3.evidence);
    };
    assert!(why.contains("too late for their"), "{why}");
}

/// B4 fills the connection cap 32 connections at a time, a round trip per wave: through 150 ±
/// 150 ms on every answer, 16 waves may take 4.8 s against the 2 s head timeout, which closes
/// the first connections, idle, before the last opened. The cap is then named as not
/// applicable under the fault (it failed the reference server before, "so the cap cannot be
/// judged"); the idle closes are still judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_the_fault_leaves_no_time_to_fill_is_not_judged_and_says_why() {
    let b4 = check_ids(&[CheckId::Clause(ClauseId::B4)]);
    let report = run(
        None,
        &b4,
        Some("latency:latency=150,jitter=150,stream=downstream"),
    )
    .await;
    let r = (report.results.iter())
        .find(|r| r.id.check() == Some(CheckId::Clause(ClauseId::B4)))
        .expect("B4 ran");
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.observed);
    assert!(
        r.observed
            .contains("the connection cap not applicable under"),
        "{}",
        r.observed
    );
}

/// A far client, 200 ms each way: T1's busy gauge, polled one round trip at a time, may not
/// land a sample inside a burst's 400 ms hold; when none lands, that peak is named as not
/// applicable under the fault (it failed the reference server before, "peaked at 0"), and when
/// one does, it is judged. R2's fast request is judged against half the slow hold past the
/// round trip (it failed before, "it waited"). Both still fail what they catch: a pool without
/// an admission limit by the client's timings, a relay that serves one envelope at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_far_client_keeps_t1_and_r2_judging_what_the_round_trips_leave_judgeable() {
    let far = "latency:latency=200";
    let (t1, r2) = (CheckId::Clause(ClauseId::T1), CheckId::Clause(ClauseId::R2));
    let both = check_ids(&[t1, r2]);
    let report = run(None, &both, Some(far)).await;
    let judged =
        (report.results.iter()).filter(|r| r.id.check().is_some_and(|id| both.contains(&id)));
    for r in judged {
        assert_eq!(r.verdict, Verdict::Pass, "{}: {}", r.id, r.observed);
        for note in r
            .observed
            .split("; ")
            .filter(|n| n.contains("not applicable"))
        {
            assert!(
                note.contains("peak not applicable under latency:latency=200"),
                "{}: {note}",
                r.id
            );
        }
    }
    let t1s = check_ids(&[t1]);
    assert_eq!(failed(Mutant::NoAdmissionLimit, &t1s, Some(far)).await, t1s);
    let r2s = check_ids(&[r2]);
    assert_eq!(failed(Mutant::RelaySerial, &r2s, Some(far)).await, r2s);
}

/// `timeout` and `blackhole` withhold every answer: each check is not applicable, saying why,
/// and the run sends nothing, so it ends at once instead of waiting out every bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_that_drops_every_byte_leaves_nothing_to_judge() {
    for spec in ["blackhole", "timeout:timeout=500,stream=downstream"] {
        let started = Instant::now();
        let report = run_as(None, CheckArgs::embedded(), Some(spec)).await;
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{spec}: {:?}",
            started.elapsed()
        );
        let judged: Vec<_> = report
            .results
            .iter()
            .filter(|r| r.id.check() != Some(CheckId::Contract))
            .filter(|r| !r.id.check().is_some_and(|id| undeclared().contains(&id)))
            .filter(|r| !(r.not_applicable() && r.observed.contains("nothing the check judges")))
            .map(|r| format!("{}: {:?} {}", r.id, r.verdict, r.observed))
            .collect();
        assert!(judged.is_empty(), "{spec}: {judged:#?}");
        assert!(report.results.len() > 10, "{spec}: every check reported");
    }
}

/// The checks the embedded contract gives nothing to judge (T4: it declares no rate limit):
/// not applicable under any fault, or none.
fn undeclared() -> BTreeSet<CheckId> {
    REGISTRY
        .iter()
        .filter(|c| (c.applies)(plimsoll_spec::Contract::embedded()).is_err())
        .map(|c| c.id)
        .collect()
}

/// The checks `ids` names, as a set.
fn check_ids(ids: &[CheckId]) -> BTreeSet<CheckId> {
    ids.iter().copied().collect()
}

/// The checks `only`, run against the reference server (or its broken variant `mutant`),
/// without a fault or under `fault` (a standard fault's name, or a spec).
async fn run(mutant: Option<Mutant>, only: &BTreeSet<CheckId>, fault: Option<&str>) -> RunReport {
    let args = CheckArgs {
        trials: Some(2),
        only: only.iter().copied().collect(),
        ..CheckArgs::embedded()
    };
    run_as(mutant, args, fault).await
}

/// The reference server (or its broken variant `mutant`) checked as `args` say, without a fault
/// or under `fault` (a standard fault's name, or a spec).
async fn run_as(mutant: Option<Mutant>, args: CheckArgs, fault: Option<&str>) -> RunReport {
    let config = embedded::check_config(false).unwrap();
    let config = match mutant {
        Some(mutant) => config.with_mutant(mutant),
        None => config,
    };
    let args = CheckArgs {
        fault: fault.map(|f| standard::parse(f).unwrap()),
        ..args
    };
    let subject = embedded::start(config, Some(args.relay_end()))
        .await
        .unwrap();
    execute(&args, subject).await.unwrap()
}

/// The checks `mutant` failed among `only`, without a fault or under `fault`.
async fn failed(
    mutant: Mutant,
    only: &BTreeSet<CheckId>,
    fault: Option<&str>,
) -> BTreeSet<CheckId> {
    let report = run(Some(mutant), only, fault).await;
    report
        .results
        .iter()
        .filter(|r| r.verdict.is_fail())
        .filter_map(|r| r.id.check())
        .collect()
}

/// R4 and R6 tell when a relayed request ran from when its answer came: they allow for what
/// the run's fault adds to a round trip. A constant 400 ms on every answer (R6's "ran at
/// once" was 300 ms before, so the reference's bridge failed it) passes the reference and
/// still fails a bridge that leaks a slot; a jitter as wide as the holds removes both
/// inferences, each named in the evidence, and the busy gauge still fails an unbounded pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_checks_allow_for_a_faults_delay_and_name_what_its_jitter_removes() {
    let relay = check_ids(&[CheckId::Clause(ClauseId::R4), CheckId::Clause(ClauseId::R6)]);
    let (slow, wide) = (
        "latency:latency=400,stream=downstream",
        "latency:latency=150,jitter=150,stream=downstream",
    );
    for fault in [slow, wide] {
        let report = run(None, &relay, Some(fault)).await;
        let judged =
            (report.results.iter()).filter(|r| r.id.check().is_some_and(|id| relay.contains(&id)));
        for r in judged {
            assert_eq!(
                r.verdict,
                Verdict::Pass,
                "{} under {fault}: {}",
                r.id,
                r.observed
            );
            let removed = r
                .observed
                .contains("by response timing not applicable under");
            assert_eq!(
                removed,
                fault == wide,
                "{} under {fault}: {}",
                r.id,
                r.observed
            );
        }
    }
    let r6 = check_ids(&[CheckId::Clause(ClauseId::R6)]);
    assert_eq!(failed(Mutant::RelayLeakSlot, &r6, Some(slow)).await, r6);
    let r4 = check_ids(&[CheckId::Clause(ClauseId::R4)]);
    assert_eq!(failed(Mutant::RelayUnbounded, &r4, Some(wide)).await, r4);
}

/// The variants only a fault reveals (`fault "name" [...]` in the server's table): each passes
/// its checks on a perfect network, and under its fault fails exactly them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_variant_only_a_fault_reveals_fails_under_its_fault_only() {
    let revealed: Vec<_> = Mutant::ALL
        .iter()
        .filter_map(|&m| {
            m.fault_fails()
                .map(|(fault, ids)| (m, fault, check_ids(ids)))
        })
        .collect();
    assert!(revealed.len() >= 3, "the fault-only variants are declared");
    for (mutant, fault, checks) in revealed {
        assert!(
            standard::named(fault).is_some(),
            "{}: `{fault}` is no standard fault",
            mutant.name()
        );
        let clean = failed(mutant, &checks, None).await;
        assert!(
            clean.is_empty(),
            "{} failed {clean:?} without a fault",
            mutant.name()
        );
        let under = failed(mutant, &checks, Some(fault)).await;
        mutant.report_judged(&format!("its fault row ({fault})"));
        assert_eq!(under, checks, "{} under {fault}", mutant.name());
    }
}
