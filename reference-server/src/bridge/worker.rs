//! One envelope's life: join the relay pool's queue (in arrival order), wait for a slot, hold it
//! while performing the request against the server's own router and sending the response
//! frames, then give the slot back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use axum::http::HeaderValue;
use futures_util::StreamExt;
use plimsoll_spec::relay::RelayResponse;
use plimsoll_spec::{ErrorCode, Outcome, Pool};
use tower::ServiceExt;
use tracing::instrument::WithSubscriber;

use super::Connection;
use crate::admission::{Permit, Refused, Slot};
use crate::error::ApiError;
use crate::relay::envelope::Envelope;
use crate::relay::frames;
use crate::worker::WorkerEnd;

/// Enqueues `envelope` on the relay pool and hands its job (slot wait, request, frames) to the
/// server's [`RelayDispatch`](crate::relay::dispatch::RelayDispatch). The envelope is in the
/// pool's queue before the job is handed over, so the queue is in arrival order; the contract's
/// dispatch returns at once, so the receive loop never waits for a request.
pub(super) async fn dispatch(conn: &Arc<Connection>, envelope: Envelope) {
    let state = &conn.state;
    let hold = state.components().relay_hooks.hold(
        &state.config.contract,
        state.config.hooks_enabled,
        envelope.hook.as_deref(),
    );
    let hold = match hold {
        Ok(hold) => hold,
        Err(refused) => {
            // Refused like the HTTP API refuses the hook header: before admission, no slot, and
            // under the id the API would have given it (rule `relay-hooks`).
            let id = state.request_id_of(envelope.request.headers());
            let error = ApiError::new(&id, Some(Pool::Relay), refused);
            let mut response = state.problems().respond(error);
            crate::problem::log_unrouted(&state.requests, &mut response);
            if let Ok(value) = HeaderValue::try_from(id) {
                let claims = &state.components().claims;
                claims.stamp_request_id(response.headers_mut(), &state.headers.request_id, value);
            }
            let conn = conn.clone();
            let answer = async move {
                respond(&conn, &envelope.request_id, response).await;
            };
            tokio::spawn(answer.with_subscriber(state.dispatch.clone()));
            return;
        }
    };
    let pool = state.relay.clone();
    let mut admit: Pin<Box<dyn Future<Output = Result<Permit, Refused>> + Send>> =
        Box::pin(async move { pool.acquire().await });
    // Polled once here: a free slot is taken, or the envelope takes its place in the FIFO queue.
    // clause: R4 — every envelope queues in arrival order; busy workers never exceed N
    let first = std::future::poll_fn(|cx| Poll::Ready(admit.as_mut().poll(cx))).await;
    let job = {
        let conn = conn.clone();
        async move {
            let admitted = match first {
                Poll::Ready(admitted) => admitted,
                Poll::Pending => tokio::select! {
                    admitted = &mut admit => admitted,
                    // The socket is gone while queued: leave the queue (dropping `admit`).
                    () = conn.gone.cancelled() => {
                        conn.dropped.fetch_add(1, Ordering::Relaxed);
                        conn.state.metrics.outcome(Pool::Relay, Outcome::Cancelled);
                        return;
                    }
                },
            };
            drop(admit);
            match admitted {
                Ok(permit) => run(&conn, envelope, hold, permit).await,
                Err(Refused { retry_after_s, .. }) => {
                    let code = ErrorCode::Overloaded;
                    let status = conn.state.config.contract.error(code).status;
                    let frame = frames::error(
                        &envelope.request_id,
                        status,
                        code.as_str(),
                        format!("all relay workers are busy; retry after {retry_after_s} s"),
                    );
                    conn.state.metrics.outcome(Pool::Relay, Outcome::Overloaded);
                    conn.send_frames(std::slice::from_ref(&frame)).await;
                }
            }
        }
    };
    let job = Box::pin(job.with_subscriber(state.dispatch.clone()));
    state.components().relay_dispatch.run(job).await;
}

/// The worker: holds `permit` through the hook hold, the request and the frames.
async fn run(conn: &Arc<Connection>, envelope: Envelope, hold: Duration, permit: Permit) {
    let state = &conn.state;
    // Dropped on every early return, which gives the slot back.
    let slot = Slot::new(permit);
    if !hold.is_zero() {
        tokio::select! {
            () = tokio::time::sleep(hold) => {}
            // The server stops: the slot comes back now and nobody is left to answer.
            () = state.relay_stop.cancelled() => return,
        }
    }
    let response = tokio::select! {
        response = conn.api.clone().oneshot(envelope.request) => match response {
            Ok(response) => response,
            Err(never) => match never {},
        },
        () = state.relay_stop.cancelled() => return,
    };
    // clause: R3 — the response frames carry the envelope's request_id
    let delivered = respond(conn, &envelope.request_id, response).await;
    let outcome = if delivered {
        Outcome::Ok
    } else {
        Outcome::Cancelled
    };
    state.metrics.outcome(Pool::Relay, outcome);
    let end = WorkerEnd {
        pool: Pool::Relay,
        client_gone: !delivered,
        deadline_passed: false,
        failure: None,
    };
    state.components().slot_release.worker_stopped(&slot, &end);
}

/// Why a response's body could not go out whole.
#[derive(Debug, thiserror::Error)]
enum BodyFailed {
    /// The handler's body failed while it was read.
    #[error("the response body could not be read: {0}")]
    Read(axum::Error),
    /// The body cannot be framed as its content type says.
    #[error(transparent)]
    Frames(#[from] frames::NotUtf8),
}

/// The `relay-error` frame that ends a response whose body failed (`stage_failed`).
fn body_failed(
    state: &crate::state::AppState,
    framer: &frames::Framer,
    why: BodyFailed,
) -> RelayResponse {
    let code = ErrorCode::StageFailed;
    let status = state.config.contract.error(code).status;
    framer.error(status, code.as_str(), why.to_string())
}

/// Sends the response as frames while its body arrives (R5: a frame goes once more than a
/// frame's worth is held); false when the socket is gone, and then the rest of the body is not
/// read. A body that fails ends the response with a `relay-error` frame.
async fn respond(conn: &Connection, request_id: &str, response: axum::response::Response) -> bool {
    let state = &conn.state;
    let (parts, body) = response.into_parts();
    let max = usize::try_from(
        state
            .config
            .contract
            .clauses()
            .r5
            .value
            .max_frame_body_bytes,
    )
    .unwrap_or(usize::MAX);
    let mut framer = frames::Framer::new(request_id, parts.status.as_u16(), &parts.headers, max);
    let mut body = body.into_data_stream();
    let delivered = loop {
        let ready = match body.next().await {
            Some(Ok(bytes)) => framer.push(&bytes).map_err(BodyFailed::from),
            Some(Err(e)) => Err(BodyFailed::Read(e)),
            None => {
                break conn
                    .send_frames(
                        &framer
                            .finish()
                            .unwrap_or_else(|why| vec![body_failed(state, &framer, why.into())]),
                    )
                    .await;
            }
        };
        match ready {
            Ok(frames) if conn.send_frames(&frames).await => {}
            Ok(_) => break false,
            Err(why) => break conn.send_frames(&[body_failed(state, &framer, why)]).await,
        }
    };
    if delivered {
        conn.delivered.fetch_add(1, Ordering::Relaxed);
    } else {
        conn.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::info!(connection = %conn.id, request_id, "relay response dropped: the socket is gone");
    }
    delivered
}
