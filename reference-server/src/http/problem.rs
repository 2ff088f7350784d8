//! The one place an [`ApiError`] becomes an HTTP response: status from the contract's
//! `[[errors]]`, an RFC 9457 body with the seed's members, `Retry-After` where the contract says
//! so, and the F3 log line.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use plimsoll_spec::{ErrorCode, PROBLEM_CONTENT_TYPE, Problem};

use crate::error::{ApiError, ErrorKind};
use crate::mutant::Mutant;
use crate::state::AppState;

pub fn error_response(state: &AppState, error: ApiError) -> Response {
    let config = &state.config;
    let contract = &config.contract;
    let code = error.code();
    let spec = contract.error(code);
    let detail = error.detail();
    let stages = error.stages();
    let (mut failed_stage, mut completed_stages) = match stages {
        Some((stage, done)) => (Some(stage), Some(done.to_vec())),
        None => (None, None),
    };
    if let (true, Some(stage)) = (config.is(Mutant::WrongFailedStage), failed_stage.as_mut()) {
        let stages = &contract.stages.digitize;
        if let Some(i) = stages.iter().position(|s| s == stage) {
            *stage = stages[(i + 1) % stages.len()];
        }
    }
    if let (true, Some(done)) = (
        config.is(Mutant::WrongCompletedStages),
        completed_stages.as_mut(),
    ) {
        done.clear();
    }

    let log_stage = match (&error.kind, failed_stage) {
        (_, Some(stage)) => stage.as_str(),
        (ErrorKind::Overloaded { .. }, None) => "admission",
        _ => "request",
    };
    let stack = if contract.clauses.f3.value.stack {
        error
            .backtrace()
            .map(str::to_owned)
            .unwrap_or_else(|| std::backtrace::Backtrace::force_capture().to_string())
    } else {
        String::new()
    };
    tracing::error!(
        request_id = %error.request_id,
        stage = log_stage,
        error = %detail,
        stack = %stack,
        code = %code,
        status = spec.status,
        pool = error.pool,
        "request failed"
    );
    state.metrics.outcome(error.pool, error.outcome());

    let mut status = StatusCode::from_u16(spec.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    if (code == ErrorCode::Timeout && config.is(Mutant::TimeoutAs500))
        || (code == ErrorCode::MalformedImage && config.is(Mutant::MalformedAs500))
    {
        status = StatusCode::INTERNAL_SERVER_ERROR;
    }
    let body = Problem {
        type_uri: code.type_uri(),
        title: spec.title.clone(),
        status: status.as_u16(),
        detail: detail.clone(),
        error: detail,
        code,
        failed_stage,
        completed_stages,
        request_id: error.request_id.clone(),
    };
    let mut response = (status, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
    );
    if let (ErrorKind::Overloaded { retry_after_s, .. }, true) = (&error.kind, spec.retry_after) {
        let value = if config.is(Mutant::NoRetryAfter) {
            None
        } else if config.is(Mutant::RetryAfterZero) {
            Some("0".to_owned())
        } else if config.is(Mutant::RetryAfterHttpDate) {
            Some("Wed, 21 Oct 2026 07:28:00 GMT".to_owned())
        } else {
            Some(retry_after_s.to_string())
        };
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(
                super::header_name(&contract.clauses.t3.value.retry_after_header),
                v,
            );
        }
    }
    response
}
