//! The verdicts every profile ends with: only documented answers (`statuses`), the busy gauge
//! within the limit (`busy-limit`), and capacity back once the load stops (`recovery`); and the
//! timeline lanes the reports draw.

use std::collections::BTreeMap;

use plimsoll_conformance::verdict::{CheckResult, Lane, LaneOutcome, Verdict};

use super::{Expectations, verdict_of, who};
use crate::run::{Attempt, Outcome};
use crate::scrape::Sample;

/// Every answer is a documented status; refusals are the pool's (its status and body) with a
/// valid hint; nothing failed without an answer (planned abandonment aside).
pub fn statuses(expect: &Expectations, attempts: &[Attempt]) -> CheckResult {
    let mut tally = StatusTally::default();
    for a in attempts {
        tally.add(expect, a);
    }
    let summary: Vec<String> = tally
        .counts
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect();
    let verdict = verdict_of(&tally.why(expect, attempts.is_empty()));
    let documented: Vec<String> = expect.documented.iter().map(u16::to_string).collect();
    let mut r = expect.result(
        "statuses",
        "Only documented answers under load",
        format!(
            "{}; only documented statuses ({})",
            expect.answers(),
            documented.join(", ")
        ),
        summary.join(", "),
        verdict,
    );
    r.evidence = tally.problems;
    r
}

/// How the attempts were answered: a count per kind of answer (the observed line), the
/// first problems by name (the evidence), and how many of each kind of problem (the verdict).
#[derive(Default)]
struct StatusTally {
    counts: BTreeMap<String, usize>,
    /// The first 20 problems.
    problems: Vec<String>,
    undocumented: usize,
    unexpected: usize,
    bad_retry: usize,
    errors: usize,
}

impl StatusTally {
    /// Counts one attempt, and names it if it is a problem.
    fn add(&mut self, expect: &Expectations, a: &Attempt) {
        let key = match &a.outcome {
            Outcome::Status(s) if expect.is_ok(a) => s.to_string(),
            Outcome::Status(s) => answer(*s, a),
            Outcome::Abandoned => "abandoned (planned)".to_owned(),
            Outcome::Error(_) => "no answer".to_owned(),
        };
        *self.counts.entry(key).or_default() += 1;
        let problem = match &a.outcome {
            Outcome::Status(_) if expect.is_ok(a) => None,
            Outcome::Abandoned => None,
            Outcome::Status(s) if !expect.documented.contains(s) => {
                self.undocumented += 1;
                Some(format!("{}: status {s} is not documented", who(a)))
            }
            Outcome::Status(_) if expect.is_refusal(a) => expect.retry_after_problem(a).map(|p| {
                self.bad_retry += 1;
                format!("{}: {p}", who(a))
            }),
            Outcome::Status(s) => {
                self.unexpected += 1;
                Some(format!("{}: {} under load", who(a), answer(*s, a)))
            }
            Outcome::Error(e) => {
                self.errors += 1;
                Some(format!("{}: {e}", who(a)))
            }
        };
        if let Some(p) = problem
            && self.problems.len() < 20
        {
            self.problems.push(p);
        }
    }

    /// Why the verdict fails, one reason per kind of problem (none: it passes).
    fn why(&self, expect: &Expectations, no_attempt: bool) -> Vec<String> {
        let mut why = Vec::new();
        if no_attempt {
            why.push("no attempt was made".to_owned());
        }
        if self.undocumented > 0 {
            why.push(format!("{} undocumented status(es)", self.undocumented));
        }
        if self.unexpected > 0 {
            let refusal = expect
                .refusal
                .as_deref()
                .unwrap_or("a refusal (none declared)");
            why.push(format!(
                "{} answer(s) other than {} or {refusal}",
                self.unexpected, expect.ok_status
            ));
        }
        if self.bad_retry > 0 {
            let header = expect.hint.as_ref().map_or("hint", |h| h.header.as_str());
            why.push(format!(
                "{} refusal(s) without a valid {header}",
                self.bad_retry
            ));
        }
        if self.errors > 0 {
            why.push(format!("{} request(s) got no answer", self.errors));
        }
        why
    }
}

/// An answer other than the served one, as a count and a problem name it: its status with
/// `refused`, or its problem `code` (`?` when its body has none).
fn answer(status: u16, a: &Attempt) -> String {
    match (a.refused, a.code.as_deref()) {
        (true, Some(code)) => format!("{status} {code}"),
        (true, None) => format!("{status} refused"),
        (false, code) => format!("{status} {}", code.unwrap_or("?")),
    }
}

