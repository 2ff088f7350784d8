//! The one place an [`ApiError`] becomes an HTTP response: status from the contract's
//! `[[errors]]`, an RFC 9457 body with the seed's members, `Retry-After` where the contract says
//! so, and the F3 log line. The HTTP endpoints and the relay bridge both answer through
//! [`Responder`]; what the answer says is the [`ErrorMapper`] seam ([`ContractAnswers`]).
//!
//! A request has one log line at most. The error's F3 fields ([`ErrorLine`]) ride on its response
//! to the API's front (`http::Api`), which writes them together with what the access line
//! would have said; a response that never passes through it is logged by [`log_unrouted`].

use std::cell::RefCell;
use std::fmt::Debug;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use plimsoll_spec::{Contract, ErrorCode, PROBLEM_CONTENT_TYPE, Pool, Problem};

use crate::error::{ApiError, ErrorKind};
use crate::json_text;
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
        let body = render(answer.body);
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

/// A problem body without its request id, as rendered last on this thread.
///
/// A flood of refusals answers one problem over and over but for the request id (the detail
/// changes only with the pool's queue and its `Retry-After`); serializing the rest again was a
/// tenth of a refusal's instructions (callgrind, docs/benchmarks.md). The cache is keyed by the
/// whole problem, compared member by member, so a hit writes exactly the bytes serde_json would.
struct Rendered {
    /// The problem, its `request_id` empty.
    problem: Problem,
    /// Its body up to the request id's value: `{…,"request_id":`. `request_id` is the last
    /// member, so the body ends with the id's string and `}`.
    head: Vec<u8>,
}

thread_local! {
    static LAST_RENDERED: RefCell<Option<Rendered>> = const { RefCell::new(None) };
}

/// The problem's body: serde_json's compact JSON of it.
fn render(mut problem: Problem) -> Vec<u8> {
    let id = std::mem::take(&mut problem.request_id);
    LAST_RENDERED.with_borrow_mut(|last| {
        let rendered = match last.take() {
            Some(hit) if hit.problem == problem => hit,
            _ => match head_of(render_whole(&problem)) {
                Some(head) => Rendered { problem, head },
                None => {
                    problem.request_id = id;
                    return render_whole(&problem);
                }
            },
        };
        // Exact for an id with nothing to escape (its quotes and the `}`): a full `Vec` becomes
        // the response's `Bytes` without another allocation.
        let mut body = Vec::with_capacity(rendered.head.len() + id.len() + 3);
        body.extend_from_slice(&rendered.head);
        json_text::push_str(&mut body, &id);
        body.push(b'}');
        *last = Some(rendered);
        body
    })
}

/// The head of a body rendered with an empty request id: the body without the empty id's `""`
/// and the closing `}`; none should the body not end with the empty id (a member added after it).
fn head_of(mut body: Vec<u8>) -> Option<Vec<u8>> {
    if !body.ends_with(br#","request_id":""}"#) {
        return None;
    }
    body.truncate(body.len() - br#"""}"#.len());
    Some(body)
}

/// The problem's body through serde_json, in one buffer sized for it (a few hundred bytes).
fn render_whole(problem: &Problem) -> Vec<u8> {
    let mut body = Vec::with_capacity(512);
    if let Err(e) = serde_json::to_writer(&mut body, problem) {
        // A `Problem` always serializes; were it ever not to, the client still gets a body.
        body = format!("{{\"error\":\"{e}\"}}").into_bytes();
    }
    body
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

#[cfg(test)]
mod tests {
    use plimsoll_spec::Stage;

    use super::*;

    fn problem(code: ErrorCode, detail: &str, stages: Option<Vec<Stage>>, id: &str) -> Problem {
        Problem {
            type_uri: code.type_uri(),
            title: format!("{code} title"),
            status: 503,
            detail: detail.into(),
            error: detail.into(),
            code,
            failed_stage: stages.as_ref().map(|_| Stage::Fill),
            completed_stages: stages,
            request_id: id.into(),
        }
    }

    /// Hits and misses alike write serde_json's bytes: a run of one problem with ids that do
    /// and do not need escaping, then problems that differ from the cached one in one member.
    #[test]
    fn a_rendered_body_is_serde_jsons() {
        let refusal = |id: &str| problem(ErrorCode::Overloaded, "all 4 busy", None, id);
        let mut bodies = vec![
            refusal("a1"),
            refusal("a2"),
            refusal("quote\"d"),
            refusal(""),
            refusal("a3"),
        ];
        bodies.push(problem(ErrorCode::Overloaded, "all 4 busy; 3 s", None, "b"));
        bodies.push(problem(ErrorCode::Timeout, "all 4 busy; 3 s", None, "b"));
        let done = Some(vec![Stage::Decode]);
        bodies.push(problem(
            ErrorCode::Timeout,
            "all 4 busy; 3 s",
            done.clone(),
            "c",
        ));
        bodies.push(problem(
            ErrorCode::Timeout,
            "all 4 busy; 3 s",
            Some(vec![]),
            "c",
        ));
        bodies.push(problem(
            ErrorCode::Timeout,
            "tab\tand \"quote\"",
            done,
            "c\\d",
        ));
        let mut retitled = refusal("a4");
        retitled.title.push('!');
        bodies.push(retitled);
        bodies.push(refusal("a5"));
        for p in bodies {
            let expected = serde_json::to_vec(&p).unwrap();
            assert_eq!(
                String::from_utf8(render(p.clone())).unwrap(),
                String::from_utf8(expected).unwrap(),
                "for {p:?}"
            );
        }
    }
}
