//! Fleet mode through a real balancer: three `plimsoll serve` replicas behind nginx (Debian's
//! package, the configuration `ci/fleet-nginx.conf` that `ci/fleet.sh` uses too), the overload
//! profile run through it. A correct fleet passes under both balancing policies with the
//! refused fraction inside the fleet prediction's interval — at 3 × capacity, and for least
//! connections also at 0.7 × capacity, where its model differs most from a random split's; a
//! fleet with one replica configured one worker too many fails the per-replica verdict that
//! names that replica.
//!
//! The test installs nothing: without nginx it fails and says how to get it (the test command,
//! `bash ci/test.sh`, and `ci/fleet.sh` install it). Everything listens on loopback; every run is bounded in time.

mod common;
#[path = "common/nginx.rs"]
mod nginx;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Process, failed, places, result, serve, why};
use nginx::{SERVER_ADDRESS, free_port, start_nginx};
use plimsoll::load::{LoadArgs, ProfileName, execute};
use plimsoll_conformance::session::Subject;
use plimsoll_conformance::verdict::{CheckResult, RunReport};
use plimsoll_load::prediction::Balancer;

/// How hard a run loads the fleet: always the overload profile (200 ms holds), at its own
/// 3 × capacity for 6 s (about 800 attempts counted), or at 0.7 × capacity for 12 s (about 480),
/// where the balancing policies differ most. Not the steady profile: its 20 ms holds make
/// 12 workers' 0.7 × capacity about 390 attempts/s, more than a 2-core machine generates and
/// serves at once without inflating every service time (measured: 34 ms for 22, admitted p99
/// 0.5 s).
#[derive(Debug, Clone, Copy)]
enum Load {
    Over,
    Below,
}

impl Load {
    fn factor_and_seconds(self) -> (Option<f64>, f64) {
        match self {
            Load::Over => (None, 6.0),
            Load::Below => (Some(0.7), 12.0),
        }
    }
}

/// nginx in front of `replicas` with `policy` (`random` or `least_conn`), from the shared
/// configuration template; returns the process and the balancer's URL.
fn nginx(dir: &Path, policy: &str, replicas: &[String]) -> (Process, String) {
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/fleet-nginx.conf");
    let template = std::fs::read_to_string(&template).unwrap();
    let port = free_port();
    let servers: String = replicas
        .iter()
        .map(|url| {
            format!(
                "    server {} max_fails=0;\n",
                url.trim_start_matches("http://")
            )
        })
        .collect();
    let listen = "listen 127.0.0.1:@PORT@;";
    assert!(
        template.contains(listen),
        "the template listens on 127.0.0.1"
    );
    let conf = template
        .replace(listen, &format!("listen {SERVER_ADDRESS}:{port};"))
        .replace("@DIR@", &dir.display().to_string())
        .replace("@POLICY@", policy)
        .replace("@SERVERS@\n", &servers)
        .replace("@PORT@", &port.to_string());
    (
        start_nginx(dir, &conf, port),
        format!("http://{SERVER_ADDRESS}:{port}"),
    )
}

