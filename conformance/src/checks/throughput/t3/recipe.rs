//! T3 for a pool held by its slow recipe (any service): with every worker and queue place
//! held, each further request is refused at once with the pool's declared refusal, carrying
//! the declared hint when there is one; and once the held requests are answered, the pool
//! serves again. Judged by the client's clock alone: a service without the reference surface
//! declares no gauge to pace by, so the checker times its probes on the hold it declared.

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::ops::RangeInclusive;

use plimsoll_spec::model::{PoolSpec, Refusal};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{Held, HeldRequest, Pending, held, join_all, sleep_until, spawn_held};
use crate::checks::refusal::{hint_words, judge_refusal, pool_allowed};
use crate::remote::Target;

/// How long after the saturating requests are sent the first probe goes: they must have
/// reached the service. A quarter of the hold at most.
const FILL: Duration = Duration::from_millis(150);
/// What a probe must leave before the held requests can be answered, beside its round trip.
const PROBE_MARGIN: Duration = Duration::from_millis(50);

/// A pool T3 can judge this way: held by its slow recipe, refusing when full.
pub(super) struct RecipePool<'c> {
    name: &'c str,
    spec: &'c PoolSpec,
    hold: HeldRequest,
    refusal: &'c Refusal,
    places: u32,
}

/// Every pool of the contract T3 can judge by its slow recipe.
pub(super) fn recipe_pools(t: &Target) -> Vec<RecipePool<'_>> {
    let contract = &t.expected;
    contract
        .pools
        .iter()
        .filter_map(|(name, spec)| {
            let Held::Request(hold) = held(contract, name, spec) else {
                return None;
            };
            let hold = *hold;
            let refusal = contract.refusals.get(spec.refusal.as_ref()?)?;
            let places = spec.queue.capacity.places()?;
            Some(RecipePool {
                name,
                spec,
                hold,
                refusal,
                places,
            })
        })
        .collect()
}

/// T3 against every pool held by its slow recipe; `None` when there is none.
pub(super) async fn t3_recipes(t: &Arc<Target>, c: &mut Ctx) -> Option<()> {
    let pools = recipe_pools(t);
    if pools.is_empty() {
        return None;
    }
    let (mut expected, mut observed) = (Vec::new(), Vec::new());
    for pool in &pools {
        expected.push(expectation(t, pool));
        observed.push(judge_pool(t, c, pool).await);
    }
    c.expected = expected.join("; ");
    c.observed = observed.join("; ");
    Some(())
}

/// What T3 expects of `pool`, in words.
fn expectation(t: &Target, pool: &RecipePool<'_>) -> String {
    let status = t.expected.refusal_status(pool.refusal).unwrap_or(0);
    let hint = hint_words(pool.refusal, allowed(pool));
    format!(
        "{}: past {} held, {status} within {} ms, {hint}; served again after the hold",
        pool.name,
        pool.spec.workers + pool.places,
        t.expected.tolerances.refusal_latency_ms
    )
}

/// The delays `pool`'s hint may advertise ([`pool_allowed`]).
fn allowed(pool: &RecipePool<'_>) -> Option<RangeInclusive<u64>> {
    pool_allowed(pool.refusal, pool.spec)
}

/// Saturates `pool` with its slow recipe, probes it one request at a time while it is full,
/// waits for the held requests, and requires one more to be served.
async fn judge_pool(t: &Arc<Target>, c: &mut Ctx, pool: &RecipePool<'_>) -> String {
    let at_least = pool.hold.hold;
    let fill = (pool.spec.workers + pool.places) as usize;
    let waves = fill.div_ceil(pool.spec.workers.max(1) as usize) as u32 + 1;
    let limit =
        at_least * waves + Duration::from_millis(t.expected.tolerances.timeout_late_ms + 3000);
    let started = Instant::now();
    let saturating: Vec<Pending> = (0..fill)
        .map(|_| spawn_held(t, &pool.hold, limit))
        .collect();
    sleep_until(started + FILL.min(at_least / 4)).await;
    let (refused, latencies) = probe(t, c, pool, started + at_least, limit).await;
    let served = join_all(saturating)
        .await
        .into_iter()
        .enumerate()
        .filter(|(i, r)| {
            let name = format!("{}-held-{i}", pool.name);
            match r {
                Ok(reply) => {
                    c.reply(t, &name, reply);
                    reply.status == pool.hold.request.status
                }
                Err(e) => {
                    c.evidence.push(format!("{name}: {e}"));
                    false
                }
            }
        })
        .count();
    if served < fill {
        c.evidence.push(format!(
            "{}: {served} of the {fill} saturating requests were served (T1 judges the pool's size)",
            pool.name
        ));
    }
    let again = match t.send_recipe(&pool.hold.request, limit).await {
        Ok(reply) => {
            c.reply(t, format!("{}-after", pool.name), &reply);
            c.require(reply.status == pool.hold.request.status, || {
                format!(
                    "{}: after the held requests were answered, one more got {}",
                    pool.name, reply.status
                )
            });
            "served again after the hold"
        }
        Err(e) => {
            c.fail(format!("{}: after the hold: {e}", pool.name));
            "not served after the hold"
        }
    };
    let worst = latencies.iter().copied().fold(0.0, f64::max);
    format!(
        "{}: {refused} of {} probe(s) refused, worst {worst:.1} ms; {again}",
        pool.name,
        latencies.len()
    )
}

/// Probes the full pool one request at a time while another fits before `frees` (the held
/// requests' earliest answer), at least one and at most the trials' number; judges each.
/// Returns how many were refused as declared and every probe's latency in ms.
async fn probe(
    t: &Arc<Target>,
    c: &mut Ctx,
    pool: &RecipePool<'_>,
    frees: Instant,
    limit: Duration,
) -> (usize, Vec<f64>) {
    let tolerance = Duration::from_millis(t.expected.tolerances.refusal_latency_ms);
    let (mut refused, mut latencies, mut slowest) = (0, Vec::new(), Duration::ZERO);
    for i in 0..t.trials.max(1) {
        if i > 0 && Instant::now() + slowest + PROBE_MARGIN > frees {
            c.evidence.push(format!(
                "{}: {i} probe(s) fitted in the hold (each must reach the service while it is full)",
                pool.name
            ));
            break;
        }
        let label = format!("{}-probe-{i}", pool.name);
        let reply = match t.send_recipe(&pool.hold.request, limit).await {
            Ok(reply) => reply,
            Err(e) => {
                c.fail(format!("{label}: {e}"));
                continue;
            }
        };
        slowest = slowest.max(reply.elapsed);
        latencies.push(ms(reply.elapsed));
        c.sample("refusal latency", ms(reply.elapsed));
        c.reply(t, &label, &reply);
        refused += usize::from(judge_refusal(
            t,
            c,
            pool.refusal,
            allowed(pool),
            &label,
            &reply,
            tolerance,
        ));
    }
    c.trials_ms.extend(&latencies);
    (refused, latencies)
}
