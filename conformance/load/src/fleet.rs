//! Fleet mode: the load goes through a balancer (`--target`) to several replicas
//! (`--replica`, repeated), and the checker judges each replica on its own against the
//! per-replica contract as well as the fleet as a whole.
//!
//! What is per replica and what is the fleet's (docs/scaling.md says why):
//!
//! - per replica, read directly (never through the balancer, which would hand the read to any
//!   of them): its claimed contract (`contract.replica[URL]`), its busy gauge and queue depth
//!   throughout (`L-{profile}.replica[URL].busy-limit`), and its recovery — drained, temp files
//!   back, `c + K` held requests all admitted (`L-{profile}.replica[URL].recovery`);
//! - the fleet, from what the clients saw through the balancer: the statuses, the refused
//!   fraction against the fleet's prediction (the model of the
//!   [`Balancer`](prediction::Balancer), in `prediction/fleet.rs`), goodput, the latency of
//!   refusals and of admitted requests.
//!
//! A verdict about a replica names its URL in its id, so a mis-sized replica among good ones is
//! found by reading the failing id.

use plimsoll_conformance::checks::contract::contract_result;
use plimsoll_conformance::session::{self, ContractSource, Fatal};
use plimsoll_conformance::verdict::{CheckResult, Verdict};
use plimsoll_spec::Reconciliation;

use super::prediction;
use super::{Ctx, LoadPlan, ProfileName};

