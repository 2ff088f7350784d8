//! Broken observability: no request id, no Server-Timing, plain-text logs.

use std::borrow::Cow;

use axum::http::HeaderValue;
use plimsoll_spec::Contract;
use tracing::Dispatch;

use crate::claims::{Claims, Truthful};
use crate::logging::{LogFormat, LogSink, subscriber, writer};

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
    fn dispatch(&self, sink: &LogSink) -> std::io::Result<Dispatch> {
        Ok(Dispatch::new(
            subscriber().with_writer(writer(sink)?).finish(),
        ))
    }
}
