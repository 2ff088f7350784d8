//! The value of each clause: what the contract promises, field by field.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ErrorCode;

/// How the delay is written in the header. Only `delay-seconds`: an HTTP-date depends on the
/// client's clock, and a refusal's delay is a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum RetryAfterFormat {
    #[serde(rename = "delay-seconds")]
    DelaySeconds,
}

impl RetryAfterFormat {
    /// The name the contract spells it by.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryAfterFormat::DelaySeconds => "delay-seconds",
        }
    }

    /// The header value for `seconds`.
    pub fn render(self, seconds: u64) -> String {
        match self {
            RetryAfterFormat::DelaySeconds => seconds.to_string(),
        }
    }

    /// The seconds a header value says, if it is in this format (RFC 9110: `1*DIGIT`, nothing
    /// else; surrounding whitespace is the field's, not the value's).
    pub fn parse(self, value: &str) -> Option<u64> {
        match self {
            RetryAfterFormat::DelaySeconds => {
                let v = value.trim();
                (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| v.parse().ok())
                    .flatten()
            }
        }
    }
}

/// Which order statistic of the window of queue waits a refusal's delay is. The server
/// computes it and the checker recomputes it from its own observations, both through
/// `Estimator::of`, so the rule (nearest rank) is written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum Estimator {
    #[serde(rename = "p50")]
    P50,
}

impl Estimator {
    /// The name the contract spells it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Estimator::P50 => "p50",
        }
    }

    /// The percentile this estimator takes, 1 to 100.
    pub fn percentile(self) -> usize {
        match self {
            Estimator::P50 => 50,
        }
    }

    /// The nearest-rank percentile of `samples` (the smallest sample with at least the
    /// percentile of the samples at or below it); `None` for no sample.
    pub fn of(
        self,
        samples: impl IntoIterator<Item = std::time::Duration>,
    ) -> Option<std::time::Duration> {
        let mut sorted: Vec<_> = samples.into_iter().collect();
        sorted.sort_unstable();
        let rank = (sorted.len() * self.percentile()).div_ceil(100);
        sorted.get(rank.checked_sub(1)?).copied()
    }
}

/// The largest delay a refusal may carry: the pool's own deadline (B1), since waiting longer
/// than a request may take serves no one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum RetryAfterMax {
    #[serde(rename = "pool timeout")]
    PoolTimeout,
}

impl RetryAfterMax {
    /// The bound in whole seconds for a pool of `limits`, at least `min_seconds`.
    pub fn seconds(self, limits: &crate::PoolLimits<'_>, min_seconds: u64) -> u64 {
        match self {
            RetryAfterMax::PoolTimeout => limits
                .deadline
                .unwrap_or_default()
                .as_secs()
                .max(min_seconds),
        }
    }
}

/// B1: what the deadlines (each pool's `deadline_ms`) must leave room for.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// Each pool's deadline must be at least this many times its reference duration
    /// (`reference_ms`).
    pub headroom_factor: u64,
}

/// B2: what the memory caps (each pool's `memory_cap_mb`) must leave room for.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryCap {
    /// Documented peak of the reference workload; every cap must exceed it.
    pub reference_peak_mb: u64,
}

/// F1: what the answer of a failing stage carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageFailure {
    /// The members every stage-failure body has besides RFC 9457's.
    pub body_members: Vec<String>,
}

/// F2: the codes bad input is answered with (never 500).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvalidInput {
    /// One code per failure mode; validation proves each is an F2 entry of `[[errors]]`.
    pub codes: Vec<ErrorCode>,
}

/// F3: the log line every error writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorLogs {
    /// The line's encoding (`json`: one object per line).
    pub format: LogLineFormat,
    /// The members every error line has, `stack` included even when empty.
    pub fields: Vec<String>,
    /// Whether error lines carry a backtrace in `stack`.
    pub stack: bool,
}

/// How an error log line is written. Only `json`, one object per line: a log pipeline reads
/// each line without knowing the next, and a field is found by name, not by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum LogLineFormat {
    #[serde(rename = "json")]
    Json,
}

impl LogLineFormat {
    /// A line's members, if it is a line of this format.
    pub fn parse(self, line: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
        match self {
            LogLineFormat::Json => match serde_json::from_str(line) {
                Ok(serde_json::Value::Object(members)) => Some(members),
                _ => None,
            },
        }
    }
}

/// F4: the request id every response carries, and which client-supplied ids are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestId {
    /// The header the id travels in, both ways.
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

/// R3: how response frames find their request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayMatching {
    /// The envelope member a response repeats (`request_id`).
    pub match_by: String,
}

/// R4: how hard the check overflows the relay pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayOverflow {
    /// The check sends this many times the pool size at once.
    pub overflow_factor: u32,
}

/// R5: when a response body is split over several frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrameAtomicity {
    /// Response bodies longer than this are streamed as several frames.
    pub max_frame_body_bytes: u64,
}

/// R6: how a bridge that dials its relay gets back after the relay drops it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelayReconnect {
    /// After the relay drops the socket (and accepts again at once), the bridge is connected
    /// again within this.
    pub reconnect_within_ms: u64,
    /// The bridge's first retry waits this long after a drop or a failed dial.
    pub backoff_initial_ms: u64,
    /// Each failed dial doubles the wait, up to this.
    pub backoff_max_ms: u64,
    /// Told to stop (SIGTERM) with workers in flight, the bridge exits within this, without
    /// waiting for them.
    pub stop_within_ms: u64,
}

/// A clause whose value is behaviour only.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

impl std::fmt::Display for RetryAfterFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Estimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_names_are_the_serde_names() {
        for (value, name) in [
            (
                serde_json::to_value(RetryAfterFormat::DelaySeconds),
                "delay-seconds",
            ),
            (serde_json::to_value(Estimator::P50), "p50"),
        ] {
            assert_eq!(value.unwrap(), name);
        }
        assert_eq!(RetryAfterFormat::DelaySeconds.to_string(), "delay-seconds");
        assert_eq!(Estimator::P50.to_string(), "p50");
    }

    #[test]
    fn delay_seconds_are_digits_only() {
        let f = RetryAfterFormat::DelaySeconds;
        assert_eq!(f.parse(&f.render(7)), Some(7));
        assert_eq!(f.parse(" 3 "), Some(3));
        for bad in [
            "",
            "-1",
            "+1",
            "1.5",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "99999999999999999999999",
        ] {
            assert_eq!(f.parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn p50_is_the_nearest_rank_median() {
        let ms = Duration::from_millis;
        let p50 = |v: &[u64]| Estimator::P50.of(v.iter().map(|&x| ms(x)));
        assert_eq!(p50(&[10, 2500, 100, 2600, 9000]), Some(ms(2500)));
        assert_eq!(p50(&[1, 2, 3, 4]), Some(ms(2)));
        assert_eq!(p50(&[7]), Some(ms(7)));
        assert_eq!(p50(&[]), None);
    }
}
