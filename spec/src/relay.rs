//! The relay bridge's envelope protocol (seed 003): JSON text frames on one WebSocket.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `type` of a request envelope.
pub const RELAY_REQUEST: &str = "relay-http-request";
/// `type` of a response frame.
pub const RELAY_RESPONSE: &str = "relay-http-response";
/// `type` of an error frame (malformed envelope).
pub const RELAY_ERROR: &str = "relay-error";

/// A request to perform against the server's own HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "RelayRequest")]
pub struct RelayRequest {
    /// Always `relay-http-request`.
    #[serde(rename = "type")]
    #[schemars(extend("const" = RELAY_REQUEST))]
    pub kind: String,
    /// Chosen by the sender; every response frame repeats it.
    pub request_id: String,
    /// The HTTP method of the inner request.
    #[schemars(description = "")]
    pub method: String,
    /// Path and query, e.g. `/v1/export?format=svg`.
    pub path: String,
    /// Headers of the inner request (none by default).
    #[serde(default)]
    #[schemars(description = "")]
    pub headers: BTreeMap<String, String>,
    /// UTF-8 request body.
    #[serde(default)]
    pub body: String,
}

/// One frame of a response; a long body is split over several frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "RelayResponse")]
pub struct RelayResponse {
    /// `relay-http-response`, or `relay-error` for a malformed envelope.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [RELAY_RESPONSE, RELAY_ERROR]))]
    pub kind: String,
    /// The request's id (empty when the envelope had none).
    pub request_id: String,
    /// 0, 1, 2, ... per request_id, without gaps.
    pub seq: u64,
    /// The inner response's HTTP status (on every frame of it).
    #[schemars(description = "")]
    pub status: u16,
    /// Present on the first frame only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// This frame's part of the body (UTF-8; binary bodies are base64 with `content-transfer-encoding: base64`).
    pub body_chunk: String,
    /// True on the last frame of the response.
    pub r#final: bool,
    /// For `relay-error` frames: the error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}