/// What the fleet options ask that cannot work, before anything starts.
pub(super) fn validate(load: &LoadPlan) -> Result<(), Fatal> {
    let usage = |why: &str| Err(Fatal::Usage(why.to_owned()));
    if load.replica.is_empty() {
        if load.balancer.is_some() {
            return usage("--balancer describes a fleet: name its replicas with --replica URL");
        }
        return Ok(());
    }
    if load.balancer.is_none() {
        return usage(
            "fleet mode (--replica) needs --balancer random|least-conn: it selects the prediction's model",
        );
    }
    if load.subject.target.is_none() {
        return usage("fleet mode (--replica) needs --target: the balancer's URL");
    }
    match load.profile {
        ProfileName::Steady | ProfileName::Overload => {}
        ProfileName::Burst => {
            return usage(
                "burst is not run through a balancer: how many of a simultaneous wave each replica gets is the balancer's choice, so 'exactly workers + queue admitted' is no longer a fact (run burst against each replica)",
            );
        }
        ProfileName::Soak => {
            return usage(
                "soak is not run through a balancer yet: its memory and open-file verdicts read one process (run soak against each replica)",
            );
        }
    }
    if load.subject.pid.is_some() || load.subject.temp_dir.is_some() {
        return usage(
            "--pid and --temp-dir name one server; in fleet mode each replica's /metrics is read instead",
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for url in &load.replica {
        if !seen.insert(url.trim_end_matches('/')) {
            return Err(Fatal::Usage(format!("--replica {url} is named twice")));
        }
    }
    Ok(())
}

/// The tool line of the report's manifest.
pub(super) fn tool_name(load: &LoadPlan) -> String {
    let profile = format!("plimsoll load --profile {}", load.profile.as_str());
    match load.balancer {
        Some(b) if !load.replica.is_empty() => format!(
            "{profile} through a {} balancer to {} replicas ({})",
            b.as_str(),
            load.replica.len(),
            load.replica.join(", ")
        ),
        _ => profile,
    }
}

/// `3 × ` before "4 workers" in fleet mode.
pub(super) fn replicas_times(ctx: &Ctx<'_>) -> String {
    match ctx.fleet() {
        Some(f) => format!("{} × ", f.replicas),
        None => String::new(),
    }
}

/// Refuses a fleet whose exact chain is too large to solve, before the load starts.
pub(super) fn check_size(ctx: &Ctx<'_>) -> Result<(), Fatal> {
    let Some(f) = ctx.fleet() else {
        return Ok(());
    };
    let places = ctx.expect.workers + ctx.expect.queue;
    let states = prediction::state_count(f.replicas, places);
    if states > prediction::MAX_STATES || places > u32::from(u8::MAX) {
        return Err(Fatal::Usage(format!(
            "{} replicas of {places} places make {} states, more than the {} the fleet prediction solves exactly",
            f.replicas,
            if states == usize::MAX {
                "too many".to_owned()
            } else {
                states.to_string()
            },
            prediction::MAX_STATES
        )));
    }
    Ok(())
}

/// `r` as a verdict about the replica at `url`: `L-overload.busy-limit` becomes
/// `L-overload.replica[URL].busy-limit`, `contract` becomes `contract.replica[URL]`, and a
/// failure's reason starts with the replica.
pub fn replica_result(mut r: CheckResult, url: &str) -> CheckResult {
    r.id = r.id.for_replica(url);
    r.title = format!("{} (replica {url})", r.title);
    if let Verdict::Fail(why) = &r.verdict {
        r.verdict = Verdict::Fail(format!("replica {url}: {why}"));
    }
    r
}

/// Every replica's claimed contract, read from the replica itself and reconciled like a single
/// target's. The fleet is judged by the first replica's effective values (`first`); a replica
/// whose effective values differ fails its own result, since the prediction assumes identical
/// replicas and the per-replica verdicts hold each to the same limits.
pub(super) async fn contract_results(
    ctx: &Ctx<'_>,
    source: &ContractSource,
    first: &Reconciliation,
    allow_overrides: bool,
) -> Result<Vec<CheckResult>, Fatal> {
    let mut results = Vec::new();
    for (i, replica) in ctx.replicas.iter().enumerate() {
        let own = match i {
            0 => first.clone(),
            _ => {
                session::reconcile(
                    &ctx.client,
                    &replica.base,
                    &source.contract,
                    allow_overrides,
                )
                .await?
            }
        };
        let mut r = contract_result(&own, allow_overrides);
        if own.effective != first.effective && !r.verdict.is_fail() {
            r.verdict = Verdict::Fail(format!(
                "its effective values differ from the first replica's ({}): the fleet's prediction and the per-replica verdicts assume identical replicas",
                ctx.replicas[0].base
            ));
        }
        results.push(replica_result(r, &replica.base));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use plimsoll_conformance::verdict::ResultId;

    use super::*;
    use crate::prediction::Balancer;

    #[test]
    fn a_replica_verdict_names_the_replica() {
        let id = ResultId::Load {
            profile: "overload",
            verdict: "busy-limit",
        };
        let r = CheckResult::new(
            id,
            "Busy gauge within the worker limit throughout",
            String::new(),
            String::new(),
            Verdict::Fail("busy gauge reached 5 with 4 workers".into()),
        );
        let named = replica_result(r.clone(), "http://127.0.0.1:9003");
        assert_eq!(
            named.id.to_string(),
            "L-overload.replica[http://127.0.0.1:9003].busy-limit"
        );
        assert_eq!(named.id.clause(), "load.overload");
        assert_eq!(
            named.verdict,
            Verdict::Fail(
                "replica http://127.0.0.1:9003: busy gauge reached 5 with 4 workers".into()
            )
        );
        let contract = CheckResult {
            id: plimsoll_conformance::checks::CheckId::Contract.into(),
            ..r
        };
        assert_eq!(
            replica_result(contract, "http://h:1").id.to_string(),
            "contract.replica[http://h:1]"
        );
    }

    #[test]
    fn fleet_options_are_checked_before_the_run() {
        let mut load = LoadPlan::new(ProfileName::Overload);
        load.balancer = Some(Balancer::Random);
        assert!(validate(&load).is_err(), "a balancer without replicas");
        load.replica = vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()];
        assert!(validate(&load).is_err(), "replicas without --target");
        load.subject.target = Some("http://127.0.0.1:3".into());
        assert!(validate(&load).is_ok());
        load.profile = ProfileName::Burst;
        assert!(validate(&load).is_err(), "burst through a balancer");
        load.profile = ProfileName::Steady;
        load.replica.push("http://127.0.0.1:2/".into());
        assert!(validate(&load).is_err(), "a replica named twice");
    }
}
