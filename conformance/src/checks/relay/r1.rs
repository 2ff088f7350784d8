//! R1: the relay pool runs N at once and never more; the rest queue and are answered.

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::{ClauseId, MetricName, Pool};

use super::client::{HOLD_MS, held_batch, nonce, relay_workers, round};
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::{Target, series};

pub const CHECK: Check = Check::clause(
    ClauseId::R1,
    "More envelopes than the {relay_concurrency} relay workers, each held, sent at once on one \
     WebSocket: the relay busy gauge, sampled throughout, reaches {relay_concurrency} and never \
     exceeds it, and every envelope is answered with a 2xx (overflow `{overflow}`: the extras \
     wait, none is refused).",
    |t, c| Box::pin(r1(t, c)),
);

async fn r1(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t);
    let overflow = &t.expected.clauses.r1.value.overflow;
    let busy = series(MetricName::WorkersBusy, Pool::Relay);
    let extra = (n / 2).max(2);
    let total = n + extra;
    c.expected = format!(
        "{busy} reaches {n} and never exceeds it while {total} envelopes (held {HOLD_MS} ms) are in flight; overflow `{overflow:?}`: all {total} answered 2xx"
    );
    let tag = nonce();
    let requests = held_batch(t, &format!("r1-{tag:x}"), total, HOLD_MS);
    let limit = Duration::from_millis(HOLD_MS * (total.div_ceil(n.max(1)) as u64 + 1))
        + Duration::from_secs(1);
    let Some((ex, samples)) = round(t, c, &requests, limit, true, "held").await else {
        return;
    };
    let limit_gauge = t
        .metric(MetricName::WorkersLimit, Pool::Relay)
        .await
        .unwrap_or(f64::NAN);
    c.evidence.push(format!(
        "{} = {limit_gauge}",
        series(MetricName::WorkersLimit, Pool::Relay)
    ));
    c.evidence.push(format!(
        "{} gauge samples ({} errors); busy max {} first at {:.0} ms; queue depth max {}",
        samples.count, samples.errors, samples.busy_max, samples.busy_max_at_ms, samples.queued_max
    ));
    let last = ex.slowest(&requests).unwrap_or_default();
    c.observed = format!(
        "busy gauge max {} (limit {n}) over {} samples; queue depth max {}; {}/{total} answered, the last after {:.0} ms",
        samples.busy_max,
        samples.count,
        samples.queued_max,
        ex.done.len(),
        ms(last)
    );
    if samples.missing(c) {
        return;
    }
    let max = samples.busy_max;
    c.require(max <= n as f64, || {
        format!("{max} relay workers busy at once; the limit is {n}")
    });
    c.require(max >= n as f64, || {
        format!("the busy gauge never reached {n} with {total} held envelopes in flight (max {max}): the pool does not run {n} at once")
    });
}
