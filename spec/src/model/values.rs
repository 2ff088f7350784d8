//! The value of each clause: what the contract promises, field by field.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ErrorCode;

/// T1: how many jobs each pool runs at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct WorkerLimits {
    /// Digitize jobs that may run at once; one more waits in the queue or is refused.
    #[schemars(description = "")]
    pub digitize_workers: u32,
    /// Export jobs that may run at once.
    #[schemars(description = "")]
    pub export_workers: u32,
}

/// The order in which waiting requests get a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(description = "")]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum QueueOrder {
    Fifo,
}

/// T2: each pool's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct QueuePolicy {
    /// The order waiting requests start in.
    #[schemars(description = "")]
    pub order: QueueOrder,
    /// Digitize requests that may wait for a worker; 0: a request that finds every worker busy
    /// is refused at once.
    #[schemars(description = "")]
    pub digitize_queue_capacity: u32,
    /// Export requests that may wait for a worker.
    #[schemars(description = "")]
    pub export_queue_capacity: u32,
}

/// T3: the delay a refusal carries and how it is estimated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct Backpressure {
    /// The header the delay travels in.
    #[schemars(description = "")]
    pub retry_after_header: String,
    /// RFC 9110 `delay-seconds` (never an HTTP-date).
    pub format: String,
    /// Which statistic of the recent queue waits the delay is (`p50`: the median).
    #[schemars(description = "")]
    pub estimator: String,
    /// How many recent queue-wait samples each pool keeps for the estimate.
    #[schemars(description = "")]
    pub window_samples: u32,
    /// The smallest delay ever sent, in seconds.
    #[schemars(description = "")]
    pub min_seconds: u64,
    /// The delay sent while the pool has no sample yet, in seconds.
    #[schemars(description = "")]
    pub empty_window_seconds: u64,
    /// The largest delay, as prose (the pool's timeout).
    #[schemars(description = "")]
    pub max: String,
}

/// B1: the per-request deadlines, and the reference durations they must leave room for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct Timeouts {
    /// The digitize deadline, counted from admission (queue time counts).
    #[schemars(description = "")]
    pub digitize_timeout_ms: u64,
    /// The export deadline, counted from admission (queue time counts).
    #[schemars(description = "")]
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

/// B2: the per-request memory cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct MemoryCap {
    /// The most memory one request may be charged for; past it the answer is
    /// `memory_cap_exceeded`.
    #[schemars(description = "")]
    pub memory_cap_mb: u64,
    /// Documented peak of the reference workload; the cap must exceed it.
    pub reference_peak_mb: u64,
}

/// B3: how soon the work of a client that went away stops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct Cancellation {
    /// How soon after a disconnect its job must have stopped (or left the queue).
    #[schemars(description = "")]
    pub stop_within_ms: u64,
    /// The longest a job works between two looks at its cancellation; below `stop_within_ms`.
    #[schemars(description = "")]
    pub checkpoint_interval_ms: u64,
}

/// B4: how long a connection may take to send a request, and how many are served at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct ConnectionBounds {
    /// A complete request head must arrive within this time of the connection opening or of
    /// its previous response ending (so it also bounds an idle keep-alive connection).
    pub head_timeout_ms: u64,
    /// Connections served at once; one more is closed at once, unanswered.
    pub max_connections: u32,
}

/// F1: what the answer of a failing stage carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct StageFailure {
    /// The members every stage-failure body has besides RFC 9457's.
    #[schemars(description = "")]
    pub body_members: Vec<String>,
}

/// F2: the codes bad input is answered with (never 500).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct InvalidInput {
    /// One code per failure mode; validation proves each is an F2 entry of `[[errors]]`.
    #[schemars(description = "")]
    pub codes: Vec<ErrorCode>,
}

/// F3: the log line every error writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct ErrorLogs {
    /// The line's encoding (`json`: one object per line).
    #[schemars(description = "")]
    pub format: String,
    /// The members every error line has, `stack` included even when empty.
    #[schemars(description = "")]
    pub fields: Vec<String>,
    /// Whether error lines carry a backtrace in `stack`.
    pub stack: bool,
}

/// F4: the request id every response carries, and which client-supplied ids are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct RequestId {
    /// The header the id travels in, both ways.
    #[schemars(description = "")]
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

/// What the relay does with a request that finds every worker busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(description = "")]
pub enum OverflowPolicy {
    /// Refuse at once (503).
    Reject,
    /// Wait for a worker, never refused.
    Queue,
}

/// R1: the relay's worker pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct RelayPool {
    /// Envelopes handled at once by the whole server (every connection shares the pool).
    #[schemars(description = "")]
    pub relay_concurrency: u32,
    /// What happens to an envelope past that.
    #[schemars(description = "")]
    pub overflow: OverflowPolicy,
}

/// R3: how response frames find their request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct RelayMatching {
    /// The envelope member a response repeats (`request_id`).
    #[schemars(description = "")]
    pub match_by: String,
}

/// R4: how hard the check overflows the relay pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct RelayOverflow {
    /// The check sends this many times the pool size at once.
    pub overflow_factor: u32,
}

/// R5: when a response body is split over several frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "")]
pub struct FrameAtomicity {
    /// Response bodies longer than this are streamed as several frames.
    pub max_frame_body_bytes: u64,
}

/// A clause whose value is behaviour only.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}
