//! B3 for any service whose pool holds by a dependency the checker plays (`hold.dependency`)
//! and declares its `cancellation`: the checker sees the work itself from the other end. It
//! sends a request held far longer than the bound, waits until the service's call reaches the
//! dependency (the work has started), then goes away; the service must close that call within
//! `stop_within_ms` of the disconnect. A service that lets the work run on after its client left
//! (a detached task, a call nobody cancels) keeps the call open until its answer, and fails.
//! The client leaves twice, at once and two bounds after the call ([`LEAVES`]), and the call
//! must still be open, the request unanswered, when it does: a call the service ends on its own
//! (a timeout of its own) could seem stopped within the bound of one leave, never of both.
//! Nothing the service reports is read: the call's end is seen on the checker's own clock. A
//! contract that declares `[temp_files]` has the folder read too (`--temp-dir`): the request's
//! files must be gone by the same bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::Contract;
use plimsoll_spec::model::{Cancellation, DependencyHold, Hold, PoolSpec};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{HeldRequest, declared_temp_left_by, spawn_held};
use crate::remote::Target;
use crate::remote::dependency::Dependency;

/// How long the checker waits for the service's call to reach the dependency once the request
/// is sent: a request that starts at once calls well within this.
const CALL_WITHIN: Duration = Duration::from_secs(2);

/// When the client leaves once the call reached the dependency, in bounds (`stop_within_ms`):
/// at once, and two bounds later. A call that ends on its own within the first leave's bound
/// has ended before the second leave.
const LEAVES: [u32; 2] = [0, 2];

/// A pool whose disconnects the checker can watch from the dependency.
pub(super) struct Watched<'c> {
    name: &'c str,
    spec: &'c PoolSpec,
    hold: &'c Hold,
    dependency: &'c DependencyHold,
    cancellation: &'c Cancellation,
}

/// Every pool that holds by a dependency and declares its cancellation.
pub(super) fn declared(contract: &Contract) -> Vec<Watched<'_>> {
    (contract.pools.iter())
        .filter_map(|(name, spec)| {
            let hold = spec.hold.as_ref()?;
            Some(Watched {
                name,
                spec,
                hold,
                dependency: hold.dependency.as_ref()?,
                cancellation: spec.cancellation.as_ref()?,
            })
        })
        .collect()
}

/// Drops one held request of each such pool once its call reached the dependency, and
/// requires the call closed within the bound. Returns what was expected and observed, in words.
pub(super) async fn judge(t: &Arc<Target>, c: &mut Ctx) -> (String, String) {
    let pools = declared(&t.expected);
    let expected = pools
        .iter()
        .map(|p| {
            format!(
                "{}: its dependency's call still open when the client goes away (at once, and \
                 two bounds after the call) and closed within {} ms of it",
                p.name,
                t.stop_bound(p.cancellation.stop_within_ms).as_millis()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut observed = Vec::new();
    for pool in &pools {
        observed.push(judge_pool(t, c, pool).await);
    }
    (expected, observed.join("; "))
}

/// One pool, its client leaving at each of [`LEAVES`].
async fn judge_pool(t: &Arc<Target>, c: &mut Ctx, pool: &Watched<'_>) -> String {
    let bound = t.stop_bound(pool.cancellation.stop_within_ms);
    let mut observed = Vec::new();
    for bounds in LEAVES {
        let leave = bound * bounds;
        let name = match bounds {
            0 => format!("{}, leaving at once", pool.name),
            _ => format!(
                "{}, leaving {} ms after the call",
                pool.name,
                leave.as_millis()
            ),
        };
        observed.push(judge_leave(t, c, pool, &name, leave).await);
    }
    observed.join("; ")
}

/// One request: sent, its call awaited at the dependency, the client gone `leave` later (the
/// call still open), the call's end awaited for the bound.
async fn judge_leave(
    t: &Arc<Target>,
    c: &mut Ctx,
    pool: &Watched<'_>,
    name: &str,
    leave: Duration,
) -> String {
    let bound = t.stop_bound(pool.cancellation.stop_within_ms);
    // Held past the leave and twice the bound, by a second more, so only a stop can end the
    // call within the bound (no longer: under a fault the bound widens, and a pool's deadline
    // must still leave room for the hold).
    let long = leave + bound * 2 + Duration::from_secs(1);
    let Some(held) = HeldRequest::at_least(pool.hold, pool.spec, long) else {
        c.skip(format!(
            "{name}: its deadline ends a request before a hold of {} ms: B3 cannot be judged",
            long.as_millis()
        ));
        return format!("{name}: not judged");
    };
    let dependency = match t.dependencies.get(pool.dependency).await {
        Ok(d) => d,
        Err(e) => {
            c.fail(format!("{name}: {e}"));
            return format!("{name}: its dependency cannot be played");
        }
    };
    let task = spawn_held(t, &held, long * 2);
    if let Err(e) = dependency.wait_calls(CALL_WITHIN, |n| n >= 1).await {
        task.abort();
        c.fail(format!(
            "{name}: the service did not call its dependency {} within {} ms of the request: {e}",
            dependency.name(),
            CALL_WITHIN.as_millis()
        ));
        return format!("{name}: no call to watch");
    }
    // Only a request still held, its call still open, is work that a disconnect can stop: one
    // answered already, or a call the service closed on its own, held nothing.
    tokio::time::sleep(leave).await;
    if task.is_finished()
        || dependency
            .wait_calls(Duration::ZERO, |n| n >= 1)
            .await
            .is_err()
    {
        task.abort();
        c.fail(format!(
            "{name}: the request's call to {} ended before the client went away: nothing was \
             held for a disconnect to stop",
            dependency.name()
        ));
        return format!("{name}: nothing held");
    }
    task.abort();
    let gone = Instant::now();
    let _ = task.await;
    call_end(t, c, name, &dependency, (gone, bound, long)).await
}

/// After the client went away at `gone`: the call must close within `bound`, and the request's
/// temp files be gone by then; a call that outlives it is waited out (at most `long`), so the
/// next check finds the dependency idle. Returns the end in words.
async fn call_end(
    t: &Target,
    c: &mut Ctx,
    name: &str,
    dependency: &Dependency,
    (gone, bound, long): (Instant, Duration, Duration),
) -> String {
    let ended = dependency.wait_calls(bound, |n| n == 0).await;
    let after = gone.elapsed();
    match ended {
        Ok(_) => {
            c.evidence.push(format!(
                "{name}: the call to {} closed {:.0} ms after the client went away",
                dependency.name(),
                ms(after)
            ));
            let closed = format!("{name}: the call closed after {:.0} ms", ms(after));
            match declared_temp_left_by(t, c, name, gone + bound).await {
                Some(temp) => format!("{closed}, {temp}"),
                None => closed,
            }
        }
        Err(_) => {
            c.fail(format!(
                "{name}: the service was still calling its dependency {} {} ms after its client \
                 went away (the contract: it stops within {} ms)",
                dependency.name(),
                after.as_millis(),
                bound.as_millis()
            ));
            let _ = dependency.wait_calls(long, |n| n == 0).await;
            format!("{name}: the call outlived the client")
        }
    }
}
