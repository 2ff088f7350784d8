//! Broken input checks (F2).

use axum::http::HeaderValue;

use crate::media::MediaTypes;

/// F2: the whole `Content-Type` value is taken for the media type, so `image/png; charset=x`
/// is refused `unsupported_format` (an exact string comparison, the common shortcut).
#[derive(Debug)]
pub(super) struct ParametersKept;

impl MediaTypes for ParametersKept {
    fn media_type(&self, value: &HeaderValue) -> String {
        value
            .to_str()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    }
}
