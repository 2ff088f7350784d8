//! What the server says about itself, which a checker cross-checks against what it observes:
//! `X-Request-Id`, `Server-Timing`, `GET /v1/contract` and `GET /metrics`. [`Claims`] is the
//! seam; [`Truthful`] says what is so.

use std::borrow::Cow;
use std::fmt::Debug;

use axum::http::HeaderValue;
use plimsoll_spec::Contract;

pub trait Claims: Debug + Send + Sync {
    /// The `X-Request-Id` of a response (F4).
    fn request_id(&self, id: HeaderValue) -> Option<HeaderValue>;
    /// The `Server-Timing` of a pipeline response (queue and run durations).
    fn server_timing(&self, value: HeaderValue) -> Option<HeaderValue>;
    /// The body of `GET /v1/contract`.
    fn contract<'c>(&self, effective: &'c Contract) -> Cow<'c, Contract>;
    /// The body of `GET /metrics`: `exposition` is what the server measured, for a server that
    /// serves `effective`.
    fn metrics(&self, exposition: String, effective: &Contract) -> String;
}

/// Every claim as measured or configured.
#[derive(Debug)]
pub struct Truthful;

impl Claims for Truthful {
    fn request_id(&self, id: HeaderValue) -> Option<HeaderValue> {
        Some(id)
    }

    fn server_timing(&self, value: HeaderValue) -> Option<HeaderValue> {
        Some(value)
    }

    fn contract<'c>(&self, effective: &'c Contract) -> Cow<'c, Contract> {
        Cow::Borrowed(effective)
    }

    fn metrics(&self, exposition: String, _effective: &Contract) -> String {
        exposition
    }
}
