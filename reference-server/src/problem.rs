//! The one place an [`ApiError`] becomes an HTTP response: status from the contract's
//! `[[errors]]`, an RFC 9457 body with the seed's members, `Retry-After` where the contract says
//! so, and the F3 log line. The HTTP endpoints and the relay bridge both answer through
//! [`Responder`]; what the answer says is the [`ErrorMapper`] seam ([`ContractAnswers`]).

use std::fmt::Debug;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use plimsoll_spec::{Contract, PROBLEM_CONTENT_TYPE, Pool, Problem};

use crate::error::{ApiError, ErrorKind};
use crate::metrics::Metrics;

/// What the client is told about an error.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Problem,
    /// `Retry-After`, where the contract wants one (T3).
    pub retry_after: Option<HeaderValue>,
    /// The F3 log line's `stage`: the failed stage, `admission` or `request`.
    pub log_stage: &'static str,
}

/// Decides the answer to an error.
pub trait ErrorMapper: Debug + Send + Sync {
    fn answer(&self, error: &ApiError, contract: &Contract) -> Answer;
}

/// The contract's answers.
#[derive(Debug)]
pub struct ContractAnswers;

impl ErrorMapper for ContractAnswers {
    fn answer(&self, error: &ApiError, contract: &Contract) -> Answer {
        let code = error.code();
        let spec = contract.error(code);
        let detail = error.to_string();
        // clause: F1 — `failed_stage` and `completed_stages` name where the job stopped
        let (failed_stage, completed_stages) = match error.stages() {
            Some((stage, done)) => (Some(stage), Some(done.to_vec())),
            None => (None, None),
        };
        let log_stage = match (&error.kind, failed_stage) {
            (_, Some(stage)) => stage.as_str(),
            (ErrorKind::Overloaded { .. }, None) => "admission",
            _ => "request",
        };
        // clause: F2 — one 4xx status and code per failure mode, from `[[errors]]`; never 500
        let status = StatusCode::from_u16(spec.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        // clause: T3 — `Retry-After: N` in delay-seconds
        let retry_after = match (&error.kind, spec.retry_after) {
            (ErrorKind::Overloaded { retry_after_s, .. }, true) => {
                Some(HeaderValue::from(*retry_after_s))
            }
            _ => None,
        };
        Answer {
            status,
            body: Problem {
                type_uri: code.type_uri(),
                title: spec.title.clone(),
                status: status.as_u16(),
                detail: detail.clone(),
                error: detail,
                code,
                failed_stage,
                completed_stages,
                request_id: error.request_id.clone(),
            },
            retry_after,
            log_stage,
        }
    }
}

/// What turning an error into a response needs, borrowed from the server's state.
pub struct Responder<'a> {
    pub contract: &'a Contract,
    pub mapper: &'a dyn ErrorMapper,
    pub metrics: &'a Metrics,
    pub retry_after_header: &'a HeaderName,
}

impl Responder<'_> {
    /// The response to `error`; also writes its F3 log line and counts its outcome.
    pub fn respond(&self, error: ApiError) -> Response {
        let answer = self.mapper.answer(&error, self.contract);
        self.log(&error, &answer);
        if let Some(pool) = error.pool {
            self.metrics.outcome(pool, error.outcome());
        }
        let mut response = (answer.status, axum::Json(answer.body)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
        );
        if let Some(value) = answer.retry_after {
            headers.insert(self.retry_after_header.clone(), value);
        }
        response
    }

    // clause: F3 — one JSON line per error: request_id, stage, error, stack (by LOG_STACK)
    fn log(&self, error: &ApiError, answer: &Answer) {
        let code = error.code();
        let stack = if self.contract.clauses.f3.value.stack {
            error
                .backtrace()
                .map(str::to_owned)
                .unwrap_or_else(|| std::backtrace::Backtrace::force_capture().to_string())
        } else {
            String::new()
        };
        tracing::error!(
            request_id = %error.request_id,
            stage = answer.log_stage,
            error = %error,
            stack = %stack,
            code = %code,
            status = self.contract.error(code).status,
            pool = error.pool.map(Pool::as_str),
            "request failed"
        );
    }
}
