//! What one check builds up while it runs: its failures, its skip reasons, the expected and
//! observed values in words, evidence and the request timeline. Checks only add to it; the
//! registry turns it into a [`crate::verdict::CheckResult`].

use std::time::{Duration, Instant};

use plimsoll_spec::{ErrorCode, Stage};

use crate::remote::{Reply, Target, is_success};
use crate::verdict::figure::{Figure, Unit};
use crate::verdict::{Lane, LaneOutcome, NOT_APPLICABLE, NOT_APPLICABLE_UNDER, Verdict};

/// What one check builds up while it runs; the registry turns it into its result.
pub struct Ctx {
    pub(super) started: Instant,
    failures: Vec<String>,
    /// Every part of the check that could not gather its evidence, in the order found.
    skips: Vec<String>,
    not_applicable: Option<String>,
    /// Parts of the check a fault (`check --fault`) removed the meaning of, each with its reason.
    fault_removed: Vec<String>,
    /// The contract's value in words, as the result shows it.
    pub expected: String,
    /// What was measured in words, as the result shows it.
    pub observed: String,
    /// Request ids, timings and other facts behind the verdict, one line each.
    pub evidence: Vec<String>,
    /// The requests sent so far, for the timeline.
    pub lanes: Vec<Lane>,
    /// Per-trial measurements of a timing check (worst judged, median reported).
    pub trials_ms: Vec<f64>,
    /// What the check measured, kept for a later run's `--baseline` ([`Ctx::figure`]).
    pub figures: Vec<Figure>,
    /// Busy digitize workers when the check started: a check answers only for the capacity it
    /// could have lost itself.
    pub baseline_busy: f64,
    /// The job directories in the target's temp folder when the check started (when the checker
    /// can see it): a check answers only for the files its own requests left
    /// ([`Ctx::temp_left`]).
    pub(super) temp_before: Option<Vec<String>>,
    /// Whether the files already there were noted in the evidence.
    temp_noted: bool,
}

/// How much earlier than its bound a timed answer may come (T5's queue timeout, B1's deadline):
/// the checker's clock starts when it sends, a little before the service's.
pub const EARLY: Duration = Duration::from_millis(5);

impl Ctx {
    /// Requires an answer `took` after its sending to come at `bound` (named `what` in the
    /// failure: "the 4000 ms deadline"), no more than [`EARLY`] before it and no more than
    /// `late` after it.
    pub fn require_on_time(
        &mut self,
        label: &str,
        took: Duration,
        (bound, what): (Duration, &str),
        late: Duration,
    ) {
        self.require(took + EARLY >= bound, || {
            format!("{label}: timed out after {:.0} ms, before {what}", ms(took))
        });
        self.require(took <= bound + late, || {
            format!(
                "{label}: timed out after {:.0} ms, later than {what} and the {} ms tolerance",
                ms(took),
                late.as_millis()
            )
        });
    }

    /// Adds a judged part's words to what the check expected and observed: after the parts
    /// judged before it (`; `), or alone when it is the first (a check that judges the
    /// reference surface and then what any contract declares, such as F2, B2 and B3).
    pub fn add_part(&mut self, (expected, observed): (String, String)) {
        if self.expected.is_empty() && self.observed.is_empty() {
            (self.expected, self.observed) = (expected, observed);
        } else {
            self.expected = format!("{}; {expected}", self.expected);
            self.observed = format!("{}; {observed}", self.observed);
        }
    }

    pub(crate) fn new(baseline_busy: f64) -> Ctx {
        Ctx {
            baseline_busy,
            started: Instant::now(),
            failures: Vec::new(),
            skips: Vec::new(),
            not_applicable: None,
            fault_removed: Vec::new(),
            expected: String::new(),
            observed: String::new(),
            evidence: Vec::new(),
            figures: Vec::new(),
            lanes: Vec::new(),
            trials_ms: Vec::new(),
            temp_before: None,
            temp_noted: false,
        }
    }

