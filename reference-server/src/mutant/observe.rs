//! Broken observability: no request id, no Server-Timing, plain-text logs.

use std::borrow::Cow;
use std::io::Write;
use std::time::SystemTime;

use axum::http::HeaderValue;
use plimsoll_spec::Contract;
use tracing::Dispatch;

use crate::claims::{Claims, Truthful};
use crate::logging::{LogFormat, LogWriter, RequestLine, subscriber, write_rfc3339};

/// F4: no `X-Request-Id` (every other claim truthful).
#[derive(Debug)]
pub struct NoRequestId;

impl Claims for NoRequestId {
    fn request_id(&self, _id: HeaderValue) -> Option<HeaderValue> {
        None
    }

    fn server_timing(&self, value: HeaderValue) -> Option<HeaderValue> {
        Truthful.server_timing(value)
    }

    fn contract<'c>(&self, effective: &'c Contract) -> Cow<'c, Contract> {
        Truthful.contract(effective)
    }

    fn metrics(&self, exposition: String, effective: &Contract) -> String {
        Truthful.metrics(exposition, effective)
    }
}

/// T1/T2: no `Server-Timing` on any response (every other claim truthful).
#[derive(Debug)]
pub struct NoServerTiming;

impl Claims for NoServerTiming {
    fn request_id(&self, id: HeaderValue) -> Option<HeaderValue> {
        Truthful.request_id(id)
    }

    fn server_timing(&self, _value: HeaderValue) -> Option<HeaderValue> {
        None
    }

    fn contract<'c>(&self, effective: &'c Contract) -> Cow<'c, Contract> {
        Truthful.contract(effective)
    }

    fn metrics(&self, exposition: String, effective: &Contract) -> String {
        Truthful.metrics(exposition, effective)
    }
}

/// F3: log lines as plain text.
#[derive(Debug)]
pub struct PlainText;

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
