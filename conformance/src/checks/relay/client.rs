//! Talking to the relay: one WebSocket per scenario, envelopes built from the contract, sent in
//! one flush, and the answers read until every request has its final frame or time runs out.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use plimsoll_spec::relay::{RELAY_REQUEST, RelayRequest};
use plimsoll_spec::{MetricName, Pool, Stage};
use tokio_tungstenite::tungstenite::Message;

use super::frames::Exchange;
use super::sampler::{Samples, sample};
use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::hold;
use crate::remote::relay::DialError;
use crate::remote::upstream::Ask;
use crate::remote::{Target, WaitError};

pub use crate::remote::relay::Ws;

/// Why a relay socket could not be had, or envelopes not sent on it.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The checker plays the relay, and the target's bridge did not dial it.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The target's relay endpoint did not complete a handshake within 3 s.
    #[error("connecting to {url} took more than 3 s")]
    Slow {
        /// The relay endpoint.
        url: String,
    },
    /// The target's relay endpoint refused the connection or the handshake.
    #[error("connecting to {url}: {source}")]
    Connect {
        /// The relay endpoint.
        url: String,
        /// Why it failed.
        source: tokio_tungstenite::tungstenite::Error,
    },
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

/// The relay workers the contract promises (R1).
pub fn relay_workers(t: &Target) -> usize {
    t.expected.clauses.r1.value.relay_concurrency as usize
}

fn relay_url(t: &Target) -> String {
    let base = if let Some(rest) = t.base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = t.base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        t.base.clone()
    };
    format!("{base}{}", t.expected.api.relay.path)
}

/// Where the socket comes from, and the fault it crosses, for the evidence.
fn socket_source(t: &Target) -> String {
    let through =
        |fault: Option<String>| fault.map(|f| format!(" through {f}")).unwrap_or_default();
    match &t.relay {
        Some(relay) => format!(
            "the bridge's socket to {}{}",
            relay.url(),
            through(relay.through().map(|(fault, _)| fault.to_string()))
        ),
        None => format!("{}{}", relay_url(t), through(t.adjustments.fault.clone())),
    }
}

/// A relay socket (bounded to 3 s), with the time it took: dialled to the target's relay
/// endpoint, or — when the checker plays the relay — the socket the target's bridge dialled.
pub async fn connect(t: &Target) -> Result<(Ws, Duration), SocketError> {
    let started = Instant::now();
    let limit = Duration::from_secs(3);
    if let Some(relay) = &t.relay {
        let dialled = relay.next(limit).await?;
        return Ok((dialled.ws, started.elapsed()));
    }
    let url = relay_url(t);
    match tokio::time::timeout(limit, tokio_tungstenite::connect_async(url.as_str())).await {
        Err(_) => Err(SocketError::Slow { url }),
        Ok(Err(source)) => Err(SocketError::Connect { url, source }),
        Ok(Ok((ws, _))) => Ok((ws, started.elapsed())),
    }
}

/// Waits, at most `limit`, until no relayed request is running: by the upstream's count when the
/// checker plays the bridge's local handler, else by the relay busy gauge.
pub async fn idle(t: &Target, limit: Duration) -> Result<Duration, WaitError> {
    match &t.upstream {
        Some(upstream) => upstream.wait_in_flight(limit, |n| n == 0).await,
        None => {
            t.wait_metric(MetricName::WorkersBusy, Pool::Relay, limit, |v| v == 0.0)
                .await
        }
    }
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
            c.evidence
                .push(format!("{} opened in {:.1} ms", socket_source(t), ms(took)));
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

/// An envelope for `method path`, no headers, no body.
pub fn request(id: String, method: &str, path: &str) -> RelayRequest {
    RelayRequest {
        kind: RELAY_REQUEST.to_owned(),
        request_id: id,
        method: method.to_owned(),
        path: path.to_owned(),
        headers: BTreeMap::new(),
        body: String::new(),
    }
}

/// The envelope with a hook holding its relay worker `hold_ms` (0: not held): for a target whose
/// bridge relays to its own API.
pub fn with_hold(t: &Target, mut r: RelayRequest, hold_ms: u64) -> RelayRequest {
    if hold_ms > 0 {
        r.headers
            .insert(t.hook_header().to_owned(), hold(Stage::Relay, hold_ms));
    }
    r
}

/// A request whose relay worker is busy `hold_ms` (0: not held): `GET {healthz}` held by a relay
/// hook on the target's own API, or — when the checker plays the bridge's local handler — a
/// request the upstream itself holds, answering under the same id.
pub fn held(t: &Target, id: String, hold_ms: u64) -> RelayRequest {
    let hold = Duration::from_millis(hold_ms);
    match &t.upstream {
        Some(_) => {
            let path = Ask::new(id.clone()).held(hold).path();
            request(id, "GET", &path)
        }
        None => with_hold(t, request(id, "GET", &t.expected.api.healthz.path), hold_ms),
    }
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
    let sampler = sampled.then(|| sample(t, limit + Duration::from_secs(1)));
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