    /// The job directories in the target's temp folder that appeared since the check started,
    /// if the checker can see the folder: what this check's requests left. Older ones were left
    /// by an earlier check's requests, whose check judged them; they are noted once, in the
    /// evidence, and not failed again here (blame stays with the clause that leaked them).
    pub fn temp_left(&mut self, t: &Target) -> Option<Vec<String>> {
        let now = t.temp_entries()?;
        let before = self.temp_before.as_deref().unwrap_or_default();
        if !before.is_empty() && !self.temp_noted {
            self.temp_noted = true;
            self.evidence.push(format!(
                "{} temp entr(y/ies) were already there when the check began, left by an earlier check's requests (judged there, not here): {before:?}",
                before.len()
            ));
        }
        Some(now.into_iter().filter(|e| !before.contains(e)).collect())
    }

    /// Records a failure: the check fails whatever else it finds (the messages joined by `; `).
    pub fn fail(&mut self, message: impl Into<String>) {
        self.failures.push(message.into());
    }

    /// Records a failure unless `ok`.
    pub fn require(&mut self, ok: bool, message: impl FnOnce() -> String) -> bool {
        if !ok {
            self.fail(message());
        }
        ok
    }

    /// Requires `reply` to be the contract's answer for `code` (status and body code).
    pub fn require_error(
        &mut self,
        t: &Target,
        label: &str,
        reply: &Reply,
        code: ErrorCode,
    ) -> bool {
        self.require(t.is_error(reply, code), || {
            format!(
                "{label}: expected {} {code}, got {} {}",
                t.status(code),
                reply.status,
                reply.code()
            )
        })
    }

    /// Requires a problem body to name `stages[failed]` as `failed_stage` and exactly the stages
    /// before it as `completed_stages` (B1 and F1).
    pub fn require_stages(
        &mut self,
        label: &str,
        body: &serde_json::Value,
        stages: &[Stage],
        failed: usize,
    ) {
        let stage = stages[failed].as_str();
        self.require(body["failed_stage"] == stage, || {
            format!(
                "{label}: failed_stage {} instead of {stage}",
                body["failed_stage"]
            )
        });
        let before: Vec<&str> = stages[..failed].iter().map(|s| s.as_str()).collect();
        self.require(
            body["completed_stages"] == serde_json::json!(before),
            || {
                format!(
                    "{label}: completed_stages {} instead of {before:?}",
                    body["completed_stages"]
                )
            },
        );
    }

    /// Keeps one sample of a measured figure for a later run's `--baseline`, in ms, where less
    /// is better, as every figure of the checks is (latencies, lateness): trials of one figure
    /// add up under its name.
    pub fn sample(&mut self, name: &str, ms: f64) {
        match self.figures.iter_mut().find(|f| f.name == name) {
            Some(figure) => figure.samples.push(ms),
            None => self.figures.push(Figure::lower(name, Unit::Ms, vec![ms])),
        }
    }

    /// The check could not gather its evidence (a file it was not given, a target that refuses
    /// what the check needs): a skip, which `--strict` turns into a failure. Each part that
    /// skips says why, and the verdict names every reason (once each), so a check with two
    /// parts skipped does not hide the first behind the second.
    pub fn skip(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.skips.contains(&reason) {
            self.skips.push(reason);
        }
    }

    /// The clause cannot apply to the target's effective values or contract (T2 with no queue
    /// places, R2 with one relay worker): the verdict is not applicable, with `reason`, counted
    /// apart from passes, and stays so under `--strict`. Only for a clause made vacuous by what
    /// the target is, never for missing evidence (that is [`Ctx::skip`]).
    pub fn not_applicable(&mut self, reason: impl Into<String>) {
        self.not_applicable = Some(reason.into());
    }

    /// The fault the run goes through (`t`'s) removes the meaning of `part` of the check (`None`:
    /// the whole check): a part is left out and named in the observation, `… ; <part> not
    /// applicable under <fault>: <why>`; the whole check is not applicable, `under <fault>,
    /// <why>`. Only where the fault's own numbers make the
    /// measurement impossible (a body that cannot arrive within its timeout), never for a
    /// bound the fault merely lengthens (that is [`plimsoll_fault::Adjustments`]). Without a
    /// fault it does nothing: a fault-free run has no such part.
    pub fn fault_removes(&mut self, t: &Target, part: Option<&str>, why: impl Into<String>) {
        let Some(fault) = &t.adjustments.fault else {
            return;
        };
        let why = why.into();
        match part {
            Some(part) => {
                let note = format!("{part}{NOT_APPLICABLE_UNDER}{fault}: {why}");
                self.evidence.push(note.clone());
                self.fault_removed.push(note);
            }
            None => self.not_applicable = Some(format!("under {fault}, {why}")),
        }
    }

