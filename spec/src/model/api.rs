//! The API the clauses apply to, the error table, what every implementation exposes, the test
//! hooks and the measurement tolerances.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ClauseId, ErrorCode, ExportFormat, MetricName, Stage};

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
