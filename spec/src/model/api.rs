//! The API the clauses apply to, the error table, what every implementation exposes, the test
//! hooks and the measurement tolerances.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ClauseId, ErrorCode, ExportFormat, MetricName};

/// `[api]`: the routes the clauses apply to, with the input limits of the two pipelines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Api {
    /// The port `plimsoll serve` listens on without `--port`; also the OpenAPI server URL's.
    pub default_port: u16,
    /// The image-to-design pipeline.
    pub digitize: DigitizeEndpoint,
    /// The design-to-machine-file pipeline.
    pub export: ExportEndpoint,
    /// The relay bridge's WebSocket (R1-R6).
    pub relay: Endpoint,
    /// Serves the effective contract, the one the checker reconciles its expectations with.
    pub contract: Endpoint,
    /// Serves the Prometheus metrics of `[observability]`.
    pub metrics: Endpoint,
    /// Answers 200 while the server is up (liveness only: no pool is involved).
    pub healthz: Endpoint,
}

/// A `GET` route with no body: where it is and the line the docs and OpenAPI give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// The route, e.g. `/v1/relay`; the server mounts it and the checker asks it.
    pub path: String,
    /// One line for the docs' endpoint table and the OpenAPI operation.
    pub summary: String,
}

/// The digitize route and what it accepts (the image is the raw body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DigitizeEndpoint {
    /// The HTTP method of the route.
    pub method: String,
    /// The route.
    pub path: String,
    /// One line for the docs' endpoint table and the OpenAPI operation.
    pub summary: String,
    /// The image media types the body may be; each gets an example upload in OpenAPI.
    pub content_types: Vec<String>,
    /// Largest body accepted; a larger one is `payload_too_large`.
    pub max_upload_bytes: u64,
    /// Largest image (width × height) accepted; a larger one is `payload_too_large`.
    pub max_pixels: u64,
    /// The query parameters, each with its range and default.
    pub params: DigitizeParams,
}

/// The digitize query parameters; [`DigitizeParams::iter`] names them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DigitizeParams {
    /// The design's physical width; its height follows the image's aspect ratio.
    pub width_mm: Param,
    /// The spacing of the fill rows.
    pub density_mm: Param,
    /// How many thread colours the image is quantized to.
    pub colors: Param,
    /// The longest stitch of the fill.
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

/// Whether a parameter takes any number or integers only (`3.0` counts as the integer 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum ParamKind {
    Number,
    Integer,
}

/// A numeric query parameter with its range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// Whether a fractional value is refused.
    pub kind: ParamKind,
    /// Smallest value accepted (inclusive).
    pub min: f64,
    /// Largest value accepted (inclusive).
    pub max: f64,
    /// The value a request that leaves the parameter out gets.
    pub default: f64,
    /// What the value counts (`mm`, `threads`), as the docs and refusals print it.
    pub unit: String,
    /// What the parameter does, for the docs and OpenAPI.
    pub description: String,
}

impl Param {
    /// Parses and range-checks a query value; the message says what was expected.
    pub fn parse(&self, name: &str, raw: &str) -> Result<f64, ParamError> {
        let (name, raw) = (name.to_owned(), raw.to_owned());
        let Ok(value) = raw.trim().parse::<f64>() else {
            return Err(ParamError::NotANumber { name, raw });
        };
        if !value.is_finite() {
            return Err(ParamError::NotFinite { name, raw });
        }
        if self.kind == ParamKind::Integer && value.fract() != 0.0 {
            return Err(ParamError::NotAnInteger { name, raw });
        }
        if value < self.min || value > self.max {
            return Err(ParamError::OutOfRange {
                name,
                raw,
                min: self.min,
                max: self.max,
                unit: self.unit.clone(),
            });
        }
        Ok(value)
    }
}

/// A query value [`Param::parse`] refused; the message says what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// Not a number at all.
    #[error("`{name}` must be a number, got `{raw}`")]
    NotANumber {
        /// The parameter.
        name: String,
        /// Its value as the query gave it.
        raw: String,
    },
    /// A number, but infinite or NaN.
    #[error("`{name}` must be finite, got `{raw}`")]
    NotFinite {
        /// The parameter.
        name: String,
        /// Its value as the query gave it.
        raw: String,
    },
    /// A fraction where the parameter counts whole things.
    #[error("`{name}` must be an integer, got `{raw}`")]
    NotAnInteger {
        /// The parameter.
        name: String,
        /// Its value as the query gave it.
        raw: String,
    },
    /// Outside the parameter's range.
    #[error("`{name}` must be between {min} and {max} {unit}, got {raw}")]
    OutOfRange {
        /// The parameter.
        name: String,
        /// Its value as the query gave it.
        raw: String,
        /// The smallest value accepted.
        min: f64,
        /// The largest value accepted.
        max: f64,
        /// What the value counts.
        unit: String,
    },
}

