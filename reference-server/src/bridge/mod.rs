//! `GET /v1/relay`: the relay bridge (seed 003, clauses R1–R6), the server side of the protocol
//! whose pieces live in [`crate::relay`].
//!
//! A client sends `relay-http-request` envelopes as JSON text messages on one WebSocket; the
//! server performs each against its own HTTP API (in-process, through the same `http::Api`, so
//! request ids, log lines and test hooks apply) and answers with `relay-http-response` frames matched by
//! `request_id`.
//!
//! - The receive loop (`connection`) only parses envelopes and enqueues them on the relay pool
//!   (`AppState::relay`, R1: `relay_concurrency` workers, overflow queues in FIFO order). The
//!   envelope joins the pool's queue before the next message is read, so start order is arrival
//!   order (R4); its job then runs as the [`RelayDispatch`](crate::relay::dispatch::RelayDispatch)
//!   says (R2).
//! - A worker (`worker`) holds its slot while it performs the request (and any
//!   `hold=relay:MS` hook) against the server's router — built once, by `server`, and handed
//!   over through `AppState::api` — and sends the response frames.
//! - All frames go through one [`FrameWriter`], a lock held per frame (R5).
//! - When the socket goes away, queued envelopes leave the queue, running workers finish and
//!   their responses are dropped without error; every slot comes back (R6).
//! - A message that is not an envelope gets a `relay-error` frame with a `code` (the contract's
//!   `invalid_parameter`) and the connection carries on.

pub(crate) mod dial;
pub(crate) mod upstream;
mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::response::Response;
use futures_util::StreamExt;
use plimsoll_spec::ErrorCode;
use plimsoll_spec::relay::RelayResponse;
use tokio_util::sync::CancellationToken;
use tracing::instrument::WithSubscriber;

use crate::logging::{ErrorFields, RequestLine};
use crate::relay::socket::{Ending, Incoming, Socket};
use crate::relay::writer::FrameWriter;
use crate::relay::{envelope, frames};
use crate::state::{ApiService, AppState};

/// Upgrades to a WebSocket and serves the relay protocol on it.
pub(crate) async fn upgrade(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| {
        let dispatch = state.dispatch.clone();
        async move {
            // Only missing once serving has ended: nothing is left to relay to.
            if let Some(api) = state.api.get() {
                let stop = state.relay_stop.clone();
                connection(state, api, Socket::accepted(socket), &stop).await;
            }
        }
        .with_subscriber(dispatch)
    })
}

/// What the receive loop and the workers of one socket share.
struct Connection {
    state: AppState,
    /// The server's own API; workers call it in-process.
    api: ApiService,
    writer: FrameWriter,
    /// Cancelled when the socket is gone (read side ended, a write failed) or the server stops.
    gone: CancellationToken,
    id: String,
    delivered: AtomicU64,
    dropped: AtomicU64,
}

impl Connection {
    /// Sends `frames` in order, one lock per frame; false when the socket is gone (the rest are
    /// dropped silently).
    async fn send_frames(&self, frames: &[RelayResponse]) -> bool {
        let sender = &self.state.components().frame_sender;
        for frame in frames {
            // clause: R6 — an orphaned response is dropped, frame by frame, without error
            if self.gone.is_cancelled() {
                return false;
            }
            if sender
                .send(&self.writer, frame, frames.len())
                .await
                .is_err()
            {
                self.gone.cancel();
                return false;
            }
        }
        true
    }

    /// Answers a message that is not an envelope, off the receive loop, and writes its error
    /// line (rule `relay-error`: `stage` `relay`, under the message's id or, when it has none,
    /// the connection's).
    fn reject(self: &Arc<Self>, malformed: envelope::Malformed) {
        let code = ErrorCode::InvalidParameter;
        let status = self.state.config.contract.error(code).status;
        let stack = if self.state.config.contract.clauses().f3.value.stack {
            std::backtrace::Backtrace::force_capture().to_string()
        } else {
            String::new()
        };
        let logged_as = if malformed.request_id.is_empty() {
            &self.id
        } else {
            &malformed.request_id
        };
        self.state.requests.write(&RequestLine {
            request_id: logged_as,
            status,
            error: Some(ErrorFields {
                stage: plimsoll_spec::Stage::Relay.as_str(),
                error: &malformed.detail,
                stack: &stack,
                code: code.as_str(),
                pool: None,
            }),
            access: None,
        });
        let frame = frames::error(
            &malformed.request_id,
            status,
            code.as_str(),
            malformed.detail,
        );
        let conn = self.clone();
        let send = async move {
            conn.send_frames(std::slice::from_ref(&frame)).await;
        };
        tokio::spawn(send.with_subscriber(self.state.dispatch.clone()));
    }
}

/// The receive loop of one socket, until the relay closes it or `stop` is cancelled (the server
/// stops, or a dialling bridge does); returns how the socket ended.
async fn connection(
    state: AppState,
    api: ApiService,
    socket: Socket,
    stop: &CancellationToken,
) -> Ending {
    let Socket { sink, mut stream } = socket;
    let conn = Arc::new(Connection {
        api,
        writer: FrameWriter::new(sink),
        gone: stop.child_token(),
        id: state.new_request_id(),
        delivered: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        state,
    });
    let hook_header = conn.state.config.contract.hooks().header.clone();
    tracing::info!(connection = %conn.id, "relay connection opened");
    let mut envelopes = 0u64;
    let ending = loop {
        let message = tokio::select! {
            () = conn.gone.cancelled() => break Ending::Closed,
            message = stream.next() => message.unwrap_or(Incoming::End(Ending::Closed)),
        };
        match message {
            Incoming::Text(text) => match envelope::parse(&text, &hook_header) {
                Ok(envelope) => {
                    envelopes += 1;
                    worker::dispatch(&conn, envelope).await;
                }
                Err(malformed) => conn.reject(malformed),
            },
            Incoming::Binary => conn.reject(envelope::Malformed {
                request_id: String::new(),
                detail: "binary messages are not envelopes: send JSON text".to_owned(),
            }),
            Incoming::Control => {}
            Incoming::End(ending) => break ending,
        }
    };
    let stopping = stop.is_cancelled();
    conn.gone.cancel();
    if stopping {
        conn.writer.close().await;
    }
    tracing::info!(
        connection = %conn.id,
        envelopes,
        delivered = conn.delivered.load(Ordering::Relaxed),
        dropped = conn.dropped.load(Ordering::Relaxed),
        server_stopping = stopping,
        reset = ending == Ending::Reset,
        "relay connection closed"
    );
    ending
}
