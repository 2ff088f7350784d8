//! The error body every failure answers with: RFC 9457 `application/problem+json` carrying the
//! seed's own members (`error`, `failed_stage`, `completed_stages`, `request_id`) as extensions,
//! so clients written against either shape work.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Stage;

/// The media type of every error body.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Every machine-readable error code. The HTTP status of each lives in `spec/contract.toml`
/// (`[[errors]]`) and is looked up through [`crate::Contract::error`]; validation proves the
/// two lists are the same.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum ErrorCode {
    Overloaded,
    Timeout,
    UploadTimeout,
    MemoryCapExceeded,
    StageFailed,
    MalformedImage,
    UnsupportedFormat,
    PayloadTooLarge,
    EmptyBody,
    InvalidParameter,
    MalformedDesign,
    HooksDisabled,
    NotFound,
    UpgradeRequired,
}

impl ErrorCode {
    /// Every code, in the contract's order; validation proves each has one `[[errors]]` entry.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::Overloaded,
        ErrorCode::Timeout,
        ErrorCode::UploadTimeout,
        ErrorCode::MemoryCapExceeded,
        ErrorCode::StageFailed,
        ErrorCode::MalformedImage,
        ErrorCode::UnsupportedFormat,
        ErrorCode::PayloadTooLarge,
        ErrorCode::EmptyBody,
        ErrorCode::InvalidParameter,
        ErrorCode::MalformedDesign,
        ErrorCode::HooksDisabled,
        ErrorCode::NotFound,
        ErrorCode::UpgradeRequired,
    ];

    /// The code as bodies, logs and the contract spell it (`memory_cap_exceeded`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Timeout => "timeout",
            ErrorCode::UploadTimeout => "upload_timeout",
            ErrorCode::MemoryCapExceeded => "memory_cap_exceeded",
            ErrorCode::StageFailed => "stage_failed",
            ErrorCode::MalformedImage => "malformed_image",
            ErrorCode::UnsupportedFormat => "unsupported_format",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::EmptyBody => "empty_body",
            ErrorCode::InvalidParameter => "invalid_parameter",
            ErrorCode::MalformedDesign => "malformed_design",
            ErrorCode::HooksDisabled => "hooks_disabled",
            ErrorCode::NotFound => "not_found",
            ErrorCode::UpgradeRequired => "upgrade_required",
        }
    }

    /// The RFC 9457 `type` URI of this code. Every error answer builds one: concatenated
    /// rather than formatted, as `core::fmt` costs several times the copy.
    pub fn type_uri(self) -> String {
        const PREFIX: &str = "urn:plimsoll:error:";
        let code = self.as_str();
        let mut uri = String::with_capacity(PREFIX.len() + code.len());
        uri.push_str(PREFIX);
        uri.push_str(code);
        uri
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error code `{0}`")]
pub struct UnknownErrorCode(
    /// The text that was parsed, as given.
    pub String,
);

impl std::str::FromStr for ErrorCode {
    type Err = UnknownErrorCode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownErrorCode(s.to_owned()))
    }
}

/// An error body. Unknown members are allowed (the schema does not forbid them) so
/// implementations may add their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(
    title = "Problem",
    description = "RFC 9457 problem details with the Plimsoll members"
)]
pub struct Problem {
    /// RFC 9457: a URI naming the problem type, `urn:plimsoll:error:{code}`.
    #[serde(rename = "type")]
    pub type_uri: String,
    /// RFC 9457: a short summary of the problem type.
    pub title: String,
    /// RFC 9457: the HTTP status code of this response.
    pub status: u16,
    /// RFC 9457: what went wrong with this request.
    pub detail: String,
    /// The seed's human-readable message (same text as `detail`).
    pub error: String,
    /// The machine-readable code.
    pub code: ErrorCode,
    /// The stage that was running when the request failed, timed out or was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_stage: Option<Stage>,
    /// The stages that finished before `failed_stage`, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_stages: Option<Vec<Stage>>,
    /// The request's id, as in the `X-Request-Id` response header.
    pub request_id: String,
}
