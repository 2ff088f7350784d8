//! R6: the bridge survives losing the relay's socket with work in flight; a bridge that dials
//! its relay is back within the bound, and no orphan's frame reaches the new socket.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::relay::RelayRequest;
use plimsoll_spec::{ClauseId, MetricName, Pool};
use reqwest::StatusCode;

use super::client::{
    HOLD_MS, SLACK_MS, Ws, connect, exchange, held_batch, idle, nonce, open, relay_workers,
    send_all, waited_line,
};
use super::frames::Exchange;
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::bridge::BridgeProcess;
use crate::remote::{Target, is_success, series};

/// R6's entry in the check registry: the evidence the docs print, and `r6`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::R6,
    "A socket is dropped, without a close handshake, with N held requests in flight, and a new \
     one opened at once — for a bridge that dials its relay (the embedded server's, or one \
     given `--relay-listen`), the bridge's next socket, which must come within \
     {reconnect_within_ms} ms: its requests are answered, the health endpoint answers, the relay \
     busy gauge returns to 0 and the queue is empty within the cancellation bound plus the hold, \
     N held requests run at once again (no slot leaked), and no frame of an orphan reaches the \
     new socket. A bridge the checker started (`--bridge-command`) is then told to stop \
     (SIGTERM) with N requests held far longer in flight, and must exit within \
     {stop_within_ms} ms.",
    |t, c| Box::pin(r6(t, c)),
)
.covers(&["relay-pool", "bridge-lifecycle"]);

/// What R6 expects, in words: what the socket's source, the local handler and a bridge the
/// checker started each make judgeable.
fn expected(t: &Target, n: usize, (hold, bound): (Duration, Duration)) -> String {
    let r6 = &t.expected.clauses().r6.value;
    let within = Duration::from_millis(r6.reconnect_within_ms);
    let socket = match t.relay.redial_within(within) {
        Some(within) => format!("the bridge's next socket within {} ms", within.as_millis()),
        None => "a new socket at once".to_owned(),
    };
    let health = match t.local.hook_header(t) {
        Some(_) => format!(", {} {}", t.expected.api().healthz.path, StatusCode::OK),
        None => String::new(),
    };
    let stop = match t.relay.process() {
        Some(_) => format!(
            "; SIGTERM with {n} in flight: exited within {} ms",
            r6.stop_within_ms
        ),
        None => String::new(),
    };
    format!(
        "after dropping a socket with {n} requests in flight (held {} ms): {socket}, its requests answered{health}, nothing running ({}) within {} ms, {n} slots usable, no orphan's frame on the new socket{stop}",
        hold.as_millis(),
        t.local.counts(),
        bound.as_millis()
    )
}

/// How long the orphans hold their slots: R1's hold, and twice the most the run's fault adds to
/// a round trip, since the checker drops the socket only once it has seen them all running (a
/// poll of the gauge sent as they go out may not see them yet, the next one's answer comes a
/// round trip later), and they must still be in flight then.
fn orphan_hold(t: &Target) -> Duration {
    Duration::from_millis(HOLD_MS) + t.adjustments.round_trip().1 * 2
}

async fn r6(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t).max(1);
    let hold = orphan_hold(t);
    let bound = t.stop_within() + hold;
    c.expected = expected(t, n, (hold, bound));
    let Some(first) = open(t, c).await else {
        return;
    };
    let tag = nonce();
    let Some(dropped) = drop_in_flight(t, c, (first, hold), n, tag).await else {
        return;
    };
    let Some(mut second) = reconnect(t, c, tag, bound).await else {
        return;
    };
    let recovery = recover(t, c, dropped, bound).await;
    // Capacity: n requests held briefly must all run at once (a leaked slot makes one wait).
    let capacity = Capacity::probe(t, &mut second.ws, n, tag, recovery.idle).await;
    let stopped = match t.relay.process() {
        Some(bridge) => Some(terminate(t, c, bridge, &mut second.ws, tag).await),
        None => None,
    };
    let _ = second.ws.close(None).await;
    let usable = capacity.judge(t, c, n);
    c.observed = observed(&second, &recovery, usable, n, stopped);
}

/// Sends `n` held requests (the orphans) on the first socket, waits (bounded) until they all
/// run, then drops the socket without a close handshake; returns when it was dropped, or None
/// when the orphans could not be sent (a failure is recorded) or their holds had ended by the
/// checker's clock before the drop (nothing surely in flight: a skip says so).
async fn drop_in_flight(
    t: &Target,
    c: &mut Ctx,
    (mut first, hold): (Ws, Duration),
    n: usize,
    tag: u64,
) -> Option<Instant> {
    let hold_ms = hold.as_millis() as u64;
    let orphans = held_batch(t, &format!("r6-{tag:x}-orphan"), n, hold_ms);
    let sent = match send_all(&mut first, &orphans).await {
        Ok(at) => at,
        Err(e) => {
            c.fail(e.to_string());
            return None;
        }
    };
    let running = Duration::from_millis(HOLD_MS / 2) + t.adjustments.round_trip().1 * 2;
    let all_running = t.local.running(t, running, &|v| v >= n as f64).await;
    match all_running {
        Ok(took) => c.evidence.push(format!(
            "{n} orphans running {:.0} ms after sending",
            ms(took)
        )),
        Err(e) => c
            .evidence
            .push(format!("orphans not all seen running before the drop: {e}")),
    }
    // Gone without a close handshake, as a crashed or unplugged client would be.
    drop(first);
    let dropped = Instant::now();
    for i in 0..orphans.len() {
        c.cancelled_lane(format!("orphan #{i}"), sent, dropped);
    }
    if dropped >= sent + hold {
        c.skip(format!(
            "the socket was dropped {:.0} ms after the orphans were sent, past their {hold_ms} ms hold: nothing was surely in flight (a slow path, slow gauges)",
            ms(dropped - sent)
        ));
        return None;
    }
    Some(dropped)
}

