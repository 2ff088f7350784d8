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
/// The header that says an envelope's or a response's body travels as base64 (its only value,
/// [`BASE64`], in any letter case); absent: the body is UTF-8 text. Never part of the inner
/// request or response: it describes the envelope.
pub const TRANSFER_ENCODING: &str = "content-transfer-encoding";
/// [`TRANSFER_ENCODING`]'s one value.
pub const BASE64: &str = "base64";

/// A request to perform against the server's own HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "RelayRequest")]
pub struct RelayRequest {
    /// Always `relay-http-request`.
    #[serde(rename = "type")]
    #[schemars(extend("const" = RELAY_REQUEST))]
    pub kind: String,
    /// Chosen by the sender, not empty; every frame of the answer repeats it.
    pub request_id: String,
    /// The HTTP method of the inner request.
    #[schemars(description = "")]
    pub method: String,
    /// Path and query in origin form, e.g. `/v1/export?format=svg` (rule `relay-error` says which are refused).
    pub path: String,
    /// Headers of the inner request; names match in any letter case, as in HTTP. Left out: none.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The inner request's body: its UTF-8 text, or its bytes in standard base64 (RFC 4648; padding optional, ASCII white space ignored) when `headers` carry `content-transfer-encoding: base64` (name and value in any letter case). Left out: empty.
    #[serde(default)]
    pub body: String,
}

/// One frame of a response; a long body is split over several frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "RelayResponse")]
pub struct RelayResponse {
    /// `relay-http-response`: a frame of the inner response. `relay-error`: the one frame answering a message that is no envelope, or the frame ending a response whose body failed.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [RELAY_RESPONSE, RELAY_ERROR]))]
    pub kind: String,
    /// The envelope's `request_id`; for a `relay-error`, the message's when it had a string one, else empty.
    pub request_id: String,
    /// 0, 1, 2, ... per request_id, without gaps.
    pub seq: u64,
    /// The inner response's HTTP status (on every frame of it).
    #[schemars(description = "")]
    pub status: u16,
    /// On the first `relay-http-response` frame only (later frames and `relay-error` frames carry none): the inner response's headers, names in lowercase, a repeated header's values joined with `, `, plus `content-transfer-encoding: base64` when the body travels as base64.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// This frame's part of the body, at most R5's `max_frame_body_bytes` bytes of this string as sent (UTF-8, before JSON escaping): text cut on character boundaries, or, when the first frame says `content-transfer-encoding: base64`, base64 of the next bytes (every chunk but the last encodes a multiple of 3 bytes, so the chunks concatenate to the body's base64). A body that is not UTF-8 travels as base64, a UTF-8 one either way. For a `relay-error`: what is wrong.
    pub body_chunk: String,
    /// True on the last frame of the response.
    pub r#final: bool,
    /// On `relay-error` frames only: a contract error code, `status` being its status. Left out on `relay-http-response` frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}
