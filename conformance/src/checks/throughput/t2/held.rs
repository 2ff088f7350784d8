//! T2 for a pool held by its declared `hold` (any service): with every worker held, the queue's
//! places are filled one request at a time, in a known arrival order; when the workers free,
//! the waiting requests start in waves of `workers`, and each wave must be the one the declared
//! order picks (FIFO: the oldest; LIFO: the newest). Judged by the client's clock alone: a
//! request that started in wave `k` answers about `k + 2` holds after the first was sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::{PoolSpec, QueueOrder};

use crate::checks::ctx::Ctx;
use crate::checks::pool::{Held, HeldRequest, join_all, sleep_until, spawn_held};
use crate::remote::Target;

/// How long after the holders are sent the first queued request goes.
pub(crate) const FILL: Duration = Duration::from_millis(100);
/// The least gap between two queued requests' arrivals that still orders them on loopback.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(10);

/// A pool whose queue order T2 can judge this way.
pub(super) struct OrderedPool<'c> {
    name: &'c str,
    spec: &'c PoolSpec,
    held: HeldRequest,
    places: usize,
}

/// Every pool held by its declared `hold` whose queue has two places or more and promises an
/// order.
pub(super) fn ordered_pools(t: &Target) -> Vec<OrderedPool<'_>> {
    let contract = &t.expected;
    contract
        .pools
        .iter()
        .filter_map(|(name, spec)| {
            let Held::Request(held) = crate::checks::pool::held(contract, name, spec) else {
                return None;
            };
            let held = *held;
            let places = spec.queue.capacity.places()? as usize;
            (places >= 2 && spec.queue.order != QueueOrder::Unordered).then_some(OrderedPool {
                name,
                spec,
                held,
                places,
            })
        })
        .collect()
}

/// The wave each arrival (by index) starts in, under `order`, `workers` at a time.
pub(crate) fn expected_waves(order: QueueOrder, places: usize, workers: usize) -> Vec<usize> {
    let w = workers.max(1);
    (0..places)
        .map(|i| match order {
            QueueOrder::Lifo => (places - 1 - i) / w,
            QueueOrder::Fifo | QueueOrder::Unordered => i / w,
        })
        .collect()
}

/// T2 against every such pool: one line of what was seen per pool.
pub(super) async fn t2_held(t: &Arc<Target>, c: &mut Ctx) {
    let pools = ordered_pools(t);
    c.expected = pools
        .iter()
        .map(|p| {
            format!(
                "{}: {} queued start in {} order, {} at a time",
                p.name,
                p.places,
                p.spec.queue.order.as_str(),
                p.spec.workers
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut observed = Vec::new();
    for pool in &pools {
        let mut kept = 0;
        let trials = t.trials.clamp(1, 3);
        for trial in 0..trials {
            kept += usize::from(order_trial(t, c, pool, trial).await);
        }
        observed.push(format!(
            "{}: {kept} of {trials} trial(s) in {} order",
            pool.name,
            pool.spec.queue.order.as_str()
        ));
    }
    c.observed = observed.join("; ");
}

/// One trial: holds every worker, queues the places one at a time, and requires each queued
/// request to answer in the wave its arrival and the declared order give it.
async fn order_trial(t: &Arc<Target>, c: &mut Ctx, pool: &OrderedPool<'_>, trial: u32) -> bool {
    let hold = pool.held.hold;
    let workers = pool.spec.workers as usize;
    let fill = FILL.min(hold / 4);
    let gap = (hold.saturating_sub(fill * 2) / pool.places as u32).min(Duration::from_millis(30));
    if gap < MIN_GAP {
        c.not_applicable(format!(
            "{}: a hold of {} ms leaves no room to queue {} requests in a known order",
            pool.name,
            hold.as_millis(),
            pool.places
        ));
        return false;
    }
    let waves = pool.places.div_ceil(workers.max(1)) as u32 + 2;
    let limit = hold * waves + Duration::from_millis(t.expected.tolerances.timeout_late_ms + 3000);
    let start = Instant::now();
    let holders: Vec<_> = (0..workers)
        .map(|_| spawn_held(t, &pool.held, limit))
        .collect();
    let mut queued = Vec::new();
    for i in 0..pool.places {
        sleep_until(start + fill + gap * i as u32).await;
        queued.push(spawn_held(t, &pool.held, limit));
    }
    for (i, r) in join_all(holders).await.iter().enumerate() {
        if let Ok(reply) = r {
            c.reply(t, format!("{}-t{trial}-hold{i}", pool.name), reply);
        }
    }
    let replies = join_all(queued).await;
    let Some(wrong) = waves_out_of_order(t, c, pool, (trial, start), &replies) else {
        return false;
    };
    c.evidence.push(format!(
        "{} trial {trial}: {} queued {} ms apart behind {workers} held for {} ms by {}: {}",
        pool.name,
        pool.places,
        gap.as_millis(),
        hold.as_millis(),
        pool.held.by,
        if wrong.is_empty() {
            "in order".to_owned()
        } else {
            wrong.join("; ")
        }
    ));
    c.require(wrong.is_empty(), || {
        format!(
            "{} trial {trial}: not {} order: {}",
            pool.name,
            pool.spec.queue.order.as_str(),
            wrong.join("; ")
        )
    })
}

/// Each queued request's wave by the client's clock (answered about `wave + 2` holds after
/// `start`) against the one its arrival and the declared order give it: what is out of order,
/// or `None` (with the failure recorded) when one was not served.
fn waves_out_of_order(
    t: &Target,
    c: &mut Ctx,
    pool: &OrderedPool<'_>,
    (trial, start): (u32, Instant),
    replies: &[Result<crate::remote::Reply, crate::checks::pool::TaskError>],
) -> Option<Vec<String>> {
    let hold = pool.held.hold;
    let label = |i: usize| format!("{}-t{trial}-q{i}", pool.name);
    let expected = expected_waves(
        pool.spec.queue.order,
        pool.places,
        pool.spec.workers as usize,
    );
    let mut wrong = Vec::new();
    for (i, r) in replies.iter().enumerate() {
        let reply = match r {
            Ok(reply) => reply,
            Err(e) => {
                c.fail(format!("{}: {e}", label(i)));
                return None;
            }
        };
        c.reply(t, label(i), reply);
        if reply.status != pool.held.request.status {
            c.fail(format!(
                "{}: queued while a place was free, answered {}",
                label(i),
                reply.status
            ));
            return None;
        }
        // Answered about (wave + 2) holds after the first holder was sent.
        let holds = reply.answered().duration_since(start).as_secs_f64() / hold.as_secs_f64();
        let wave = (holds.round() as usize).saturating_sub(2);
        if wave != expected[i] {
            wrong.push(format!(
                "arrival {i} started in wave {wave}, its order gives wave {}",
                expected[i]
            ));
        }
    }
    Some(wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waves_follow_the_declared_order() {
        assert_eq!(expected_waves(QueueOrder::Fifo, 4, 2), [0, 0, 1, 1]);
        assert_eq!(expected_waves(QueueOrder::Lifo, 4, 2), [1, 1, 0, 0]);
        assert_eq!(expected_waves(QueueOrder::Lifo, 3, 1), [2, 1, 0]);
        assert_eq!(expected_waves(QueueOrder::Fifo, 3, 1), [0, 1, 2]);
    }
}