/// The socket opened right after the drop, once its first requests were answered: how soon it
/// came and how soon they were answered.
struct Reconnected {
    ws: Ws,
    took: Duration,
    /// When the slowest of the first requests on it was answered, ms.
    answered: Option<f64>,
}

/// Opens the next socket at once (for a bridge that dials its relay, the bridge's, within R6's
/// reconnect bound) and requires its first requests answered; None when the check cannot go on
/// (a failure is recorded).
async fn reconnect(t: &Target, c: &mut Ctx, tag: u64, bound: Duration) -> Option<Reconnected> {
    let (mut ws, took) = match connect(t).await {
        Ok(ok) => ok,
        Err(e) => {
            c.fail(format!("reconnecting right after the drop: {e}"));
            return None;
        }
    };
    // A bridge that dials its relay: the new socket is the bridge's, and how soon it came is
    // R6's reconnect bound.
    let reconnect_within = Duration::from_millis(t.expected.clauses().r6.value.reconnect_within_ms);
    if let Some(within) = t.relay.redial_within(reconnect_within) {
        c.require(ms(took) <= ms(within) + SLACK_MS, || {
            format!(
                "the bridge dialled the relay again {:.0} ms after it was dropped; the bound is {} ms",
                ms(took),
                within.as_millis()
            )
        });
    }
    let fresh = held_batch(t, &format!("r6-{tag:x}-new"), 2, 0);
    let limit = bound + Duration::from_millis(500);
    let ex = match exchange(&mut ws, &fresh, limit).await {
        Ok(ex) => ex,
        Err(e) => {
            c.fail(e.to_string());
            return None;
        }
    };
    ex.lanes(c, "after reconnect");
    if !ex.judge(t, c, limit) {
        return None;
    }
    let answered = ex.slowest(&fresh).map(ms);
    Some(Reconnected { ws, took, answered })
}

/// What the server showed after the drop: its health (a target with an HTTP API), and whether
/// nothing was running any more within the bound, at how many ms after the drop.
struct Recovery {
    health: Option<Result<u16, String>>,
    idle: bool,
    idle_ms: f64,
}

/// Requires the health endpoint to answer (a bridge of the checker's own has no HTTP API: that
/// new envelopes are answered is its health), the relay slots released within the bound and
/// (by the gauge) nothing queued.
async fn recover(t: &Target, c: &mut Ctx, dropped: Instant, bound: Duration) -> Recovery {
    let health = t.local.health(t).await;
    if let Some(health) = &health {
        c.require(health.as_ref().is_ok_and(|s| *s == StatusCode::OK), || {
            // Worded `Ok(503)` / `Err("timed out")`, as this failure has always read.
            let shown = match health {
                Ok(s) => format!("Ok({s})"),
                Err(e) => format!("Err({e:?})"),
            };
            format!(
                "{} after the reconnect: {shown}",
                t.expected.api().healthz.path
            )
        });
    }
    let left = bound.saturating_sub(dropped.elapsed()) + Duration::from_millis(SLACK_MS as u64);
    let idle = idle(t, left).await;
    let idle_ms = ms(dropped.elapsed());
    match &idle {
        Ok(_) => c.evidence.push(format!(
            "nothing running at {idle_ms:.0} ms after the drop (bound {} ms)",
            bound.as_millis()
        )),
        Err(e) => c.fail(format!(
            "relay slots not released after the drop: {e} (bound {} ms from the drop)",
            bound.as_millis()
        )),
    }
    if let Some(queued) = t.local.queued(t).await {
        c.require(queued == 0.0, || {
            format!(
                "{} is {queued} after the drop",
                series(MetricName::QueueDepth, Pool::Relay)
            )
        });
    }
    Recovery {
        health,
        idle: idle.is_ok(),
        idle_ms,
    }
}

/// The capacity probe on the new socket: `n` requests held briefly, and their exchange (None
/// when the slots were not released, so the probe was not sent; an error when the socket
/// failed under it).
struct Capacity {
    probes: Vec<RelayRequest>,
    exchanged: Option<Result<Exchange, String>>,
}

impl Capacity {
    /// How long each probe holds its slot, ms.
    const SHORT_MS: u64 = 200;

