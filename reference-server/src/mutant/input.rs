//! Broken input checks (F2).

use std::borrow::Cow;

use axum::http::HeaderValue;

use crate::media::{MediaTypes, lowercase};

/// F2: the whole `Content-Type` value is taken for the media type, so `image/png; charset=x`
/// is refused `unsupported_format` (an exact string comparison, the common shortcut).
#[derive(Debug)]
pub(super) struct ParametersKept;

impl MediaTypes for ParametersKept {
    fn media_type<'v>(&self, value: &'v HeaderValue) -> Cow<'v, str> {
        lowercase(value.to_str().unwrap_or_default().trim())
    }
}
