//! From what a profile observed to [`CheckResult`]s, so load verdicts render in the same
//! table, JSON, JUnit and HTML as `plimsoll check`. Pure functions of the recorded data.

use std::collections::{BTreeMap, BTreeSet};

use super::prediction::{Interval, Model};
use super::runner::{Attempt, Outcome};
use super::scrape::Sample;
use crate::verdict::{CheckResult, Lane, LaneOutcome, Verdict};

/// What every verdict of a profile needs to know about the contract.
#[derive(Debug, Clone)]
pub struct Expectations {
    /// `burst`, `steady`, … (verdict ids are `L-{profile}…`).
    pub profile: &'static str,
    pub workers: u32,
    pub queue: u32,
    /// Statuses the OpenAPI document lists for the digitize operation.
    pub documented: BTreeSet<u16>,
    /// The status and code of a refusal.
    pub overloaded_status: u16,
    pub overloaded_code: String,
    /// Retry-After must be an integer in this range (seconds).
    pub retry_after_min: u64,
    pub retry_after_max: u64,
}

impl Expectations {
    fn id(&self, suffix: &str) -> String {
        if suffix.is_empty() {
            format!("L-{}", self.profile)
        } else {
            format!("L-{}.{suffix}", self.profile)
        }
    }

    fn clause(&self) -> String {
        format!("load.{}", self.profile)
    }

    fn result(
        &self,
        suffix: &str,
        title: &str,
        expected: String,
        observed: String,
        verdict: Verdict,
    ) -> CheckResult {
        CheckResult {
            id: self.id(suffix),
            clause: self.clause(),
            title: title.to_owned(),
            expected,
            observed,
            verdict,
            duration_ms: 0.0,
            evidence: Vec::new(),
            trials_ms: Vec::new(),
            timeline: Vec::new(),
        }
    }

    pub fn is_refusal(&self, a: &Attempt) -> bool {
        a.status() == Some(self.overloaded_status)
            && a.code.as_deref() == Some(self.overloaded_code.as_str())
    }