/// The export route and what it accepts (the design JSON is the body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportEndpoint {
    /// The HTTP method of the route.
    pub method: String,
    /// The route.
    pub path: String,
    /// One line for the docs' endpoint table and the OpenAPI operation.
    pub summary: String,
    /// The media types the design body may be sent as.
    pub content_types: Vec<String>,
    /// Largest body accepted; a larger one is `payload_too_large`.
    pub max_upload_bytes: u64,
    /// The formats the `format` query parameter may name.
    pub formats: Vec<ExportFormat>,
    /// The format of a request that names none; validation proves it is one of `formats`.
    pub default_format: ExportFormat,
}

/// One entry of `[[errors]]`: an error code with its HTTP status and where it may be answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorSpec {
    /// The code; validation proves every code has exactly one entry.
    pub code: ErrorCode,
    /// The endpoints (`digitize`, `export`, `relay`) that can answer this code; none for
    /// `not_found`, which answers a path no endpoint has.
    pub applies_to: Vec<String>,
    /// The HTTP status the code is answered with (400-599).
    pub status: u16,
    /// The clause this error belongs to.
    pub clause: ClauseId,
    /// The RFC 9457 `title` of the code's problem bodies.
    pub title: String,
    /// Whether the answer carries `Retry-After`.
    #[serde(default)]
    pub retry_after: bool,
}

/// `[observability]`: what every implementation exposes, so a black-box check can see inside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Observability {
    /// The header every response carries the request id in (F4).
    pub request_id_header: String,
    /// The header pipeline responses carry their phase durations in.
    pub server_timing_header: String,
    /// The Server-Timing entries, in order, each with `dur` in milliseconds.
    pub server_timing_metrics: Vec<String>,
    /// What `/metrics` serves; validation proves every [`MetricName`] is listed exactly once.
    pub metrics: Vec<MetricSpec>,
}

/// One metric of `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// The metric; [`MetricName::as_str`] is its exposition name.
    pub name: MetricName,
    /// Its Prometheus type (`type` in the contract).
    #[serde(rename = "type")]
    pub kind: MetricKind,
    /// The label names every series of it carries (none: one series).
    pub labels: Vec<String>,
    /// The `# HELP` text (the server drops a final full stop).
    pub help: String,
}

/// A Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum MetricKind {
    Gauge,
    Counter,
    Histogram,
}

/// `[hooks]`: the test-hook header and the gate that turns it on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hooks {
    /// Hooks are honoured only when this variable is `1`.
    pub env: String,
    /// The request header the directives travel in.
    pub header: String,
    /// The directives' grammar as the docs and OpenAPI print it ([`crate::parse_hooks`] parses
    /// it).
    pub grammar: String,
    /// The code a request carrying the header is refused with while hooks are off.
    pub disabled_code: ErrorCode,
}

/// `[tolerances]`: the slack the checker's timing judgements allow.
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
    /// How long after the checker sends a request it may reach the service, where a rate
    /// limit's outcome depends on the instant (T4): a request within this of a token's refill
    /// may go either way. The least such window: one whose answer came back later is granted
    /// up to its answer, within the refusal tolerance (a loaded machine delays both).
    #[serde(default = "rate_limit_slack_ms")]
    pub rate_limit_slack_ms: u64,
}

/// The slack of a rate limit's judgement unless the contract says otherwise: a loopback
/// request reaches the service within milliseconds.
fn rate_limit_slack_ms() -> u64 {
    20
}

#[cfg(test)]
mod tests {
    use crate::Contract;

    #[test]
    fn a_refused_value_says_what_was_expected() {
        let p = &Contract::embedded().api().digitize.params;
        let err = |param: &super::Param, name: &str, raw: &str| {
            param.parse(name, raw).unwrap_err().to_string()
        };
        assert_eq!(
            err(&p.density_mm, "density_mm", "x"),
            "`density_mm` must be a number, got `x`"
        );
        assert_eq!(
            err(&p.density_mm, "density_mm", "inf"),
            "`density_mm` must be finite, got `inf`"
        );
        assert_eq!(
            err(&p.colors, "colors", "2.5"),
            "`colors` must be an integer, got `2.5`"
        );
        assert_eq!(
            err(&p.density_mm, "density_mm", "5"),
            "`density_mm` must be between 0.2 and 2 mm, got 5"
        );
        assert_eq!(p.density_mm.parse("density_mm", " 0.5 "), Ok(0.5));
    }
}
