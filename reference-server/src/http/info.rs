//! The small endpoints: the effective contract, metrics, liveness, and the 404 fallback.

use axum::Extension;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use plimsoll_spec::ErrorCode;

use super::RequestId;
use crate::error::ApiError;
use crate::state::AppState;

pub async fn contract(State(state): State<AppState>) -> Response {
    axum::Json(state.components().claims.contract(&state.config.contract)).into_response()
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    let temp = crate::temp::count(&state.config.temp_root);
    state
        .metrics
        .temp_files
        .set(i64::try_from(temp).unwrap_or(i64::MAX));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.components().claims.metrics(state.metrics.encode()),
    )
        .into_response()
}

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn not_found(
    State(state): State<AppState>,
    Extension(id): Extension<RequestId>,
    request: Request,
) -> Response {
    let detail = format!("no route for {} {}", request.method(), request.uri().path());
    state
        .problems()
        .respond(ApiError::rejected(&id.0, None, ErrorCode::NotFound, detail))
}