    /// Why a refusal's Retry-After is not acceptable, if it is not.
    pub fn retry_after_problem(&self, a: &Attempt) -> Option<String> {
        match a.retry_after.as_deref() {
            None => Some("no Retry-After".into()),
            Some(v) => match v.trim().parse::<u64>() {
                Err(_) => Some(format!("Retry-After `{v}` is not delay-seconds")),
                Ok(n) if n < self.retry_after_min || n > self.retry_after_max => Some(format!(
                    "Retry-After {n} outside {}..={}",
                    self.retry_after_min, self.retry_after_max
                )),
                Ok(_) => None,
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

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn who(a: &Attempt) -> String {
    a.request_id
        .clone()
        .unwrap_or_else(|| format!("user {} at {:.0} ms", a.user, a.sent_ms))
}

/// Every answer is a documented status; refusals carry the `overloaded` code and a valid
/// Retry-After; nothing failed without an answer (planned abandonment aside).
pub fn statuses(x: &Expectations, attempts: &[Attempt]) -> CheckResult {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut undocumented = 0usize;
    let mut unexpected = 0usize;
    let mut bad_retry = 0usize;
    let mut errors = 0usize;
    for a in attempts {
        let key = match &a.outcome {
            Outcome::Status(s) if *s == 200 => "200".to_owned(),
            Outcome::Status(s) => format!("{s} {}", a.code.as_deref().unwrap_or("?")),
            Outcome::Abandoned => "abandoned (planned)".to_owned(),
            Outcome::Error(_) => "no answer".to_owned(),
        };
        *counts.entry(key).or_default() += 1;
        match &a.outcome {
            Outcome::Status(200) | Outcome::Abandoned => {}
            Outcome::Status(s) if !x.documented.contains(s) => {
                undocumented += 1;
                if problems.len() < 20 {
                    problems.push(format!("{}: status {s} is not documented", who(a)));
                }
            }
            Outcome::Status(_) if x.is_refusal(a) => {
                if let Some(p) = x.retry_after_problem(a) {
                    bad_retry += 1;
                    if problems.len() < 20 {
                        problems.push(format!("{}: {p}", who(a)));
                    }
                }
            }
            Outcome::Status(s) => {
                unexpected += 1;
                if problems.len() < 20 {
                    problems.push(format!(
                        "{}: {s} {} under load",
                        who(a),
                        a.code.as_deref().unwrap_or("?")
                    ));
                }
            }
            Outcome::Error(e) => {
                errors += 1;
                if problems.len() < 20 {
                    problems.push(format!("{}: {e}", who(a)));
                }
            }
        }
    }
    let summary: Vec<String> = counts.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let verdict = if attempts.is_empty() {
        Verdict::Fail("no attempt was made".into())
    } else if undocumented + unexpected + bad_retry + errors == 0 {
        Verdict::Pass
    } else {
        let mut why = Vec::new();
        if undocumented > 0 {
            why.push(format!("{undocumented} undocumented status(es)"));
        }
        if unexpected > 0 {
            why.push(format!(
                "{unexpected} answer(s) other than 200 or {} {}",
                x.overloaded_status, x.overloaded_code
            ));
        }
        if bad_retry > 0 {
            why.push(format!(
                "{bad_retry} refusal(s) without a valid Retry-After"
            ));
        }
        if errors > 0 {
            why.push(format!("{errors} request(s) got no answer"));
        }
        Verdict::Fail(why.join("; "))
    };
    let documented: Vec<String> = x.documented.iter().map(u16::to_string).collect();
    let mut r = x.result(
        "statuses",
        "Only documented answers under load",
        format!(
            "200 or {} {} with Retry-After {}..={} s; only documented statuses ({})",
            x.overloaded_status,
            x.overloaded_code,
            x.retry_after_min,
            x.retry_after_max,
            documented.join(", ")
        ),
        summary.join(", "),
        verdict,
    );
    r.evidence = problems;
    r
}

/// The busy gauge never exceeds the workers and the queue depth never exceeds its capacity;
/// with `must_reach`, the gauge must also reach the limit (the profile saturates the pool).
pub fn busy_limit(
    x: &Expectations,
    samples: &[Sample],
    scrape_errors: &[String],
    must_reach: bool,
) -> CheckResult {
    let busy: Vec<f64> = samples.iter().filter_map(|s| s.busy).collect();
    let depth: Vec<f64> = samples.iter().filter_map(|s| s.depth).collect();
    let max_busy = busy.iter().copied().fold(f64::NAN, f64::max);
    let max_depth = depth.iter().copied().fold(0.0, f64::max);
    let over: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.busy.is_some_and(|b| b > f64::from(x.workers)))
        .collect();
    let verdict = if busy.is_empty() {
        Verdict::Fail("no plimsoll_workers_busy reading for the digitize pool in /metrics".into())
    } else if !over.is_empty() {
        Verdict::Fail(format!(
            "busy gauge reached {max_busy} with {} workers ({} of {} reads above the limit)",
            x.workers,
            over.len(),
            busy.len()
        ))
    } else if max_depth > f64::from(x.queue) {
        Verdict::Fail(format!(
            "queue depth reached {max_depth} with capacity {}",
            x.queue
        ))
    } else if must_reach && max_busy < f64::from(x.workers) {
        Verdict::Fail(format!(
            "the pool was saturated but the busy gauge never read more than {max_busy} of {} (lost capacity or a wrong gauge)",
            x.workers
        ))
    } else {
        Verdict::Pass
    };
    let mut r = x.result(
        "busy-limit",
        "Busy gauge within the worker limit throughout",
        format!(
            "busy ≤ {} workers{}, queue depth ≤ {}",
            x.workers,
            if must_reach { " (and reaching it)" } else { "" },
            x.queue
        ),
        format!(
            "max busy {max_busy}, max queue depth {max_depth} over {} reads",
            busy.len()
        ),
        verdict,
    );
    r.evidence = over
        .iter()
        .take(10)
        .map(|s| format!("{:.0} ms: busy {}", s.t_ms, s.busy.unwrap_or_default()))
        .chain(
            scrape_errors
                .iter()
                .map(|e| format!("metrics read failed at {e}")),
        )
        .collect();
    r
}

/// Per wave: exactly workers + queue admitted, the rest refused within `refusal_ms`, each
/// refusal with a valid Retry-After.
pub fn burst(
    x: &Expectations,
    attempts: &[Attempt],
    per_wave: usize,
    hold_ms: u64,
    refusal_ms: u64,
    drain_failed: bool,
) -> CheckResult {
    let admit = (x.workers + x.queue) as usize;
    let mut waves: BTreeMap<usize, Vec<&Attempt>> = BTreeMap::new();
    for a in attempts {
        waves.entry(a.wave).or_default().push(a);
    }
    let mut problems = Vec::new();
    let mut observed = Vec::new();
    let mut slowest_refusal = 0.0f64;
    for (w, list) in &waves {
        let ok = list.iter().filter(|a| a.status() == Some(200)).count();
        let refused: Vec<&&Attempt> = list.iter().filter(|a| x.is_refusal(a)).collect();
        let other = list.len() - ok - refused.len();
        observed.push(format!("{ok}/{}", list.len()));
        if list.len() != per_wave {
            problems.push(format!(
                "wave {}: {} requests recorded, {per_wave} sent",
                w + 1,
                list.len()
            ));
        }
        if ok != admit {
            problems.push(format!(
                "wave {}: {ok} admitted, expected exactly {admit}",
                w + 1
            ));
        }
        if other > 0 {
            problems.push(format!(
                "wave {}: {other} answer(s) neither 200 nor a refusal",
                w + 1
            ));
        }
        for r in &refused {
            slowest_refusal = slowest_refusal.max(r.latency_ms);
            if r.latency_ms > refusal_ms as f64 {
                problems.push(format!(
                    "wave {}: {} refused after {:.0} ms",
                    w + 1,
                    who(r),
                    r.latency_ms
                ));
            }
            if let Some(p) = x.retry_after_problem(r) {
                problems.push(format!("wave {}: {}: {p}", w + 1, who(r)));
            }
        }
    }
    if drain_failed {
        problems.push(
            "a wave started before the previous one drained (busy gauge never returned to 0)"
                .into(),
        );
    }
    let verdict = if waves.is_empty() {
        Verdict::Fail("no wave was recorded".into())
    } else if problems.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(problems[0].clone())
    };
    let mut r = x.result(
        "",
        "Burst: exactly workers + queue admitted per wave",
        format!(
            "{admit} of {per_wave} admitted per wave (hold {hold_ms} ms), the rest {} within {refusal_ms} ms with Retry-After",
            x.overloaded_status
        ),
        format!(
            "admitted per wave {}; slowest refusal {slowest_refusal:.1} ms",
            observed.join(", ")
        ),
        verdict,
    );
    r.evidence = problems.into_iter().take(30).collect();
    r.timeline = lanes(attempts, 0.0, usize::MAX, x);
    r
}

/// The measured refused fraction against the prediction's interval.
pub fn refusals(
    x: &Expectations,
    model: &Model,
    iv: &Interval,
    refused: usize,
    attempts: &[Attempt],
    evidence: Vec<String>,
) -> CheckResult {
    let measured = refused as f64 / iv.attempts.max(1) as f64;
    let verdict = if iv.attempts == 0 {
        Verdict::Fail("no attempt in the measurement window".into())
    } else if iv.contains(measured) {
        Verdict::Pass
    } else {
        let side = if measured > iv.high { "more" } else { "fewer" };
        Verdict::Fail(format!(
            "refused {} of attempts, {side} than the {} prediction allows ({}..{}): admission does not match {} workers and {} queue places",
            pct(measured),
            model.formula(),
            pct(iv.low),
            pct(iv.high),
            x.workers,
            x.queue
        ))
    };
    let mut r = x.result(
        "refusals",
        "Refused fraction matches the queueing prediction",
        format!(
            "{} ± {} ({}σ: binomial σ {} × dispersion {:.2}) by {} ({})",
            pct(iv.predicted),
            pct(iv.high - iv.predicted),
            iv.z,
            pct(iv.binomial_sigma),
            iv.dispersion,
            model.formula(),
            model.describe()
        ),
        format!("{} ({refused} of {} attempts)", pct(measured), iv.attempts),
        verdict,
    );
    r.evidence = evidence;
    r.timeline = lanes(attempts, 0.0, 120, x);
    r
}

/// Admitted requests are not slowed beyond their own hold: p99 of (latency − hold).
pub fn latency(x: &Expectations, window: &[&Attempt], bound_ms: u64) -> CheckResult {
    let overheads: Vec<f64> = window
        .iter()
        .filter(|a| a.status() == Some(200))
        .map(|a| a.latency_ms - a.hold_ms as f64)
        .collect();
    let p50 = percentile(&overheads, 50.0);
    let p99 = percentile(&overheads, 99.0);
    let verdict = match p99 {
        None => Verdict::Fail("no admitted request in the measurement window".into()),
        Some(p) if p <= bound_ms as f64 => Verdict::Pass,
        Some(p) => Verdict::Fail(format!(
            "admitted p99 is {p:.1} ms above the request's own hold, bound {bound_ms} ms"
        )),
    };
    x.result(
        "latency",
        "Admitted requests take their hold and little more",
        format!("p99 of (response time − hold) ≤ {bound_ms} ms"),
        format!(
            "p50 {:.1} ms, p99 {:.1} ms over {} admitted",
            p50.unwrap_or(f64::NAN),
            p99.unwrap_or(f64::NAN),
            overheads.len()
        ),
        verdict,
    )
}

/// Goodput against what admission allows for the attempts the server really got (the model
/// refitted to the measured attempt rate, so a load generator slowed by a busy machine is not
/// mistaken for a collapsing server). A short run counts few completions, so the floor is
/// lowered by `z` σ of the count's Poisson noise: a shortfall must be real to fail.
pub fn goodput(
    x: &Expectations,
    model: &Model,
    attempts_per_s: f64,
    ok: usize,
    window_s: f64,
    fraction: f64,
    z: f64,
) -> CheckResult {
    let window_s = window_s.max(1e-9);
    let measured = ok as f64 / window_s;
    let fitted = model.at_attempt_rate(attempts_per_s);
    let allowed = fitted.carried_rate();
    let noise = z * (allowed / window_s).sqrt();
    let floor = (fraction * allowed - noise).max(0.0);
    let capacity = f64::from(x.workers) / model.mean_service_s;
    let verdict = if measured >= floor {
        Verdict::Pass
    } else {
        Verdict::Fail(format!(
            "{measured:.1} admitted/s is {:.0}% of the {allowed:.1}/s admission allows, below the floor {floor:.1}/s (collapse under overload)",
            100.0 * measured / allowed
        ))
    };
    let mut r = x.result(
        "goodput",
        "No collapse: workers stay busy under overload",
        format!(
            "≥ {:.0}% of the {allowed:.1} admitted/s {} allows at {attempts_per_s:.1} attempts/s ({} of capacity {capacity:.1}/s), less {z}σ counting noise: ≥ {floor:.1}/s",
            fraction * 100.0,
            model.formula(),
            pct(allowed / capacity)
        ),
        format!(
            "{measured:.1} admitted/s ({} of what admission allows, {} of capacity)",
            pct(measured / allowed),
            pct(measured / capacity)
        ),
        verdict,
    );
    r.evidence = vec![format!(
        "model at the measured attempt rate: {}; at the planned one it would carry {:.1}/s",
        fitted.describe(),
        model.carried_rate()
    )];
    r
}

/// Refusals are fast: p99 latency of `503 overloaded` below the bound.
pub fn refusal_latency(x: &Expectations, window: &[&Attempt], bound_ms: u64) -> CheckResult {
    let slow: Vec<f64> = window
        .iter()
        .filter(|a| x.is_refusal(a))
        .map(|a| a.latency_ms)
        .collect();
    let p50 = percentile(&slow, 50.0);
    let p99 = percentile(&slow, 99.0);
    let verdict = match p99 {
        None => Verdict::Fail("no refusal to time: the profile did not overload the server".into()),
        Some(p) if p < bound_ms as f64 => Verdict::Pass,
        Some(p) => Verdict::Fail(format!(
            "refusal p99 {p:.1} ms, bound {bound_ms} ms: refusals wait"
        )),
    };
    let mut r = x.result(
        "refusal-latency",
        "Refusals are answered at once",
        format!(
            "p99 of {} {} latency < {bound_ms} ms",
            x.overloaded_status, x.overloaded_code
        ),
        format!(
            "p50 {:.1} ms, p99 {:.1} ms over {} refusals",
            p50.unwrap_or(f64::NAN),
            p99.unwrap_or(f64::NAN),
            slow.len()
        ),
        verdict,
    );
    let mut slowest: Vec<&&Attempt> = window.iter().filter(|a| x.is_refusal(a)).collect();
    slowest.sort_by(|a, b| b.latency_ms.total_cmp(&a.latency_ms));
    r.evidence = slowest
        .iter()
        .take(5)
        .map(|a| format!("{}: {:.1} ms", who(a), a.latency_ms))
        .collect();
    r
}

/// Growth of a resource series over the settled part of a run, `from_ms..to_ms` (from the
/// moment every user had its first answer, so connections being opened do not count as
/// growth): the median of the reads in its first quarter against the median of its last
/// quarter, so a single spike decides nothing. `None` with fewer than 3 reads in either.
pub fn growth(values: &[(f64, f64)], from_ms: f64, to_ms: f64) -> Option<(f64, f64)> {
    let span = to_ms - from_ms;
    let part = |a: f64, b: f64| -> Vec<f64> {
        values
            .iter()
            .filter(|(t, _)| *t >= from_ms + a * span && *t <= from_ms + b * span)
            .map(|(_, v)| *v)
            .collect()
    };
    let (early, late) = (part(0.0, 0.25), part(0.75, 1.0));
    if span <= 0.0 || early.len() < 3 || late.len() < 3 {
        return None;
    }
    Some((percentile(&early, 50.0)?, percentile(&late, 50.0)?))
}

/// A soak resource and its allowance.
#[derive(Debug, Clone, Copy)]
pub struct Resource<'a> {
    /// Verdict id suffix (`rss`, `fds`, …).
    pub suffix: &'a str,
    pub title: &'a str,
    pub unit: &'a str,
    /// Divides raw readings into `unit`s.
    pub scale: f64,
    /// Allowed growth, in `unit`s.
    pub allowed: u64,
}

/// A soak resource stays within its allowance: `series` is (warm-up, end) from [`growth`],
/// `skip` the reason it could not be read.
pub fn flat(
    x: &Expectations,
    r: Resource<'_>,
    series: Option<(f64, f64)>,
    skip: Option<String>,
) -> CheckResult {
    let Resource {
        suffix,
        title,
        unit,
        scale,
        allowed,
    } = r;
    let expected = format!("growth ≤ {allowed} {unit} from the settled start to the end");
    match (series, skip) {
        (_, Some(reason)) => x.result(
            suffix,
            title,
            expected,
            "not measured".into(),
            Verdict::Skip(reason),
        ),
        (None, None) => x.result(
            suffix,
            title,
            expected,
            "no reading".into(),
            Verdict::Skip("too few readings after every user had started: run longer".into()),
        ),
        (Some((early, late)), None) => {
            let grew = (late - early) / scale;
            let verdict = if grew <= allowed as f64 {
                Verdict::Pass
            } else {
                Verdict::Fail(format!("grew {grew:.1} {unit}, allowed {allowed}"))
            };
            x.result(
                suffix,
                title,
                expected,
                format!(
                    "{:.1} → {:.1} {unit} ({grew:+.1})",
                    early / scale,
                    late / scale
                ),
                verdict,
            )
        }
    }
}

/// What the checker saw once the load stopped.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// How long until busy and queue depth read 0, or `None` if they never did.
    pub drained_ms: Option<f64>,
    /// Last busy gauge read while waiting.
    pub last_busy: Option<f64>,
    /// Temp files (gauge) before the run and after it drained.
    pub temp_before: Option<f64>,
    pub temp_after: Option<f64>,
    /// Entries in the visible temp folder after the drain.
    pub temp_dir_after: Option<usize>,
    /// The probe: held requests sent at once, and how many were admitted.
    pub probe_sent: usize,
    pub probe_admitted: usize,
    pub probe_problems: Vec<String>,
}

