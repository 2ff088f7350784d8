//! Talking to the relay: one WebSocket per scenario, envelopes built from the contract, sent in
//! one flush, and the answers read until every request has its final frame or time runs out.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use plimsoll_spec::Pool;
use plimsoll_spec::relay::RelayRequest;
use tokio_tungstenite::tungstenite::Message;

use super::frames::Exchange;
use crate::checks::ctx::{Ctx, ms};
use crate::remote::sampler::Samples;
use crate::remote::{Target, WaitError};

pub use crate::remote::relay::Ws;

/// Why a relay socket could not be had, or envelopes not sent on it.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// No socket could be had ([`crate::remote::relay::RelaySocket::connect`]).
    #[error(transparent)]
    Open(#[from] crate::remote::relay::SocketError),
    /// An envelope could not be written as JSON.
    #[error("encoding an envelope: {0}")]
    Encode(serde_json::Error),
    /// The socket refused an envelope.
    #[error("sending an envelope: {0}")]
    Send(tokio_tungstenite::tungstenite::Error),
    /// The socket failed while the envelopes were flushed.
    #[error("sending envelopes: {0}")]
    Flush(tokio_tungstenite::tungstenite::Error),
}

/// The hold of R1 and R6: long against loopback jitter, short for the run time.
pub const HOLD_MS: u64 = 400;
/// The longest hold any relay check asks for (R2's slow request): what an earlier check may
/// still be holding when the next one opens its socket.
pub const LONGEST_HOLD_MS: u64 = 600;
/// Completion times are observed at the client: this much early/late is loopback noise.
pub const SLACK_MS: f64 = 30.0;

/// The latency that tells a relayed request answered at once from one that waited `wait_ms`
/// first (behind a held one), allowing for the run's fault: half the wait past the middle of
/// what the fault adds to a round trip. `Err`, in words for [`Ctx::fault_removes`], when the
/// fault's jitter leaves less than the timer slack on either side of it.
pub fn waited_line(t: &Target, wait_ms: u64) -> Result<f64, String> {
    let (least, most) = t.adjustments.round_trip();
    let wait = wait_ms as f64;
    timing_slack(t, wait_ms)?;
    Ok(wait / 2.0 + (ms(least) + ms(most)) / 2.0)
}

/// How much a run placed by its answer's time may be off at either end: the timer slack and
/// half the spread the run's fault can put between two round trips (two runs `span_ms` apart
/// can then seem closer by the spread, no more). `Err`, in words for [`Ctx::fault_removes`],
/// when that leaves nothing of `span_ms` to tell apart: the one rule R2, R4 and R6 place runs by.
pub fn timing_slack(t: &Target, span_ms: u64) -> Result<f64, String> {
    let spread = ms(t.adjustments.round_trip_spread());
    let slack = SLACK_MS + spread / 2.0;
    if 2.0 * slack < span_ms as f64 {
        return Ok(slack);
    }
    Err(format!(
        "its jitter can put {spread:.0} ms between two round trips, no less than {span_ms} ms less twice the timer slack ({SLACK_MS:.0} ms): no run can be placed by its answer's time"
    ))
}

/// The relay workers the contract promises (R1).
pub fn relay_workers(t: &Target) -> usize {
    t.expected.pool(Pool::Relay).workers as usize
}

/// How long a relay socket may take to be had.
const SOCKET_WITHIN: Duration = Duration::from_secs(3);

/// A relay socket (bounded to 3 s), with the time it took, from wherever the target's sockets
/// come ([`Target::relay`]).
pub async fn connect(t: &Target) -> Result<(Ws, Duration), SocketError> {
    Ok(t.relay.connect(SOCKET_WITHIN).await?)
}

/// Waits, at most `limit`, until no relayed request is running, as the target's local handler
/// counts them.
pub async fn idle(t: &Target, limit: Duration) -> Result<Duration, WaitError> {
    t.local.running(t, limit, &|n| n == 0.0).await
}

