//! The one place an [`ApiError`] becomes an HTTP response: status from the contract's
//! `[[errors]]`, an RFC 9457 body with the seed's members, `Retry-After` where the contract says
//! so, and the F3 log line. The HTTP endpoints and the relay bridge both answer through
//! [`Responder`]; what the answer says is the [`ErrorMapper`] seam ([`ContractAnswers`]).
//!
//! A request has one log line at most. The error's F3 fields ([`ErrorLine`]) ride on its response
//! to the API's front (`http::Api`), which writes them together with what the access line
//! would have said; a response that never passes through it is logged by [`log_unrouted`].

use std::fmt::Debug;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use plimsoll_spec::{Contract, ErrorCode, PROBLEM_CONTENT_TYPE, Pool, Problem};

use crate::error::{ApiError, ErrorKind};
use crate::logging::{ErrorFields, RequestLine, RequestLog};
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
pub(crate) struct ContractAnswers;

impl ErrorMapper for ContractAnswers {
    fn answer(&self, error: &ApiError, contract: &Contract) -> Answer {
        let code = error.code();
        let spec = contract.error(code);
        let detail = error.kind.message().into_owned();
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
                let value = contract.retry_after().format.render(*retry_after_s);
                HeaderValue::try_from(value).ok()
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
    /// The response to `error`, carrying its F3 line ([`ErrorLine`]) for the request's one log
    /// line; also counts its outcome.
    pub fn respond(&self, error: ApiError) -> Response {
        let answer = self.mapper.answer(&error, self.contract);
        let line = self.error_line(&error, &answer);
        if let Some(pool) = error.pool {
            self.metrics.outcome(pool, error.outcome());
        }
        // A problem body is a few hundred bytes: one buffer of that size, no regrowth.
        let mut body = Vec::with_capacity(512);
        if let Err(e) = serde_json::to_writer(&mut body, &answer.body) {
            // A `Problem` always serializes; were it ever not to, the client still gets a body.
            body = format!("{{\"error\":\"{e}\"}}").into_bytes();
        }
        let mut response = (answer.status, Body::from(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
        );
        if let Some(value) = answer.retry_after {
            headers.insert(self.retry_after_header.clone(), value);
        }
        response.extensions_mut().insert(line);
        response
    }

    /// What the error's log line says besides the request's access fields.
    fn error_line(&self, error: &ApiError, answer: &Answer) -> ErrorLine {
        let stack = if self.contract.clauses().f3.value.stack {
            error
                .backtrace()
                .map(str::to_owned)
                .unwrap_or_else(|| std::backtrace::Backtrace::force_capture().to_string())
        } else {
            String::new()
        };
        ErrorLine {
            request_id: error.request_id.clone(),
            stage: answer.log_stage,
            error: error.kind.message().into_owned(),
            stack,
            code: error.code(),
            pool: error.pool,
        }
    }
}

/// The F3 fields of an error, carried on its response (an extension) to whoever writes the
/// request's one log line.
#[derive(Debug, Clone)]
pub(crate) struct ErrorLine {
    pub request_id: String,
    /// The failed stage, `admission` or `request`.
    pub stage: &'static str,
    pub error: String,
    /// A backtrace when the contract's `stack` is on (LOG_STACK=1), empty otherwise.
    pub stack: String,
    pub code: ErrorCode,
    pub pool: Option<Pool>,
}

impl ErrorLine {
    /// The fields of the request's one line (F3).
    pub(crate) fn fields(&self) -> ErrorFields<'_> {
        ErrorFields {
            stage: self.stage,
            error: &self.error,
            stack: &self.stack,
            code: self.code.as_str(),
            pool: self.pool.map(Pool::as_str),
        }
    }
}

/// Writes the error line of a response that never passes through the API (a relay
/// envelope answered before it reached the router).
pub(crate) fn log_unrouted(log: &RequestLog, response: &mut Response) {
    if let Some(line) = response.extensions_mut().remove::<ErrorLine>() {
        log.write(&RequestLine {
            request_id: &line.request_id,
            status: response.status().as_u16(),
            error: Some(line.fields()),
            access: None,
        });
    }
}
