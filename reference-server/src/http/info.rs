//! The small endpoints: the effective contract, metrics, liveness, the relay's door (a WebSocket
//! upgrade or 426), and the 404 fallback.

use axum::Extension;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use plimsoll_spec::{ErrorCode, Pool};

use super::RequestId;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) async fn contract(State(state): State<AppState>) -> Response {
    axum::Json(state.components().claims.contract(&state.config.contract)).into_response()
}

/// `GET /metrics`. `plimsoll_temp_files` is counted on the disk, on a blocking thread: the count
/// reads the temp root, which waits while a worker removes a job dir there, and that can take
/// seconds under writeback; on an async thread it would stall every request the thread serves
/// (measured: refusals answered after 2.5 s while the disk flushed a build).
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let root = state.config.temp_root.clone();
    let temp = tokio::task::spawn_blocking(move || plimsoll_engine::temp::count(&root))
        .await
        .unwrap_or_default();
    state
        .metrics
        .temp_files
        .set(i64::try_from(temp).unwrap_or(i64::MAX));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state
            .components()
            .claims
            .metrics(state.metrics.encode(), &state.config.contract),
    )
        .into_response()
}

/// `GET /v1/relay`: the relay bridge when the request is a WebSocket upgrade; otherwise 426
/// `upgrade_required` with `Upgrade: websocket`.
pub(super) async fn relay(
    State(state): State<AppState>,
    Extension(id): Extension<RequestId>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match ws {
        Ok(ws) => crate::bridge::upgrade(State(state), ws).await,
        // clause: F2 — a plain GET of the relay endpoint is 426 `upgrade_required`
        Err(rejection) => {
            let detail = format!(
                "{} is a WebSocket endpoint: send a WebSocket upgrade request ({})",
                state.config.contract.api().relay.path,
                rejection.body_text()
            );
            let error =
                ApiError::rejected(&id.0, Some(Pool::Relay), ErrorCode::UpgradeRequired, detail);
            let mut response = state.problems().respond(error);
            response
                .headers_mut()
                .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
            response
        }
    }
}

pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

pub(super) async fn not_found(
    State(state): State<AppState>,
    Extension(id): Extension<RequestId>,
    request: Request,
) -> Response {
    let detail = format!("no route for {} {}", request.method(), request.uri().path());
    state
        .problems()
        .respond(ApiError::rejected(&id.0, None, ErrorCode::NotFound, detail))
}
