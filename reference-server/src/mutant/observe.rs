//! Broken observability: no request id, no Server-Timing, plain-text logs.

use std::io::Write;
use std::time::SystemTime;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use tracing::Dispatch;

use crate::claims::Claims;
use crate::logging::{LogFormat, LogWriter, RequestLine, subscriber, write_rfc3339};

/// F4: no `X-Request-Id` (every other claim truthful).
#[derive(Debug)]
pub(super) struct NoRequestId;

impl Claims for NoRequestId {
    fn stamp_request_id(&self, _headers: &mut HeaderMap, _name: &HeaderName, _id: HeaderValue) {}
}

/// F4: the id twice, the second one a proxy's: a client library sees either the first, the
/// last or both joined, so which request a reply answers is ambiguous on the wire.
#[derive(Debug)]
pub(super) struct DuplicateRequestId;

impl Claims for DuplicateRequestId {
    fn stamp_request_id(&self, headers: &mut HeaderMap, name: &HeaderName, id: HeaderValue) {
        headers.insert(name.clone(), id);
        headers.append(name.clone(), HeaderValue::from_static("edge-proxy-0001"));
    }
}

/// F4: the id and a proxy's joined in one line (`id, edge-proxy-0001`), as a proxy that folds
/// field lines writes them: by RFC 9110 that is two values, as ambiguous as two lines.
#[derive(Debug)]
pub(super) struct CommaJoinedRequestId;

impl Claims for CommaJoinedRequestId {
    fn stamp_request_id(&self, headers: &mut HeaderMap, name: &HeaderName, id: HeaderValue) {
        let mut joined = id.as_bytes().to_vec();
        joined.extend_from_slice(b", edge-proxy-0001");
        if let Ok(value) = HeaderValue::from_bytes(&joined) {
            headers.insert(name.clone(), value);
        }
    }
}

/// T1/T2: no `Server-Timing` on any response (every other claim truthful).
#[derive(Debug)]
pub(super) struct NoServerTiming;

impl Claims for NoServerTiming {
    fn server_timing(&self, _value: HeaderValue) -> Option<HeaderValue> {
        None
    }
}

/// F3: log lines as plain text.
#[derive(Debug)]
pub(super) struct PlainText;

impl LogFormat for PlainText {
    fn dispatch(&self, writer: LogWriter) -> Dispatch {
        Dispatch::new(subscriber().with_writer(writer).finish())
    }

    /// `tracing`'s default text: timestamp, level, message, then `name=value` pairs.
    fn request_line(&self, line: &RequestLine<'_>, now: SystemTime, out: &mut Vec<u8>) {
        write_rfc3339(now, out);
        let _ = write!(
            out,
            " {:>5} {} request_id={} status={}",
            line.level(),
            line.message(),
            line.request_id,
            line.status
        );
        if let Some(e) = &line.error {
            let _ = write!(
                out,
                " stage={} error={} stack={} code={}",
                e.stage, e.error, e.stack, e.code
            );
        }
        if let Some(a) = &line.access {
            let _ = write!(
                out,
                " method={} path={} duration_ms={}",
                a.method, a.path, a.duration_ms
            );
        }
        out.push(b'\n');
    }
}
