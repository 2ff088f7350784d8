//! F2's seam for a request's `Content-Type`: which media type it names, compared with the ones
//! its endpoint takes (rule `input-order` (3)).

use std::fmt::Debug;

use axum::http::HeaderValue;

/// Reads the media type a `Content-Type` value names.
pub trait MediaTypes: Debug + Send + Sync {
    /// The media type of `value`, lowercase, as the endpoint's accepted types are written.
    fn media_type(&self, value: &HeaderValue) -> String;
}

/// The contract's reading: the type before any parameter (`charset` and the like ignored),
/// case-insensitive.
#[derive(Debug)]
pub(crate) struct ParametersIgnored;

// clause: F2 — a present Content-Type is judged by its media type, parameters ignored
impl MediaTypes for ParametersIgnored {
    fn media_type(&self, value: &HeaderValue) -> String {
        value
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    }
}