/// Waits (bounded) for the relay pool to be idle, then connects; records a failure and returns
/// None when the socket cannot be opened.
pub async fn open(t: &Target, c: &mut Ctx) -> Option<Ws> {
    let limit = t.stop_within() * 2 + Duration::from_millis(LONGEST_HOLD_MS);
    if let Err(e) = idle(t, limit).await {
        c.evidence
            .push(format!("relay pool not idle before the check: {e}"));
    }
    match connect(t).await {
        Ok((ws, took)) => {
            c.evidence.push(format!(
                "{} opened in {:.1} ms",
                t.relay.describe(),
                ms(took)
            ));
            Some(ws)
        }
        Err(e) => {
            c.fail(e.to_string());
            None
        }
    }
}

/// A token that differs run to run, so request ids never repeat against one server.
pub fn nonce() -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u64) ^ 0x9E37_79B9_7F4A_7C15
}

pub use crate::remote::local::envelope as request;

/// A request whose relay worker is busy `hold_ms` (0: not held), as the target's local handler
/// holds one ([`crate::remote::local::LocalHandler::held`]).
pub fn held(t: &Target, id: String, hold_ms: u64) -> RelayRequest {
    t.local.held(t, id, Duration::from_millis(hold_ms))
}

/// `count` [`held`] envelopes with ids `{prefix}-{i}`.
pub fn held_batch(t: &Target, prefix: &str, count: usize, hold_ms: u64) -> Vec<RelayRequest> {
    (0..count)
        .map(|i| held(t, format!("{prefix}-{i}"), hold_ms))
        .collect()
}

/// Sends every envelope in one flush (they reach the server back to back, in order).
pub async fn send_all(ws: &mut Ws, requests: &[RelayRequest]) -> Result<Instant, SocketError> {
    for r in requests {
        let text = serde_json::to_string(r).map_err(SocketError::Encode)?;
        ws.feed(Message::text(text))
            .await
            .map_err(SocketError::Send)?;
    }
    ws.flush().await.map_err(SocketError::Flush)?;
    Ok(Instant::now())
}

/// Reads until every sent id has its final frame, the socket closes, or `deadline`.
async fn receive(ws: &mut Ws, ex: &mut Exchange, deadline: Instant) {
    while !ex.complete() && ex.closed.is_none() {
        let message = match tokio::time::timeout_at(deadline.into(), ws.next()).await {
            Err(_) => return,
            Ok(None) => {
                ex.closed = Some("the server closed the socket".into());
                return;
            }
            Ok(Some(Err(e))) => {
                ex.closed = Some(format!("the socket failed: {e}"));
                return;
            }
            Ok(Some(Ok(m))) => m,
        };
        match message {
            Message::Text(text) => ex.message(text.as_str(), Instant::now()),
            Message::Binary(_) => ex.problem("a binary message; frames are JSON text".into()),
            Message::Close(frame) => {
                ex.closed = Some(format!("the server closed the socket ({frame:?})"));
            }
            _ => {}
        }
    }
}

/// Sends `requests` on `ws` and reads the answers until `limit` after sending.
pub async fn exchange(
    ws: &mut Ws,
    requests: &[RelayRequest],
    limit: Duration,
) -> Result<Exchange, SocketError> {
    let mut ex = Exchange::default();
    ex.began = Some(Instant::now());
    let at = send_all(ws, requests).await?;
    ex.record_sent(requests, at);
    receive(ws, &mut ex, Instant::now() + limit).await;
    Ok(ex)
}

/// One round on a fresh socket: open it (once the pool is idle), send `requests`, read the
/// answers until `limit`, close it; with `sampled`, the relay gauges are sampled meanwhile.
/// The requests go on the timeline as `label #i` and the exchange is judged
/// ([`Exchange::judge`]). None when the check cannot go on (failure or skip recorded).
pub async fn round(
    t: &Arc<Target>,
    c: &mut Ctx,
    requests: &[RelayRequest],
    limit: Duration,
    sampled: bool,
    label: &str,
) -> Option<(Exchange, Samples)> {
    let mut ws = open(t, c).await?;
    let sampler = sampled.then(|| t.local.count(t, limit + Duration::from_secs(1)));
    let ex = exchange(&mut ws, requests, limit).await;
    let samples = match sampler {
        Some(sampler) => sampler.finish().await,
        None => Samples::default(),
    };
    let _ = ws.close(None).await;
    let ex = match ex {
        Ok(ex) => ex,
        Err(e) => {
            c.fail(e.to_string());
            return None;
        }
    };
    ex.lanes(c, label);
    ex.judge(t, c, limit).then_some((ex, samples))
}
