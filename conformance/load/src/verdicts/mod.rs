//! From what a profile observed to [`CheckResult`]s, so load verdicts render in the same
//! table, JSON, JUnit and HTML as `plimsoll check`. Pure functions of the recorded data, one
//! module per family: [`ending`] (every profile), [`burst`], [`rate`] (steady and overload)
//! and [`soak`].

pub mod burst;
pub mod ending;
pub mod rate;
pub mod soak;

use std::collections::BTreeSet;

use plimsoll_conformance::verdict::{CheckResult, ResultId, Verdict};
use plimsoll_spec::model::RetryAfterFormat;

use super::run::Attempt;

pub use burst::burst;
pub use ending::{CapacityProbe, Drained, TempCount, busy_limit, lanes, recovery, statuses};
pub use rate::{goodput, latency, refusal_latency, refusals};
pub use soak::{Resource, settled_medians, settled_slope, stays_flat, temp_files};

/// What every verdict of a profile needs to know about the contract.
#[derive(Debug, Clone)]
pub struct Expectations {
    /// `burst`, `steady`, … (verdict ids are `L-{profile}…`).
    pub profile: &'static str,
    /// Digitize workers: at most this many held requests run at once.
    pub workers: u32,
    /// Digitize queue places: at most this many wait for a worker.
    pub queue: u32,
    /// Statuses the OpenAPI document lists for the digitize operation.
    pub documented: BTreeSet<u16>,
    /// The status and code of a refusal.
    pub overloaded_status: u16,
    /// The problem `code` a refusal carries, beside its status.
    pub overloaded_code: String,
    /// How Retry-After is written (T3's `format`).
    pub retry_after_format: RetryAfterFormat,
    /// Retry-After must be in this range (seconds).
    pub retry_after_min: u64,
    /// The Retry-After upper bound (seconds): T3's `max` for the digitize pool.
    pub retry_after_max: u64,
}

impl Expectations {
    /// A result of this profile: id `L-{profile}.{suffix}` (`L-{profile}` for an empty suffix).
    fn result(
        &self,
        suffix: &'static str,
        title: &str,
        expected: String,
        observed: String,
        verdict: Verdict,
    ) -> CheckResult {
        let id = ResultId::Load {
            profile: self.profile,
            verdict: suffix,
        };
        CheckResult::new(id, title, expected, observed, verdict)
    }

    /// Workers + queue places: how many requests may be in the server at once.
    pub fn admissible(&self) -> usize {
        (self.workers + self.queue) as usize
    }

    /// Whether `a` was refused as `overloaded`: the contract's status and code both.
    pub fn is_refusal(&self, a: &Attempt) -> bool {
        a.status() == Some(self.overloaded_status)
            && a.code.as_deref() == Some(self.overloaded_code.as_str())
    }

    /// Why a refusal's Retry-After is not acceptable, if it is not.
    pub fn retry_after_problem(&self, a: &Attempt) -> Option<String> {
        match a.retry_after.as_deref() {
            None => Some("no Retry-After".into()),
            Some(v) => match self.retry_after_format.parse(v) {
                None => Some(format!(
                    "Retry-After `{v}` is not {}",
                    self.retry_after_format
                )),
                Some(n) if n < self.retry_after_min || n > self.retry_after_max => Some(format!(
                    "Retry-After {n} outside {}..={}",
                    self.retry_after_min, self.retry_after_max
                )),
                Some(_) => None,
            },
        }
    }
}

/// Nearest-rank percentile (`p` in 0..=100) of unsorted values.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

/// Pass when nothing is wrong, else a failure naming every problem.
fn verdict_of(problems: &[String]) -> Verdict {
    if problems.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(problems.join("; "))
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// An attempt as evidence names it: its request id, else its user and time.
fn who(a: &Attempt) -> String {
    a.request_id
        .clone()
        .unwrap_or_else(|| format!("user {} at {:.0} ms", a.user, a.sent_ms))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::run::Outcome;

    pub(crate) fn expect() -> Expectations {
        Expectations {
            profile: "burst",
            workers: 4,
            queue: 0,
            documented: [200, 400, 503, 504].into_iter().collect(),
            overloaded_status: 503,
            overloaded_code: "overloaded".into(),
            retry_after_format: RetryAfterFormat::DelaySeconds,
            retry_after_min: 1,
            retry_after_max: 60,
        }
    }

    pub(crate) fn attempt(
        wave: usize,
        status: u16,
        retry_after: Option<&str>,
        latency_ms: f64,
    ) -> Attempt {
        Attempt {
            user: 0,
            wave,
            sent_ms: 0.0,
            latency_ms,
            think_ms: 0.0,
            hold_ms: 300,
            abandon_planned: false,
            outcome: Outcome::Status(status),
            retry_after: retry_after.map(str::to_owned),
            code: (status == 503).then(|| "overloaded".to_owned()),
            request_id: None,
            timing: None,
        }
    }

    /// `total` attempts of wave `w`, the first `admitted` of them answered 200, the rest refused.
    pub(crate) fn wave(w: usize, admitted: usize, total: usize) -> Vec<Attempt> {
        (0..total)
            .map(|i| {
                if i < admitted {
                    attempt(w, 200, None, 301.0)
                } else {
                    attempt(w, 503, Some("1"), 2.0)
                }
            })
            .collect()
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
