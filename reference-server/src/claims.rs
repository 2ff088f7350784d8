//! What the server says about itself, which a checker cross-checks against what it observes:
//! `X-Request-Id`, `Server-Timing`, `GET /v1/contract` and `GET /metrics`. [`Claims`] is the
//! seam; [`Truthful`] says what is so.

use std::borrow::Cow;
use std::fmt::Debug;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use plimsoll_spec::Contract;

/// What the server says about itself. Every method's default is the truth, so a broken
/// variant overrides exactly the claim it lies in.
pub trait Claims: Debug + Send + Sync {
    /// Puts the request id on a response as `name` (F4): once, as it is.
    fn stamp_request_id(&self, headers: &mut HeaderMap, name: &HeaderName, id: HeaderValue) {
        headers.insert(name.clone(), id);
    }
    /// The `Server-Timing` of a pipeline response (queue and run durations).
    fn server_timing(&self, value: HeaderValue) -> Option<HeaderValue> {
        Some(value)
    }
    /// The body of `GET /v1/contract`.
    fn contract<'c>(&self, effective: &'c Contract) -> Cow<'c, Contract> {
        Cow::Borrowed(effective)
    }
    /// The body of `GET /metrics`: `exposition` is what the server measured, for a server that
    /// serves `effective`.
    fn metrics(&self, exposition: String, _effective: &Contract) -> String {
        exposition
    }
}

/// Every claim as measured or configured.
#[derive(Debug)]
pub(crate) struct Truthful;

impl Claims for Truthful {}