/// Three replicas (the last with `last_env`) behind nginx with `policy`, the overload profile
/// through it at `load`, judged with the model of `balancer`. Returns the report and the
/// replicas' URLs.
async fn through_nginx(
    load: Load,
    policy: &str,
    balancer: Balancer,
    last_env: &[(&str, &str)],
) -> (RunReport, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut processes = Vec::new();
    let mut urls = Vec::new();
    for i in 0..3 {
        let env = if i == 2 { last_env } else { &[] };
        let (p, url) = serve(&dir.path().join(format!("replica-{i}")), env);
        processes.push(p);
        urls.push(url);
    }
    let (nginx, lb) = nginx(&dir.path().join("nginx"), policy, &urls);
    let mut args = LoadArgs::new(ProfileName::Overload);
    args.subject.target = Some(lb);
    args.replica = urls.clone();
    args.balancer = Some(balancer);
    let (factor, seconds) = load.factor_and_seconds();
    args.load_factor = factor;
    args.duration = Some(seconds);
    let started = Instant::now();
    let run_fleet = async |args: &LoadArgs| {
        let subject = Subject::external(args.subject.target.as_deref().unwrap(), None, None)?;
        execute(args, subject).await
    };
    let report = tokio::time::timeout(Duration::from_secs(120), run_fleet(&args))
        .await
        .expect("the fleet run ends within two minutes")
        .expect("the fleet run proceeds");
    eprintln!(
        "{load:?} through nginx {policy} took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop(nginx);
    drop(processes);
    (report, urls)
}

/// Every verdict passed, the refused fraction was judged by the balancer's model, and every
/// replica was judged on its own.
fn assert_fleet_passes(report: &RunReport, urls: &[String], model: &str) {
    assert!(
        failed(report).is_empty(),
        "failed {:?}\n{}",
        failed(report),
        why(report)
    );
    assert_eq!(report.skipped(), 0, "{}", why(report));
    let refusals = result(report, "L-overload.refusals");
    assert!(refusals.expected.contains(model), "{}", refusals.expected);
    for url in urls {
        for aspect in ["busy-limit", "recovery"] {
            let id = format!("L-overload.replica[{url}].{aspect}");
            assert!(
                report.results.iter().any(|r| r.id.to_string() == id),
                "no {id}\n{}",
                why(report)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_behind_nginx_random_matches_the_random_split_prediction() {
    let _places = places::every();
    let (report, urls) = through_nginx(Load::Over, "random", Balancer::Random, &[]).await;
    assert_fleet_passes(&report, &urls, "3 replicas, random balancer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_behind_nginx_least_conn_matches_the_least_connections_prediction() {
    let _places = places::every();
    let (report, urls) = through_nginx(Load::Over, "least_conn", Balancer::LeastConn, &[]).await;
    assert_fleet_passes(&report, &urls, "3 replicas, least-conn balancer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_one_worker_too_many_fails_its_own_verdict() {
    let _places = places::every();
    // The contract says 4 workers; this replica runs 5 (and says so in /metrics and
    // /v1/contract: it is judged against the contract's 4, not its own claim).
    let (report, urls) = through_nginx(
        Load::Over,
        "random",
        Balancer::Random,
        &[("WORKER_POOL_SIZE", "5")],
    )
    .await;
    let failed = failed(&report);
    let oversized = &urls[2];
    for id in [
        format!("L-overload.replica[{oversized}].busy-limit"),
        format!("contract.replica[{oversized}]"),
    ] {
        assert!(failed.contains(&id), "{id} passed\n{}", why(&report));
    }
    let busy = result(
        &report,
        &format!("L-overload.replica[{oversized}].busy-limit"),
    );
    assert!(
        format!("{:?}", busy.verdict).contains(&format!("replica {oversized}")),
        "{:?}",
        busy.verdict
    );
    for good in &urls[..2] {
        let named = format!("[{good}]");
        let wrongly: Vec<&String> = failed.iter().filter(|id| id.contains(&named)).collect();
        assert!(wrongly.is_empty(), "{wrongly:?}\n{}", why(&report));
    }
}

/// The overload profile's refusals verdict of a run.
fn refusals(report: &RunReport) -> &CheckResult {
    result(report, "L-overload.refusals")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_capacity_least_conn_pools_the_replicas_as_predicted() {
    let _places = places::every();
    // At 0.7 × capacity least connections refuses about 6 %, a random split about 18 %: here
    // the least-connections model is tested where it differs from the random one. (That the
    // random-split model fails this fleet takes a longer run to show beyond doubt: 60 s in
    // docs/scaling.md.)
    let (report, _) = through_nginx(Load::Below, "least_conn", Balancer::LeastConn, &[]).await;
    let r = refusals(&report);
    assert!(!r.verdict.is_fail(), "{}", why(&report));
    assert!(r.expected.contains("least-conn balancer"), "{}", r.expected);
}
