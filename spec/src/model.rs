//! The typed model of `spec/contract.toml`. Field names are the TOML keys; every struct denies
//! unknown fields so a typo in the contract is an error with its line, not a silently ignored
//! value.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ClauseId, ErrorCode, ExportFormat, MetricName, Stage};

/// The whole contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Plimsoll contract")]
pub struct Contract {
    pub contract: Meta,
    /// Documents the clauses cite, by key (`seed-000`, `decision`, ...).
    pub sources: BTreeMap<String, Source>,
    pub clauses: Clauses,
    pub api: Api,
    pub stages: Stages,
    /// Every error code with its HTTP status: the only place a status is written.
    pub errors: Vec<ErrorSpec>,
    pub observability: Observability,
    pub hooks: Hooks,
    pub tolerances: Tolerances,
    /// The load profiles `plimsoll load` runs, sized relative to capacity. Optional: they are
    /// the conformance kit's settings, not the service's, so an implementation's
    /// `/v1/contract` may leave them out (the embedded contract's profiles apply).
    #[serde(default)]
    pub load: Load,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    pub title: String,
    pub version: String,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub title: String,
    /// Path of the document, relative to the folder holding the repository.
    pub file: String,
}

/// What every clause says besides its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Clause<V> {
    pub title: String,
    pub category: Category,
    /// The clause in one sentence, with its numbers.
    pub statement: String,
    /// Why this value.
    pub rationale: String,
    /// How the conformance suite checks it (the docs print the same sentence).
    pub verification: String,
    pub source: SourceRef,
    /// Environment variables that override a field of `value` at deployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
    pub value: V,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Throughput,
    Bounds,
    Failure,
    Relay,
}