    /// The verdict so far: failures win over a skip, a skip over not applicable.
    pub(super) fn verdict(&mut self) -> Verdict {
        let skipped = (!self.skips.is_empty()).then(|| std::mem::take(&mut self.skips).join("; "));
        match (skipped, self.failures.is_empty()) {
            (Some(reasons), true) => Verdict::Skip(reasons),
            (_, true) => {
                if let Some(why) = self.not_applicable.take() {
                    self.observed = format!("{NOT_APPLICABLE}{why}");
                    return Verdict::NotApplicable(why);
                }
                if !self.fault_removed.is_empty() {
                    self.observed = format!("{}; {}", self.observed, self.fault_removed.join("; "));
                }
                Verdict::Pass
            }
            (_, false) => Verdict::Fail(self.failures.join("; ")),
        }
    }

    /// `at` in ms since the check started: the timeline's clock.
    pub fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64() * 1000.0
    }

    /// Adds a reply to the timeline. (Its OpenAPI/schema violations are judged by the API
    /// check, so each check fails only for its own clause.)
    pub fn reply(&mut self, t: &Target, label: impl Into<String>, reply: &Reply) {
        let outcome = if is_success(reply.status) {
            LaneOutcome::Ok
        } else if t.is_any_refusal(reply) {
            LaneOutcome::Refused
        } else if t
            .expected
            .errors
            .iter()
            .any(|e| e.code == ErrorCode::Timeout && e.status == reply.status)
        {
            LaneOutcome::TimedOut
        } else {
            LaneOutcome::Failed
        };
        let start = self.ms(reply.sent);
        self.lanes.push(Lane {
            label: label.into(),
            request_id: reply.request_id(t.request_id_header()),
            start_ms: start,
            run_start_ms: reply.timing.map(|(queue, _)| start + queue),
            end_ms: self.ms(reply.sent + reply.elapsed),
            outcome,
            status: Some(reply.status),
            pool: reply.pool.map(|p| p.as_str().to_owned()),
        });
    }

    /// A request the checker abandoned (disconnected) at `end`.
    pub fn cancelled_lane(&mut self, label: impl Into<String>, sent: Instant, end: Instant) {
        self.lanes.push(Lane {
            label: label.into(),
            request_id: None,
            start_ms: self.ms(sent),
            run_start_ms: None,
            end_ms: self.ms(end),
            outcome: LaneOutcome::Cancelled,
            status: None,
            pool: None,
        });
    }
}

/// The worst (largest) value and the median, for trial reports.
pub fn worst_and_median(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let worst = sorted.last().copied().unwrap_or(f64::NAN);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
    (worst, median)
}

/// Milliseconds, as every report writes durations.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_applicable_is_a_verdict_of_its_own_that_says_why_and_failures_still_win() {
        let mut c = Ctx::new(0.0);
        c.not_applicable("queue capacity is 0");
        assert_eq!(
            c.verdict(),
            Verdict::NotApplicable("queue capacity is 0".into())
        );
        assert_eq!(c.observed, "not applicable: queue capacity is 0");
        assert_eq!(
            Verdict::NotApplicable("x".into()).strict(),
            Verdict::NotApplicable("x".into())
        );
        assert!(Verdict::NotApplicable("x".into()).required().is_fail());

        let mut c = Ctx::new(0.0);
        c.not_applicable("x");
        c.fail("broken");
        assert_eq!(c.verdict(), Verdict::Fail("broken".into()));

        let mut c = Ctx::new(0.0);
        c.skip("no log");
        assert_eq!(
            c.verdict().strict(),
            Verdict::Fail("skipped under --strict: no log".into())
        );

        // Two parts skipped: both reasons, in order, each once.
        let mut c = Ctx::new(0.0);
        c.skip("pool a seen full too late");
        c.skip("pool b seen full too late");
        c.skip("pool a seen full too late");
        assert_eq!(
            c.verdict(),
            Verdict::Skip("pool a seen full too late; pool b seen full too late".into())
        );
    }
}
