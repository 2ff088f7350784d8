//! R2: no head-of-line blocking on one socket.

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::ClauseId;

use super::client::{LONGEST_HOLD_MS, SLACK_MS, held, nonce, relay_workers, round, waited_line};
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::Target;

/// The slow request's hold.
const SLOW_MS: u64 = LONGEST_HOLD_MS;

/// R2's entry in the check registry: the evidence the docs print, and `r2`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::R2,
    "A slow (held) request and then a fast one, on the same socket: the fast response arrives \
     first, in less than half the slow one's hold, and the slow one is answered only after its \
     hold (so it really was in flight). With one relay worker (a valid `RELAY_CONCURRENCY`) a \
     second request must wait, so the clause does not apply: the check passes as not applicable.",
    |t, c| Box::pin(r2(t, c)),
);

async fn r2(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t);
    c.expected = format!(
        "a fast request sent after a slow one (held {SLOW_MS} ms) on the same socket is answered first, without waiting"
    );
    if n < 2 {
        return c.not_applicable(format!(
            "{n} relay worker: a second request on the socket waits for it by design"
        ));
    }
    let tag = nonce();
    let slow = format!("r2-{tag:x}-slow");
    let fast = format!("r2-{tag:x}-fast");
    let requests = [held(t, slow.clone(), SLOW_MS), held(t, fast.clone(), 0)];
    let limit = Duration::from_millis(SLOW_MS * 2) + Duration::from_secs(1);
    let Some((ex, _)) = round(t, c, &requests, limit, false, "r2").await else {
        return;
    };
    let (Some(fast_ms), Some(slow_ms)) = (ex.latency(&fast).map(ms), ex.latency(&slow).map(ms))
    else {
        return;
    };
    c.observed = format!(
        "fast answered after {fast_ms:.1} ms, slow after {slow_ms:.0} ms; completion order {:?}",
        ex.order
    );
    c.trials_ms.push(fast_ms);
    c.sample("fast request latency", fast_ms);
    c.require(slow_ms + SLACK_MS >= SLOW_MS as f64, || {
        format!("the slow request was answered after {slow_ms:.0} ms, before its {SLOW_MS} ms hold: the hold was not applied, so nothing was in flight")
    });
    c.require(ex.order.first() == Some(&fast), || {
        format!("the fast request was answered after the slow one ({fast_ms:.0} ms vs {slow_ms:.0} ms): head-of-line blocking")
    });
    match waited_line(t, SLOW_MS) {
        Ok(line) => {
            c.require(fast_ms < line, || {
                format!(
                    "the fast request took {fast_ms:.0} ms while the slow one was in flight: it waited"
                )
            });
        }
        Err(why) => c.fault_removes(
            t,
            Some("whether the fast request waited, by its latency"),
            why,
        ),
    }
}
