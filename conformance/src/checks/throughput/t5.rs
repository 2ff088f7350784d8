//! T5: a request that waits in a pool's queue longer than its `queue.timeout_ms` leaves it with
//! the declared `timeout_answer`, on time. With every worker held for longer than the timeout
//! and its tolerance, one more request is sent: it must wait, and be answered the timeout
//! answer no sooner than the timeout and no later than the timeout and `timeout_late_ms` after
//! it was sent (the client's clock; the service counts from the request's arrival, a little
//! later). The held requests must still be served: a timeout frees only the waiting request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::Refusal;
use plimsoll_spec::{ClauseId, Contract};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{HeldRequest, Pending, join_all, send_held, sleep_until, spawn_held};
use crate::checks::registry::Check;
use crate::remote::Target;

/// T5's entry in the check registry: the evidence the docs print, and `t5`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::T5,
    "For each pool with a queue timeout whose workers the checker can hold longer than it: every \
     worker held for the timeout, the late tolerance and 400 ms more, then one more request sent, \
     which must be answered the pool's `timeout_answer` no sooner than `timeout_ms` and no later \
     than `timeout_ms` + `timeout_late_ms` after it was sent, by the client's clock; the held \
     requests are served all the same.",
    |t, c| Box::pin(t5(t, c)),
)
.applies_when(applies);

/// How long after the holders are sent the waiting request goes: they have taken the workers.
const FILL: Duration = Duration::from_millis(100);
/// How much longer than the timeout and its tolerance the workers are held.
const MARGIN: Duration = Duration::from_millis(400);

/// T5 judges every pool whose queue timeout it can outlast with a held worker.
fn applies(contract: &Contract) -> Result<(), String> {
    if timed_pools(contract, plimsoll_fault::Bound::TimeoutLate.base(contract)).is_empty() {
        return Err(
            "no pool with a queue timeout (`queue.timeout_ms`) whose workers the checker can \
             hold longer than it (a `hold` by a hook, or a slow request at least that slow)"
                .into(),
        );
    }
    Ok(())
}

/// A pool T5 can judge: its timeout and answer, the request that holds a worker past it, and
/// the one that waits.
struct TimedPool<'c> {
    name: &'c str,
    workers: u32,
    timeout: Duration,
    answer: &'c Refusal,
    holder: HeldRequest,
    waiter: HeldRequest,
}

/// Every pool of `contract` T5 can judge, its holder held past the timeout by more than `late`
/// (the tolerance as the run's fault adjusts it), so the holder's own end cannot pass for the
/// waiter's answer.
fn timed_pools(contract: &Contract, late: Duration) -> Vec<TimedPool<'_>> {
    contract
        .pools
        .iter()
        .filter_map(|(name, spec)| {
            let timeout = Duration::from_millis(spec.queue.timeout_ms?);
            let answer = contract.refusals.get(spec.queue.timeout_answer.as_ref()?)?;
            let hold = spec.hold.as_ref()?;
            Some(TimedPool {
                name,
                workers: spec.workers,
                timeout,
                answer,
                holder: HeldRequest::at_least(hold, spec, timeout + late + MARGIN)?,
                waiter: HeldRequest::of(hold, spec),
            })
        })
        .collect()
}

/// T5 against every pool it can judge, one after another.
async fn t5(t: &Arc<Target>, c: &mut Ctx) {
    let late = t.bound(plimsoll_fault::Bound::TimeoutLate);
    let pools = timed_pools(&t.expected, late);
    // A fault's wider tolerance can leave a pool's holders no room before its deadline: that
    // pool cannot be judged under it (a skip), rather than passing unjudged.
    let raw = plimsoll_fault::Bound::TimeoutLate.base(&t.expected);
    for pool in timed_pools(&t.expected, raw) {
        if !pools.iter().any(|p| p.name == pool.name) {
            c.skip(format!(
                "{}: cannot judge under this fault: its holders cannot outlast the {} ms queue timeout and the {} ms tolerance the fault widens it to",
                pool.name,
                pool.timeout.as_millis(),
                late.as_millis()
            ));
        }
    }
    let (mut expected, mut observed) = (Vec::new(), Vec::new());
    for pool in pools {
        expected.push(format!(
            "{}: a request waiting past {} ms answered {} within {} ms of it",
            pool.name,
            pool.timeout.as_millis(),
            t.expected.refusal_words(pool.answer),
            late.as_millis()
        ));
        observed.push(judge(t, c, &pool, late).await);
    }
    c.expected = expected.join("; ");
    c.observed = observed.join("; ");
}

/// Holds every worker of `pool`, sends one request to wait, and judges its answer.
async fn judge(t: &Arc<Target>, c: &mut Ctx, pool: &TimedPool<'_>, late: Duration) -> String {
    let limit = pool.holder.hold + late + Duration::from_secs(3);
    let started = Instant::now();
    let holders: Vec<Pending> = (0..pool.workers)
        .map(|_| spawn_held(t, &pool.holder, limit))
        .collect();
    sleep_until(started + FILL).await;
    let label = format!("{}-waiting", pool.name);
    let seen = match send_held(t, &pool.waiter, limit).await {
        Ok(reply) => {
            c.reply(t, &label, &reply);
            let took = reply.elapsed;
            c.sample(
                "queue timeout lateness",
                ms(took.saturating_sub(pool.timeout)),
            );
            let status = t.expected.refusal_status(pool.answer).unwrap_or(0);
            let mismatch = t.refusal_mismatch(&reply, pool.answer);
            if c.require(mismatch.is_none(), || {
                let got = match &mismatch {
                    // The right status with the wrong body: say which body was expected.
                    Some(why) if reply.status == status => why.clone(),
                    _ => format!("got {}", reply.status),
                };
                format!(
                    "{label}: waited for a held worker and {got} after {:.0} ms, not the queue \
                     timeout's {status} at {} ms",
                    ms(took),
                    pool.timeout.as_millis()
                )
            }) {
                let what = format!("the queue timeout of {} ms", pool.timeout.as_millis());
                c.require_on_time(&label, took, (pool.timeout, &what), late);
            }
            format!(
                "{}: answered {} after {:.0} ms",
                pool.name,
                reply.status,
                ms(took)
            )
        }
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            format!("{}: no answer", pool.name)
        }
    };
    let served = join_all(holders)
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(reply) if reply.status == pool.holder.request.status))
        .count();
    c.require(served == pool.workers as usize, || {
        format!(
            "{}: {served} of the {} requests holding the workers were served",
            pool.name, pool.workers
        )
    });
    seen
}