/// The busy gauge never exceeds the workers and the queue depth never exceeds its capacity;
/// with `must_reach`, the gauge must also reach the limit (the profile saturates the pool).
pub fn busy_limit(
    expect: &Expectations,
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
        .filter(|s| s.busy.is_some_and(|b| b > f64::from(expect.workers)))
        .collect();
    let verdict = if !expect.busy_declared {
        Verdict::NotApplicable(format!(
            "the contract declares no busy series for pool `{}` (`[pools.{}.metrics]`)",
            expect.pool, expect.pool
        ))
    } else if busy.is_empty() {
        Verdict::Fail(format!(
            "no busy reading for pool `{}` in the metrics exposition",
            expect.pool
        ))
    } else if !over.is_empty() {
        Verdict::Fail(format!(
            "busy gauge reached {max_busy} with {} workers ({} of {} reads above the limit)",
            expect.workers,
            over.len(),
            busy.len()
        ))
    } else if max_depth > f64::from(expect.queue) {
        Verdict::Fail(format!(
            "queue depth reached {max_depth} with capacity {}",
            expect.queue
        ))
    } else if must_reach && max_busy < f64::from(expect.workers) {
        Verdict::Fail(format!(
            "the pool was saturated but the busy gauge never read more than {max_busy} of {} (lost capacity or a wrong gauge)",
            expect.workers
        ))
    } else {
        Verdict::Pass
    };
    let mut r = expect.result(
        "busy-limit",
        "Busy gauge within the worker limit throughout",
        format!(
            "busy ≤ {} workers{}, queue depth ≤ {}",
            expect.workers,
            if must_reach { " (and reaching it)" } else { "" },
            expect.queue
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

/// The target's temp files at one moment: its `plimsoll_temp_files` gauge, and the entries of
/// its temp folder when the checker can see it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TempCount {
    /// The `plimsoll_temp_files` gauge; `None` when `/metrics` could not be read or lacks it.
    pub gauge: Option<f64>,
    /// Entries of the temp folder, when the checker can see it.
    pub folder: Option<usize>,
}

impl TempCount {
    /// Why this reading (after the load) is more than `before` + `allowance`, one reason per
    /// source; empty when it is not. A source missing from either reading is not compared.
    pub fn left_behind(&self, before: &TempCount, allowance: u64) -> Vec<String> {
        let allowance = allowance as f64;
        let mut why = Vec::new();
        if let (Some(b), Some(a)) = (before.gauge, self.gauge)
            && a - b > allowance
        {
            why.push(format!(
                "{} temp file(s) left behind by the gauge ({b} before, {a} after; allowed +{allowance})",
                a - b
            ));
        }
        if let (Some(b), Some(a)) = (before.folder, self.folder)
            && a as f64 - b as f64 > allowance
        {
            why.push(format!(
                "{} entries left in the temp folder ({b} before, {a} after; allowed +{allowance})",
                a - b
            ));
        }
        why
    }

    /// Whether either source can be compared between `before` and this reading.
    pub fn comparable(&self, before: &TempCount) -> bool {
        (before.gauge.is_some() && self.gauge.is_some())
            || (before.folder.is_some() && self.folder.is_some())
    }

    /// `N` from the gauge, `N (temp folder: M entries)` when the folder is visible too,
    /// `unread` when neither is.
    pub fn describe(&self) -> String {
        let gauge = self.gauge.map_or("?".to_owned(), |v| v.to_string());
        match (self.gauge, self.folder) {
            (None, None) => "unread".to_owned(),
            (_, Some(n)) => format!("{gauge} (temp folder: {n} entries)"),
            (Some(_), None) => gauge,
        }
    }
}

/// What the checker read once the load stopped: every request answered (or abandoned by its
/// client), then the pool drained, then the temp files.
#[derive(Debug, Clone, Default)]
pub struct Drained {
    /// How long until busy and queue depth read 0, or `None` if they never did.
    pub drained_ms: Option<f64>,
    /// The target declares no series to read the drain by: it was waited for (the pool's
    /// cancellation bound), not read.
    pub unread: bool,
    /// Last busy gauge read while waiting.
    pub last_busy: Option<f64>,
    /// Temp files before the load (idle) and once it drained.
    pub temp_before: TempCount,
    /// Temp files once it drained, compared with `temp_before`.
    pub temp_after: TempCount,
    /// Time spent waiting for the drain and the temp files, ms.
    pub elapsed_ms: f64,
}

/// The capacity probe after the drain: workers + queue held requests sent at once.
#[derive(Debug, Clone, Default)]
pub struct CapacityProbe {
    /// Held requests sent: workers + queue places, what the pool must admit again.
    pub sent: usize,
    /// Of those, answered 200: fewer means slots were lost.
    pub admitted: usize,
    /// What every other answer was, with its request id, as evidence.
    pub problems: Vec<String>,
    /// From the first send to the last answer.
    pub elapsed_ms: f64,
}

/// After the load: the pool drains, temp files go, and full capacity comes back.
pub fn recovery(
    expect: &Expectations,
    drained: &Drained,
    probe: &CapacityProbe,
    temp_allowance: u64,
) -> CheckResult {
    let admit = expect.admissible();
    let mut why = Vec::new();
    if drained.drained_ms.is_none() && !drained.unread {
        why.push(format!(
            "the busy gauge never returned to 0 (last {}): slots are held by requests that are gone",
            drained.last_busy.unwrap_or(f64::NAN)
        ));
    }
    if probe.admitted < probe.sent {
        why.push(format!(
            "only {} of {} held requests were admitted afterwards: {} slot(s) lost",
            probe.admitted,
            probe.sent,
            probe.sent - probe.admitted
        ));
    }
    why.extend(
        drained
            .temp_after
            .left_behind(&drained.temp_before, temp_allowance),
    );
    let mut result = expect.result(
        "recovery",
        "Capacity comes back when the load stops",
        format!("busy and queue drain to 0, temp files back to the start (+{temp_allowance}), {admit} held requests all admitted again"),
        format!(
            "drained {}, temp files {} → {}, probe {}/{} admitted",
            match (drained.unread, drained.drained_ms) {
                (true, _) => "unread (no busy series declared)".to_owned(),
                (false, Some(ms)) => format!("in {ms:.0} ms"),
                (false, None) => "never".to_owned(),
            },
            drained.temp_before.describe(),
            drained.temp_after.describe(),
            probe.admitted,
            probe.sent
        ),
        verdict_of(&why),
    );
    result.duration_ms = drained.elapsed_ms + probe.elapsed_ms;
    result.evidence = probe.problems.clone();
    result
}

/// Timeline lanes of up to `limit` attempts sent from `from_ms` on, times relative to the
/// first of them.
pub fn lanes(attempts: &[Attempt], from_ms: f64, limit: usize, expect: &Expectations) -> Vec<Lane> {
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
                Outcome::Status(_) if expect.is_ok(a) => LaneOutcome::Ok,
                Outcome::Status(_) if expect.is_refusal(a) => LaneOutcome::Refused,
                Outcome::Abandoned => LaneOutcome::Cancelled,
                Outcome::Status(504) => LaneOutcome::TimedOut,
                _ => LaneOutcome::Failed,
            },
            status: a.status(),
            pool: Some(expect.pool.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{attempt, expect, wave};
    use super::*;

    #[test]
    fn statuses_fail_on_undocumented_and_unexpected_answers() {
        let mut list = wave(0, 4, 16);
        assert_eq!(statuses(&expect(), &list).verdict, Verdict::Pass);
        list.push(attempt(0, 500, None, 1.0));
        let r = statuses(&expect(), &list);
        assert!(
            matches!(&r.verdict, Verdict::Fail(why) if why.contains("undocumented")),
            "{r:?}"
        );
    }

    fn drained(before: (f64, usize), after: (f64, usize)) -> Drained {
        Drained {
            drained_ms: Some(10.0),
            unread: false,
            last_busy: Some(0.0),
            temp_before: TempCount {
                gauge: Some(before.0),
                folder: Some(before.1),
            },
            temp_after: TempCount {
                gauge: Some(after.0),
                folder: Some(after.1),
            },
            elapsed_ms: 10.0,
        }
    }

    #[test]
    fn recovery_fails_on_one_temp_file_left_behind_by_either_source() {
        let probe = CapacityProbe {
            sent: 4,
            admitted: 4,
            ..CapacityProbe::default()
        };
        let x = expect();
        assert_eq!(
            recovery(&x, &drained((2.0, 2), (2.0, 2)), &probe, 0).verdict,
            Verdict::Pass
        );
        for leaked in [drained((2.0, 2), (3.0, 2)), drained((2.0, 2), (2.0, 3))] {
            assert!(recovery(&x, &leaked, &probe, 0).verdict.is_fail());
            assert_eq!(recovery(&x, &leaked, &probe, 1).verdict, Verdict::Pass);
        }
        let lost = CapacityProbe {
            admitted: 3,
            ..probe
        };
        assert!(
            recovery(&x, &drained((0.0, 0), (0.0, 0)), &lost, 0)
                .verdict
                .is_fail()
        );
    }
}
