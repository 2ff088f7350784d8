//! Every clause of the contract, shown against the reference server over real loopback HTTP.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{TestServer, png, problem};
use plimsoll_spec::{Contract, Pool};

mod bounds;
#[cfg(unix)]
mod crash;
mod failures;
#[cfg(target_os = "linux")]
mod flood;
mod mutants_bounds;
mod mutants_claims;
mod mutants_throughput;
mod surface;
mod throughput;

fn stages() -> Vec<String> {
    Contract::embedded()
        .pool(Pool::Digitize)
        .stages
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The reference server (`None`) or one broken variant of it, hooks on: the `mutants_*` modules
/// run a variant, and the reference beside it where the misbehaviour is a matter of degree.
async fn start(mutant: Option<plimsoll_server::Mutant>, overrides: &[(&str, &str)]) -> TestServer {
    TestServer::start_with(overrides, true, |c| match mutant {
        Some(m) => c.with_mutant(m),
        None => c,
    })
    .await
}

/// How long until `pool`'s busy gauge reads `want` (`None` if not within `within`): how the
/// scenarios wait for a job to take, or give back, its slot.
async fn busy(
    s: &TestServer,
    pool: plimsoll_spec::Pool,
    want: f64,
    within: Duration,
) -> Option<Duration> {
    s.wait_metric(
        plimsoll_spec::MetricName::WorkersBusy,
        Some(pool),
        within,
        |v| v == want,
    )
    .await
}