impl Category {
    pub fn title(self) -> &'static str {
        match self {
            Category::Throughput => "Throughput",
            Category::Bounds => "Per-request bounds",
            Category::Failure => "Failure semantics",
            Category::Relay => "Relay",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    /// A key of `[sources]`.
    pub doc: String,
    /// Where in that document.
    pub section: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// Environment variable name.
    pub env: String,
    /// The field of the clause's `value` it replaces.
    pub field: String,
}

/// Every clause, by id. Ids are TOML keys, so a duplicate id is a TOML error with its line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Clauses {
    #[serde(rename = "T1")]
    pub t1: Clause<WorkerLimits>,
    #[serde(rename = "T2")]
    pub t2: Clause<QueuePolicy>,
    #[serde(rename = "T3")]
    pub t3: Clause<Backpressure>,
    #[serde(rename = "B1")]
    pub b1: Clause<Timeouts>,
    #[serde(rename = "B2")]
    pub b2: Clause<MemoryCap>,
    #[serde(rename = "B3")]
    pub b3: Clause<Cancellation>,
    #[serde(rename = "F1")]
    pub f1: Clause<StageFailure>,
    #[serde(rename = "F2")]
    pub f2: Clause<InvalidInput>,
    #[serde(rename = "F3")]
    pub f3: Clause<ErrorLogs>,
    #[serde(rename = "F4")]
    pub f4: Clause<RequestId>,
    #[serde(rename = "R1")]
    pub r1: Clause<RelayPool>,
    #[serde(rename = "R2")]
    pub r2: Clause<Empty>,
    #[serde(rename = "R3")]
    pub r3: Clause<RelayMatching>,
    #[serde(rename = "R4")]
    pub r4: Clause<RelayOverflow>,
    #[serde(rename = "R5")]
    pub r5: Clause<FrameAtomicity>,
    #[serde(rename = "R6")]
    pub r6: Clause<Empty>,
}

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Api {
    pub default_port: u16,
    pub digitize: DigitizeEndpoint,
    pub export: ExportEndpoint,
    pub relay: Endpoint,
    pub contract: Endpoint,
    pub metrics: Endpoint,
    pub healthz: Endpoint,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub path: String,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DigitizeEndpoint {
    pub method: String,
    pub path: String,
    pub summary: String,
    pub content_types: Vec<String>,
    pub max_upload_bytes: u64,
    pub max_pixels: u64,
    pub params: DigitizeParams,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DigitizeParams {
    pub width_mm: Param,
    pub density_mm: Param,
    pub colors: Param,
    pub max_stitch_mm: Param,
}

impl DigitizeParams {
    /// The parameters with their query names, in documentation order.
    pub fn iter(&self) -> [(&'static str, &Param); 4] {
        [
            ("width_mm", &self.width_mm),
            ("density_mm", &self.density_mm),
            ("colors", &self.colors),
            ("max_stitch_mm", &self.max_stitch_mm),
        ]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    Number,
    Integer,
}

/// A numeric query parameter with its range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub kind: ParamKind,
    pub min: f64,
    pub max: f64,
    pub default: f64,
    pub unit: String,
    pub description: String,
}

impl Param {
    /// Parses and range-checks a query value; the message says what was expected.
    pub fn parse(&self, name: &str, raw: &str) -> Result<f64, String> {
        let value: f64 = raw
            .trim()
            .parse()
            .map_err(|_| format!("`{name}` must be a number, got `{raw}`"))?;
        if !value.is_finite() {
            return Err(format!("`{name}` must be finite, got `{raw}`"));
        }
        if self.kind == ParamKind::Integer && value.fract() != 0.0 {
            return Err(format!("`{name}` must be an integer, got `{raw}`"));
        }
        if value < self.min || value > self.max {
            return Err(format!(
                "`{name}` must be between {} and {} {}, got {raw}",
                self.min, self.max, self.unit
            ));
        }
        Ok(value)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportEndpoint {
    pub method: String,
    pub path: String,
    pub summary: String,
    pub content_types: Vec<String>,
    pub max_upload_bytes: u64,
    pub formats: Vec<ExportFormat>,
    pub default_format: ExportFormat,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stages {
    pub digitize: Vec<Stage>,
    pub export: Vec<Stage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorSpec {
    pub code: ErrorCode,
    /// The endpoints (`digitize`, `export`) that can answer this code.
    pub applies_to: Vec<String>,
    pub status: u16,
    /// The clause this error belongs to.
    pub clause: ClauseId,
    pub title: String,
    /// Whether the answer carries `Retry-After`.
    #[serde(default)]
    pub retry_after: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Observability {
    pub request_id_header: String,
    pub server_timing_header: String,
    pub server_timing_metrics: Vec<String>,
    pub metrics: Vec<MetricSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    pub name: MetricName,
    #[serde(rename = "type")]
    pub kind: MetricKind,
    pub labels: Vec<String>,
    pub help: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    Gauge,
    Counter,
    Histogram,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hooks {
    /// Hooks are honoured only when this variable is `1`.
    pub env: String,
    pub header: String,
    pub grammar: String,
    pub disabled_code: ErrorCode,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tolerances {
    /// A refusal (503 overloaded) must arrive within this.
    pub refusal_latency_ms: u64,
    /// A 504 may arrive this much after the deadline.
    pub timeout_late_ms: u64,
    /// The checker's p50 queue wait (from its own timings) may differ from the server's by this
    /// much before both are rounded up to whole seconds.
    pub retry_after_jitter_ms: u64,
    /// How often the checker samples `/metrics` while it watches a gauge.
    pub metrics_poll_interval_ms: u64,
    /// Timing checks run this many trials and are judged on the worst.
    pub trials: u32,
}

/// `[load]`: the profiles `plimsoll load` runs. Every rate is relative to capacity (workers /
/// mean service time), so a profile fits any pool size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// The stage the `hold` hook holds open: the request's "work".
    pub hold_stage: Stage,
    /// Closed-loop users (at least; more for large pools).
    pub users: u32,
    /// Half-width of the prediction's acceptance interval, in standard deviations.
    pub sigma: f64,
    /// How often `/metrics` is read while a profile runs.
    pub scrape_interval_ms: u64,
    /// Exponential holds are cut at this many means (keeps every hold far below the timeouts).
    pub max_hold_factor: u32,
    /// Attempts sent before this are left out of the prediction (the system starts empty).
    pub warm_up_ms: u64,
    pub burst: BurstProfile,
    pub steady: SteadyProfile,
    pub overload: OverloadProfile,
    pub soak: SoakProfile,
}

impl Default for Load {
    /// The embedded contract's `[load]` (read on its own, so this never recurses into
    /// [`Contract::embedded`]).
    fn default() -> Load {
        #[derive(Deserialize)]
        struct OnlyLoad {
            load: Load,
        }
        toml::from_str::<OnlyLoad>(crate::EMBEDDED_TOML)
            .expect("the embedded contract has a valid [load] section")
            .load
    }
}

/// Waves of simultaneous requests: admission must be exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BurstProfile {
    pub purpose: String,
    /// Requests per wave = digitize workers x this.
    pub factor: u32,
    pub waves: u32,
    /// Every request holds this long (fixed, so the admitted ones are still running while the
    /// whole wave arrives).
    pub hold_ms: u64,
}

/// Sustained load below capacity: refusals as predicted, no added latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteadyProfile {
    pub purpose: String,
    /// Attempt rate as a multiple of capacity.
    pub load_factor: f64,
    /// Mean of the exponential hold.
    pub mean_hold_ms: u64,
    pub duration_s: u64,
    /// p99 over admitted requests of (response time - the request's own hold).
    pub latency_overhead_p99_ms: u64,
}

/// Far past capacity: no collapse, fast refusals, documented statuses only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverloadProfile {
    pub purpose: String,
    pub load_factor: f64,
    pub mean_hold_ms: u64,
    pub duration_s: u64,
    /// Goodput must reach this fraction of the throughput the admission math allows.
    pub goodput_fraction: f64,
    /// p99 latency of `503 overloaded` answers.
    pub refusal_p99_ms: u64,
}

/// A long run with abandoned requests: resources stay flat, capacity comes back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoakProfile {
    pub purpose: String,
    pub load_factor: f64,
    pub mean_hold_ms: u64,
    pub duration_s: u64,
    /// Share of requests whose client gives up halfway through the hold.
    pub cancel_fraction: f64,
    /// Allowed growth of the server's resident memory between warm-up and the end.
    pub rss_growth_mb: u64,
    /// Allowed growth of its open file descriptors.
    pub fd_growth: u64,
    /// Allowed growth of its per-request temp directories (after the load drains).
    pub temp_files_growth: u64,
}