/// After the load: the pool drains, temp files go, and full capacity comes back.
pub fn recovery(x: &Expectations, r: &Recovery, temp_allowance: u64) -> CheckResult {
    let admit = (x.workers + x.queue) as usize;
    let temp_grew = match (r.temp_before, r.temp_after) {
        (Some(b), Some(a)) => a - b,
        _ => 0.0,
    };
    let mut why = Vec::new();
    if r.drained_ms.is_none() {
        why.push(format!(
            "the busy gauge never returned to 0 (last {}): slots are held by requests that are gone",
            r.last_busy.unwrap_or(f64::NAN)
        ));
    }
    if r.probe_admitted < r.probe_sent {
        why.push(format!(
            "only {} of {} held requests were admitted afterwards: {} slot(s) lost",
            r.probe_admitted,
            r.probe_sent,
            r.probe_sent - r.probe_admitted
        ));
    }
    if temp_grew > temp_allowance as f64 {
        why.push(format!(
            "{temp_grew} temp file(s) left behind (allowed {temp_allowance})"
        ));
    }
    if let Some(n) = r.temp_dir_after.filter(|n| *n as u64 > temp_allowance) {
        why.push(format!("{n} entries left in the temp folder"));
    }
    let verdict = if why.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(why.join("; "))
    };
    let mut result = x.result(
        "recovery",
        "Capacity comes back when the load stops",
        format!("busy and queue drain to 0, temp files back to the start (+{temp_allowance}), {admit} held requests all admitted again"),
        format!(
            "drained {}, temp files {} → {}, probe {}/{} admitted",
            r.drained_ms.map_or("never".to_owned(), |ms| format!("in {ms:.0} ms")),
            r.temp_before.map_or("?".to_owned(), |v| v.to_string()),
            r.temp_after.map_or("?".to_owned(), |v| v.to_string()),
            r.probe_admitted,
            r.probe_sent
        ),
        verdict,
    );
    result.evidence = r.probe_problems.clone();
    result
}

