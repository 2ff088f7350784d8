//! The names of the Prometheus surface every implementation exposes. Like [`crate::Stage`] and
//! [`crate::ErrorCode`], they are enums shared by the contract, the server and the checker, so
//! no crate spells a metric name, a pool label or an outcome label as a string of its own.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A metric of `[[observability.metrics]]`, serialized as its exposition name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum MetricName {
    #[serde(rename = "plimsoll_workers_busy")]
    WorkersBusy,
    #[serde(rename = "plimsoll_workers_limit")]
    WorkersLimit,
    #[serde(rename = "plimsoll_queue_depth")]
    QueueDepth,
    #[serde(rename = "plimsoll_queue_wait_seconds")]
    QueueWaitSeconds,
    #[serde(rename = "plimsoll_requests_total")]
    RequestsTotal,
    #[serde(rename = "plimsoll_cancellations_total")]
    CancellationsTotal,
    #[serde(rename = "plimsoll_temp_files")]
    TempFiles,
}

impl MetricName {
    /// Every metric, in the contract's order; validation proves each is listed exactly once.
    pub const ALL: [MetricName; 7] = [
        MetricName::WorkersBusy,
        MetricName::WorkersLimit,
        MetricName::QueueDepth,
        MetricName::QueueWaitSeconds,
        MetricName::RequestsTotal,
        MetricName::CancellationsTotal,
        MetricName::TempFiles,
    ];

    /// The name in the Prometheus text exposition (counters end in `_total`).
    pub fn as_str(self) -> &'static str {
        match self {
            MetricName::WorkersBusy => "plimsoll_workers_busy",
            MetricName::WorkersLimit => "plimsoll_workers_limit",
            MetricName::QueueDepth => "plimsoll_queue_depth",
            MetricName::QueueWaitSeconds => "plimsoll_queue_wait_seconds",
            MetricName::RequestsTotal => "plimsoll_requests_total",
            MetricName::CancellationsTotal => "plimsoll_cancellations_total",
            MetricName::TempFiles => "plimsoll_temp_files",
        }
    }

    /// The name a client library registers: counters without `_total` (the exposition adds it).
    pub fn registered_name(self) -> &'static str {
        let name = self.as_str();
        name.strip_suffix("_total").unwrap_or(name)
    }
}

impl fmt::Display for MetricName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `pool` label: one value per worker pool.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    /// The digitize endpoint's workers and queue (T1, T2).
    Digitize,
    /// The export endpoint's workers and queue (T1, T2).
    Export,
    /// The relay bridge's worker pool (R1).
    Relay,
}

impl Pool {
    /// Every pool, in label order; each has its own series of every per-pool metric.
    pub const ALL: [Pool; 3] = [Pool::Digitize, Pool::Export, Pool::Relay];

    /// The label value (`pool="digitize"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Pool::Digitize => "digitize",
            Pool::Export => "export",
            Pool::Relay => "relay",
        }
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `outcome` label of `plimsoll_requests_total`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The work was done and its answer sent.
    Ok,
    /// Refused at admission (T3).
    Overloaded,
    /// Stopped by its deadline (B1).
    Timeout,
    /// Stopped by its memory cap (B2).
    MemoryCapExceeded,
    /// A stage failed or panicked (F1).
    StageFailed,
    /// Answered with any other error code: bad input (F2), a body too slow to arrive (B1).
    Invalid,
    /// Stopped because its client went away (B3).
    Cancelled,
}

impl Outcome {
    /// Every outcome; a finished request counts under exactly one.
    pub const ALL: [Outcome; 7] = [
        Outcome::Ok,
        Outcome::Overloaded,
        Outcome::Timeout,
        Outcome::MemoryCapExceeded,
        Outcome::StageFailed,
        Outcome::Invalid,
        Outcome::Cancelled,
    ];

    /// The label value (`outcome="ok"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Overloaded => "overloaded",
            Outcome::Timeout => "timeout",
            Outcome::MemoryCapExceeded => "memory_cap_exceeded",
            Outcome::StageFailed => "stage_failed",
            Outcome::Invalid => "invalid",
            Outcome::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
