//! From what a profile observed to [`CheckResult`]s, so load verdicts render in the same
//! table, JSON, JUnit and HTML as `plimsoll check`. Pure functions of the recorded data, one
//! module per family: [`ending`] (every profile), [`burst`], [`rate`] (steady and overload)
//! and [`soak`].

pub mod burst;
pub mod ending;
pub mod rate;
pub mod soak;

use std::collections::BTreeSet;
use std::ops::RangeInclusive;

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
    /// The loaded pool's name.
    pub pool: String,
    /// The pool's workers: at most this many held requests run at once.
    pub workers: u32,
    /// The pool's queue places: at most this many wait for a worker.
    pub queue: u32,
    /// Every status an attempt may be answered with (the reference: the statuses its OpenAPI
    /// operation lists).
    pub documented: BTreeSet<u16>,
    /// The status of a served attempt.
    pub ok_status: u16,
    /// The pool's refusal in words (``503 `overloaded` ``); None: the pool never refuses.
    pub refusal: Option<String>,
    /// The refusal's hint, if it declares one.
    pub hint: Option<HintRange>,
    /// Whether the contract declares the pool's busy series (else the gauge is not judged).
    pub busy_declared: bool,
    /// Whether the contract declares a gauge of per-request temp files (the reference's).
    pub temp_declared: bool,
}

/// A refusal's hint: the header it travels in and the delays it may advertise (RFC 9110
/// delay-seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintRange {
    /// The header (`Retry-After`).
    pub header: String,
    /// The delays allowed, in seconds.
    pub allowed: RangeInclusive<u64>,
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

    /// Whether `a` was the pool's refusal (its status and declared body both).
    pub fn is_refusal(&self, a: &Attempt) -> bool {
        a.refused
    }

    /// Whether `a` was served.
    pub fn is_ok(&self, a: &Attempt) -> bool {
        a.status() == Some(self.ok_status)
    }

    /// The answers every attempt must get, in words (``200 or 503 `overloaded` with
    /// Retry-After 1..=60 s``).
    pub fn answers(&self) -> String {
        let refusal = self
            .refusal
            .as_deref()
            .map_or(String::new(), |r| format!(" or {r}"));
        let hint = self.hint.as_ref().map_or(String::new(), |h| {
            format!(
                " with {} {}..={} s",
                h.header,
                h.allowed.start(),
                h.allowed.end()
            )
        });
        format!("{}{refusal}{hint}", self.ok_status)
    }

    /// Why a refusal's hint is not acceptable, if it is not (none declared: nothing is judged).
    pub fn retry_after_problem(&self, a: &Attempt) -> Option<String> {
        let hint = self.hint.as_ref()?;
        let format = RetryAfterFormat::DelaySeconds;
        let header = &hint.header;
        match a.retry_after.as_deref() {
            None => Some(format!("no {header}")),
            Some(v) => match format.parse(v) {
                None => Some(format!("{header} `{v}` is not {format}")),
                Some(n) if !hint.allowed.contains(&n) => Some(format!(
                    "{header} {n} outside {}..={}",
                    hint.allowed.start(),
                    hint.allowed.end()
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
            pool: "digitize".into(),
            workers: 4,
            queue: 0,
            documented: [200, 400, 503, 504].into_iter().collect(),
            ok_status: 200,
            refusal: Some("503 `overloaded`".into()),
            hint: Some(HintRange {
                header: "Retry-After".into(),
                allowed: 1..=60,
            }),
            busy_declared: true,
            temp_declared: true,
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
            refused: status == 503,
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