/// Timeline lanes of up to `limit` attempts sent from `from_ms` on, times relative to the
/// first of them.
pub fn lanes(attempts: &[Attempt], from_ms: f64, limit: usize, x: &Expectations) -> Vec<Lane> {
    let mut picked: Vec<&Attempt> = attempts.iter().filter(|a| a.sent_ms >= from_ms).collect();
    picked.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
    picked.truncate(limit);
    let origin = picked.first().map_or(0.0, |a| a.sent_ms);
    picked
        .into_iter()
        .map(|a| Lane {
            label: format!("u{} w{}", a.user, a.wave + 1),
            request_id: a.request_id.clone(),
            start_ms: a.sent_ms - origin,
            run_start_ms: a.timing.map(|(q, _)| a.sent_ms - origin + q),
            end_ms: a.sent_ms - origin + a.latency_ms,
            outcome: match &a.outcome {
                Outcome::Status(200) => LaneOutcome::Ok,
                Outcome::Status(_) if x.is_refusal(a) => LaneOutcome::Refused,
                Outcome::Abandoned => LaneOutcome::Cancelled,
                Outcome::Status(504) => LaneOutcome::TimedOut,
                _ => LaneOutcome::Failed,
            },
            status: a.status(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x() -> Expectations {
        Expectations {
            profile: "burst",
            workers: 4,
            queue: 0,
            documented: [200, 400, 503, 504].into_iter().collect(),
            overloaded_status: 503,
            overloaded_code: "overloaded".into(),
            retry_after_min: 1,
            retry_after_max: 60,
        }
    }

    fn attempt(wave: usize, status: u16, retry_after: Option<&str>, latency_ms: f64) -> Attempt {
        Attempt {
            user: 0,
            wave,
            sent_ms: 0.0,
            latency_ms,
            think_ms: 0.0,
            hold_ms: 300,
            abandon: false,
            outcome: Outcome::Status(status),
            retry_after: retry_after.map(str::to_owned),
            code: (status == 503).then(|| "overloaded".to_owned()),
            request_id: None,
            timing: None,
        }
    }

    fn wave(w: usize, admitted: usize, total: usize) -> Vec<Attempt> {
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
    fn burst_passes_only_with_exact_admission() {
        let good: Vec<Attempt> = (0..3).flat_map(|w| wave(w, 4, 16)).collect();
        assert_eq!(
            burst(&x(), &good, 16, 300, 100, false).verdict,
            Verdict::Pass
        );
        let one_more: Vec<Attempt> = (0..3)
            .flat_map(|w| wave(w, if w == 1 { 5 } else { 4 }, 16))
            .collect();
        assert!(
            burst(&x(), &one_more, 16, 300, 100, false)
                .verdict
                .is_fail()
        );
        let mut slow = wave(0, 4, 16);
        slow[10].latency_ms = 250.0;
        assert!(burst(&x(), &slow, 16, 300, 100, false).verdict.is_fail());
        let mut no_retry = wave(0, 4, 16);
        no_retry[10].retry_after = Some("Wed, 21 Oct 2015 07:28:00 GMT".into());
        assert!(
            burst(&x(), &no_retry, 16, 300, 100, false)
                .verdict
                .is_fail()
        );
    }

    #[test]
    fn statuses_fail_on_undocumented_and_unexpected_answers() {
        let mut list = wave(0, 4, 16);
        assert_eq!(statuses(&x(), &list).verdict, Verdict::Pass);
        list.push(attempt(0, 500, None, 1.0));
        let r = statuses(&x(), &list);
        assert!(
            matches!(&r.verdict, Verdict::Fail(why) if why.contains("undocumented")),
            "{r:?}"
        );
    }

    #[test]
    fn goodput_fails_a_collapse_but_not_counting_noise() {
        use crate::load::prediction::{Arrivals, Model};
        let model = Model {
            workers: 4,
            queue: 0,
            mean_service_s: 0.2,
            arrivals: Arrivals::Closed {
                users: 64,
                mean_think_s: 1.0,
            },
        };
        let rate = model.attempt_rate();
        let allowed = model.carried_rate();
        // 30 s at 88 % of what admission allows: within noise.
        let near = (0.88 * allowed * 30.0) as usize;
        assert_eq!(
            goodput(&x(), &model, rate, near, 30.0, 0.9, 3.0).verdict,
            Verdict::Pass
        );
        // Half of it: a collapse.
        let half = (0.5 * allowed * 30.0) as usize;
        assert!(
            goodput(&x(), &model, rate, half, 30.0, 0.9, 3.0)
                .verdict
                .is_fail()
        );
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn growth_compares_medians_of_early_and_late_reads() {
        let flat: Vec<(f64, f64)> = (0..100)
            .map(|i| (f64::from(i) * 10.0, 100.0 + f64::from(i % 3)))
            .collect();
        let (a, b) = growth(&flat, 0.0, 1000.0).unwrap();
        assert!((b - a).abs() <= 2.0);
        let leak: Vec<(f64, f64)> = (0..100)
            .map(|i| (f64::from(i) * 10.0, 100.0 + f64::from(i)))
            .collect();
        let (a, b) = growth(&leak, 0.0, 1000.0).unwrap();
        assert!(b - a > 50.0);
        assert!(growth(&[], 0.0, 1000.0).is_none());
    }
}