    /// Sends the probes once nothing is running any more; all must run at once.
    async fn probe(t: &Target, ws: &mut Ws, n: usize, tag: u64, idle: bool) -> Capacity {
        let short = Capacity::SHORT_MS;
        let probes = held_batch(t, &format!("r6-{tag:x}-cap"), n, short);
        let cap_limit = Duration::from_millis(short * 3 + 500) + t.adjustments.round_trip().1;
        let exchanged = if idle {
            Some((exchange(ws, &probes, cap_limit).await).map_err(|e| e.to_string()))
        } else {
            None
        };
        Capacity { probes, exchanged }
    }

    /// The latency under which a probe ran at once: its own hold, and the line between none
    /// and a whole hold of waiting ([`waited_line`]). None when the fault's jitter blurs that
    /// line, and the evidence says that the fault removes the timing part.
    fn at_once_within(t: &Target, c: &mut Ctx) -> Option<f64> {
        let short = Capacity::SHORT_MS;
        match waited_line(t, short) {
            Ok(line) => Some(short as f64 + line),
            Err(why) => {
                let part = "whether the held requests ran at once, by response timing";
                c.fault_removes(t, Some(part), why);
                None
            }
        }
    }

    /// Requires all `n` probes to have run at once (no slot leaked) and no orphan's frame on
    /// the new socket; returns how many ran at once.
    fn judge(&self, t: &Target, c: &mut Ctx, n: usize) -> usize {
        let mut usable = 0;
        if let Some(Err(e)) = &self.exchanged {
            c.fail(format!("the held requests on the new socket: {e}"));
        }
        if let Some(Ok(cap)) = &self.exchanged {
            let within = Capacity::at_once_within(t, c);
            usable = self
                .probes
                .iter()
                .filter(|r| cap.status(&r.request_id).is_some_and(is_success))
                .filter(|r| {
                    let latency = cap.latency(&r.request_id).map(ms);
                    within.is_none_or(|w| latency.is_some_and(|l| l < w))
                })
                .count();
            c.require(usable == n, || format!("capacity not recovered: {usable} of {n} held requests ran at once after the reconnect"));
            // By now the orphans have ended: a frame of theirs here went out on the new socket.
            c.require(cap.problem_count == 0, || {
                format!(
                    "{} protocol problem(s) on the new socket after the orphans ended (an orphan's frame resent?): {}",
                    cap.problem_count,
                    cap.problems().join("; ")
                )
            });
        }
        usable
    }
}

/// R6's observation in one line, from each phase's figures.
fn observed(
    second: &Reconnected,
    recovery: &Recovery,
    usable: usize,
    n: usize,
    stopped: Option<String>,
) -> String {
    let idle_ms = recovery.idle_ms;
    format!(
        "reconnected in {:.1} ms; new requests answered after {}{}; busy {} at {idle_ms:.0} ms after the drop; {usable}/{n} slots usable{}",
        ms(second.took),
        second
            .answered
            .map(|a| format!("{a:.0} ms"))
            .unwrap_or_else(|| "never".into()),
        recovery
            .health
            .as_ref()
            .map(|h| format!(
                "; healthz {}",
                match h {
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                }
            ))
            .unwrap_or_default(),
        if recovery.idle { "0" } else { "not 0" },
        stopped.unwrap_or_default()
    )
}

/// The bridge the checker started, told to stop (SIGTERM) with `n` held requests in flight,
/// must exit within R6's `stop_within_ms` without waiting for them; returns the observation.
async fn terminate(
    t: &Target,
    c: &mut Ctx,
    bridge: &BridgeProcess,
    ws: &mut Ws,
    tag: u64,
) -> String {
    let n = relay_workers(t).max(1);
    let within = Duration::from_millis(t.expected.clauses().r6.value.stop_within_ms);
    // Held far longer than the bound: a bridge that waits for its workers cannot make it.
    let hold = within * 5;
    let stragglers = held_batch(
        t,
        &format!("r6-{tag:x}-straggler"),
        n,
        hold.as_millis() as u64,
    );
    if let Err(e) = send_all(ws, &stragglers).await {
        c.fail(format!("sending the stragglers before the stop: {e}"));
        return String::new();
    }
    if let Err(e) = t
        .local
        .running(t, Duration::from_secs(2), &|v| v >= n as f64)
        .await
    {
        c.evidence.push(format!("before the stop: {e}"));
    }
    let limit = within + Duration::from_millis(SLACK_MS as u64);
    match bridge.terminate(limit).await {
        Ok((took, status)) => {
            c.evidence.push(format!(
                "SIGTERM with {n} requests in flight (held {} ms): exited in {:.0} ms ({status})",
                hold.as_millis(),
                ms(took)
            ));
            format!("; stopped {:.0} ms after SIGTERM", ms(took))
        }
        Err(e) => {
            c.fail(format!(
                "told to stop (SIGTERM) with {n} requests in flight: {e}; the bound is {} ms",
                within.as_millis()
            ));
            "; did not stop in time".to_owned()
        }
    }
}
