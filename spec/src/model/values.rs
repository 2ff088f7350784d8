//! The value of each clause: what the contract promises, field by field.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ErrorCode;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerLimits {
    pub digitize_workers: u32,
    pub export_workers: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueOrder {
    Fifo,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueuePolicy {
    pub order: QueueOrder,
    pub digitize_queue_capacity: u32,
    pub export_queue_capacity: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Backpressure {
    pub retry_after_header: String,
    /// RFC 9110 `delay-seconds` (never an HTTP-date).
    pub format: String,
    pub estimator: String,
    pub window_samples: u32,
    pub min_seconds: u64,
    pub empty_window_seconds: u64,
    pub max: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    pub digitize_timeout_ms: u64,
    pub export_timeout_ms: u64,
    /// Bodies are read before admission; one slower than this is answered 408 `upload_timeout`.
    pub upload_read_timeout_ms: u64,
    /// Documented duration of the reference digitize workload (4 MP at 0.4 mm).
    pub reference_digitize_ms: u64,
    /// Documented duration of the reference export workload.
    pub reference_export_ms: u64,
    /// Each timeout must be at least this many times its reference duration.
    pub headroom_factor: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryCap {
    pub memory_cap_mb: u64,
    /// Documented peak of the reference workload; the cap must exceed it.
    pub reference_peak_mb: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cancellation {
    pub stop_within_ms: u64,
    pub checkpoint_interval_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionBounds {
    /// A complete request head must arrive within this time of the connection opening or of
    /// its previous response ending (so it also bounds an idle keep-alive connection).
    pub head_timeout_ms: u64,
    /// Connections served at once; one more is closed at once, unanswered.
    pub max_connections: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageFailure {
    pub body_members: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvalidInput {
    pub codes: Vec<ErrorCode>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorLogs {
    pub format: String,
    pub fields: Vec<String>,
    /// Whether error lines carry a backtrace in `stack`.
    pub stack: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestId {
    pub header: String,
    /// A client-supplied id longer than this is replaced.
    pub client_id_max_len: usize,
    /// Characters allowed in a client-supplied id besides ASCII letters and digits.
    pub client_id_extra_chars: String,
}

impl RequestId {
    /// Whether a client-supplied id is kept (F4).
    pub fn accepts(&self, id: &str) -> bool {
        !id.is_empty()
            && id.len() <= self.client_id_max_len
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || self.client_id_extra_chars.contains(c))
    }

    /// The same rule as a regular expression, for documentation.
    pub fn pattern(&self) -> String {
        let extra: String = self
            .client_id_extra_chars
            .chars()
            .map(|c| {
                if c == '-' || c == ']' || c == '\\' {
                    format!("\\{c}")
                } else {
                    c.to_string()
                }
            })
            .collect();
        format!("^[A-Za-z0-9{extra}]{{1,{}}}$", self.client_id_max_len)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OverflowPolicy {
    /// Refuse at once (503).
    Reject,
    /// Wait for a worker, never refused.
    Queue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayPool {
    pub relay_concurrency: u32,
    pub overflow: OverflowPolicy,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayMatching {
    pub match_by: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayOverflow {
    /// The check sends this many times the pool size at once.
    pub overflow_factor: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrameAtomicity {
    /// Response bodies longer than this are streamed as several frames.
    pub max_frame_body_bytes: u64,
}

/// A clause whose value is behaviour only.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}
