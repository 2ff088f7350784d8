//! F2's seam for a request's `Content-Type`: which media type it names, compared with the ones
//! its endpoint takes (rule `input-order` (3)).

use std::borrow::Cow;
use std::fmt::Debug;

use axum::http::HeaderValue;

/// Reads the media type a `Content-Type` value names.
pub trait MediaTypes: Debug + Send + Sync {
    /// The media type of `value`, lowercase, as the endpoint's accepted types are written
    /// (borrowed from the value when it is lowercase already, as it nearly always is).
    fn media_type<'v>(&self, value: &'v HeaderValue) -> Cow<'v, str>;
}

/// `text` in lowercase, copied only if it is not already.
pub(crate) fn lowercase(text: &str) -> Cow<'_, str> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    }
}

/// The contract's reading: the type before any parameter (`charset` and the like ignored),
/// case-insensitive.
#[derive(Debug)]
pub(crate) struct ParametersIgnored;

// clause: F2 — a present Content-Type is judged by its media type, parameters ignored
impl MediaTypes for ParametersIgnored {
    fn media_type<'v>(&self, value: &'v HeaderValue) -> Cow<'v, str> {
        let text = value.to_str().unwrap_or_default();
        lowercase(text.split(';').next().unwrap_or_default().trim())
    }
}
