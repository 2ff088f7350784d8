//! R1: the relay pool runs N at once and never more; the rest queue and are answered.

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::{ClauseId, MetricName, Pool};

use super::client::{HOLD_MS, held_batch, nonce, relay_workers, round};
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::{Target, series};

/// R1's entry in the check registry: the evidence the docs print, and `r1`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::R1,
    "More envelopes than the {pools.relay.workers} relay workers, each held, sent at once on one \
     WebSocket: the requests running at once — counted at the checker's upstream when it plays \
     the bridge's local handler, else by the relay busy gauge sampled throughout — reach \
     {pools.relay.workers} and never exceed it, and every envelope is answered with a 2xx \
     (queue capacity `{pools.relay.queue.capacity}`: the extras wait, none is refused). On the \
     target's own API, an \
     envelope whose `{hooks.header}` does not parse is first refused as the HTTP API refuses it: a \
     `relay-http-response` of {status:invalid_parameter} `invalid_parameter`, not a `relay-error`.",
    |t, c| Box::pin(r1(t, c)),
)
.covers(&["relay-pool", "relay-hooks"]);

async fn r1(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t);
    let queue = match t.expected.pool(Pool::Relay).queue_capacity {
        None => "the rest wait their turn".to_owned(),
        Some(places) => format!("{places} may wait"),
    };
    let busy = series(MetricName::WorkersBusy, Pool::Relay);
    let extra = (n / 2).max(2);
    let total = n + extra;
    c.expected = format!(
        "{busy} (or the upstream's count) reaches {n} and never exceeds it while {total} envelopes (held {HOLD_MS} ms) are in flight; {queue}: all {total} answered 2xx"
    );
    super::refusals::hook_refused(t, c).await;
    let tag = nonce();
    let requests = held_batch(t, &format!("r1-{tag:x}"), total, HOLD_MS);
    let limit = Duration::from_millis(HOLD_MS * (total.div_ceil(n.max(1)) as u64 + 1))
        + Duration::from_secs(1);
    let Some((ex, samples)) = round(t, c, &requests, limit, true, "held").await else {
        return;
    };
    if let Some(claimed) = t.local.claimed_limit(t).await {
        c.evidence.push(format!(
            "{} = {claimed}",
            series(MetricName::WorkersLimit, Pool::Relay)
        ));
    }
    c.evidence.push(samples.describe());
    let last = ex.slowest(&requests).unwrap_or_default();
    let what = samples.what();
    c.observed = format!(
        "{what} max {} (limit {n}) over {} samples; {}/{total} answered, the last after {:.0} ms",
        samples.busy_max,
        samples.count,
        ex.done.len(),
        ms(last)
    );
    if let Some(why) = samples.missing() {
        return c.fail(why);
    }
    let max = samples.busy_max;
    c.require(max <= n as f64, || {
        format!("{max} relayed requests running at once ({what}); the limit is {n}")
    });
    c.require(max >= n as f64, || {
        format!("{what}: never {n} at once with {total} held envelopes in flight (max {max}): the pool does not run {n} at once")
    });
}
