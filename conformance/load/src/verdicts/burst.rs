//! `L-burst`: waves of simultaneous requests, admission exact in every wave.

use std::collections::BTreeMap;

use plimsoll_conformance::verdict::{CheckResult, Verdict};

use super::{Expectations, lanes, who};
use crate::run::Attempt;

/// Per wave: exactly workers + queue admitted, the rest refused within `refusal_ms`, each
/// refusal with a valid Retry-After.
pub fn burst(
    expect: &Expectations,
    attempts: &[Attempt],
    per_wave: usize,
    hold_ms: u64,
    refusal_ms: u64,
    drain_failed: bool,
) -> CheckResult {
    let admit = expect.admissible();
    let mut waves: BTreeMap<usize, Vec<&Attempt>> = BTreeMap::new();
    for a in attempts {
        waves.entry(a.wave).or_default().push(a);
    }
    let mut tally = WaveTally::default();
    for (w, list) in &waves {
        tally.wave(expect, *w, list, per_wave, refusal_ms);
    }
    let mut problems = tally.problems;
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
    let mut r = expect.result(
        "",
        "Burst: exactly workers + queue admitted per wave",
        format!(
            "{admit} of {per_wave} admitted per wave (hold {hold_ms} ms), the rest {} within {refusal_ms} ms{}",
            expect.refusal.as_deref().unwrap_or("refused"),
            expect.hint.as_ref().map_or(String::new(), |h| format!(" with {}", h.header))
        ),
        format!(
            "admitted per wave {}; slowest refusal {:.1} ms",
            tally.observed.join(", "),
            tally.slowest_refusal
        ),
        verdict,
    );
    r.evidence = problems.into_iter().take(30).collect();
    r.timeline = lanes(attempts, 0.0, usize::MAX, expect);
    r
}

/// What the waves showed, wave by wave: the problems in wave order (the first is the
/// verdict's), each wave's admitted count, and the slowest refusal.
#[derive(Default)]
struct WaveTally {
    problems: Vec<String>,
    /// `admitted/recorded`, per wave.
    observed: Vec<String>,
    slowest_refusal: f64,
}

impl WaveTally {
    /// Wave `w` (0-based): every request recorded, exactly `admit` admitted, the rest fast
    /// refusals with a valid Retry-After.
    fn wave(
        &mut self,
        expect: &Expectations,
        w: usize,
        list: &[&Attempt],
        per_wave: usize,
        refusal_ms: u64,
    ) {
        let admit = expect.admissible();
        let ok = list.iter().filter(|a| expect.is_ok(a)).count();
        let refused: Vec<&&Attempt> = list.iter().filter(|a| expect.is_refusal(a)).collect();
        let other = list.len() - ok - refused.len();
        self.observed.push(format!("{ok}/{}", list.len()));
        let n = w + 1;
        if list.len() != per_wave {
            self.problems.push(format!(
                "wave {n}: {} requests recorded, {per_wave} sent",
                list.len()
            ));
        }
        if ok != admit {
            self.problems
                .push(format!("wave {n}: {ok} admitted, expected exactly {admit}"));
        }
        if other > 0 {
            self.problems.push(format!(
                "wave {n}: {other} answer(s) neither {} nor a refusal",
                expect.ok_status
            ));
        }
        for r in &refused {
            self.slowest_refusal = self.slowest_refusal.max(r.latency_ms);
            if r.latency_ms > refusal_ms as f64 {
                self.problems.push(format!(
                    "wave {n}: {} refused after {:.0} ms",
                    who(r),
                    r.latency_ms
                ));
            }
            if let Some(p) = expect.retry_after_problem(r) {
                self.problems.push(format!("wave {n}: {}: {p}", who(r)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{expect, wave};
    use super::*;

    #[test]
    fn burst_passes_only_with_exact_admission() {
        let good: Vec<Attempt> = (0..3).flat_map(|w| wave(w, 4, 16)).collect();
        assert_eq!(
            burst(&expect(), &good, 16, 300, 100, false).verdict,
            Verdict::Pass
        );
        let one_more: Vec<Attempt> = (0..3)
            .flat_map(|w| wave(w, if w == 1 { 5 } else { 4 }, 16))
            .collect();
        assert!(
            burst(&expect(), &one_more, 16, 300, 100, false)
                .verdict
                .is_fail()
        );
        let mut slow = wave(0, 4, 16);
        slow[10].latency_ms = 250.0;
        assert!(
            burst(&expect(), &slow, 16, 300, 100, false)
                .verdict
                .is_fail()
        );
        let mut no_retry = wave(0, 4, 16);
        no_retry[10].retry_after = Some("Wed, 21 Oct 2015 07:28:00 GMT".into());
        assert!(
            burst(&expect(), &no_retry, 16, 300, 100, false)
                .verdict
                .is_fail()
        );
    }
}
