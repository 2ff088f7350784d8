//! R4: overflow queues: more than N at once all complete, never more than N running, FIFO.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::ClauseId;

use super::client::{self, held_batch, nonce, relay_workers, round};
use super::frames::MAX_QUOTED;
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::Target;

/// Each request's hold.
const WAVE_MS: u64 = 300;

/// R4's entry in the check registry: the evidence the docs print, and `r4`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::R4,
    "{overflow_factor} x N held requests sent at once (N relay workers): all are answered, \
     neither the count of running requests (at the checker's upstream, or the busy gauge) nor \
     the response times (each request ran for its hold before it was answered) ever show more \
     than N running, and completions — and, at the checker's upstream, arrivals — come in waves \
     of N in send order (FIFO start).",
    |t, c| Box::pin(r4(t, c)),
)
.covers(&["relay-pool"]);

/// The most run intervals `[done - hold, done]` that overlap, each trimmed by the slack at both
/// ends (times in ms since sending).
fn max_overlap(done_ms: impl Iterator<Item = f64>, hold_ms: f64, slack_ms: f64) -> usize {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for end in done_ms {
        edges.push((end - hold_ms + slack_ms, 1));
        edges.push((end - slack_ms, -1));
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut overlap) = (0i32, 0i32);
    for (_, d) in &edges {
        now += d;
        overlap = overlap.max(now);
    }
    overlap.max(0) as usize
}

async fn r4(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t).max(1);
    let factor = t.expected.clauses().r4.value.overflow_factor.max(1) as usize;
    let total = factor * n;
    c.expected = format!(
        "{total} ({factor} x {n}) simultaneous requests held {WAVE_MS} ms: all answered, at most {n} at once, started in send order ({factor} waves of {n})"
    );
    let tag = nonce();
    let requests = held_batch(t, &format!("r4-{tag:x}"), total, WAVE_MS);
    let limit = Duration::from_millis(WAVE_MS * (factor as u64 + 1)) + Duration::from_secs(1);
    let Some((ex, samples)) = round(t, c, &requests, limit, true, "overflow").await else {
        return;
    };
    let origin = ex
        .sent
        .first()
        .map(|(_, at)| *at)
        .unwrap_or_else(Instant::now);
    let since = |at: &Instant| ms(at.saturating_duration_since(origin));
    let slack = timing_slack(t, c);
    let overlap =
        slack.map(|slack| max_overlap(ex.done.values().map(since), WAVE_MS as f64, slack));
    // FIFO: sorted by completion, the k-th group of n is the k-th n sent.
    let position = ex.send_positions();
    let mut out_of_wave = out_of_wave(&ex.order, &position, n, "finished");
    let wave_ends: Vec<String> = ex
        .order
        .chunks(n)
        .filter_map(|wave| wave.last().and_then(|id| ex.done.get(id)))
        .map(|last| format!("{:.0}", since(last)))
        .collect();
    c.evidence.push(format!(
        "waves ended at {} ms after sending",
        wave_ends.join(", ")
    ));
    c.evidence.push(samples.describe());
    // At the checker's upstream the start order is seen directly: the k-th n to arrive are the
    // k-th n sent.
    if let Some(visits) = t.local.visits_since(ex.began.unwrap_or(origin)) {
        let arrivals: Vec<String> = visits.into_iter().map(|v| v.id).collect();
        out_of_wave.extend(out_of_wave_at(&arrivals, &position, n));
    }
    let by_timing = overlap.map_or(String::new(), |o| format!(" and {o} at once by timing"));
    c.observed = format!(
        "{}/{total} answered; {} max {}{by_timing} (limit {n}); {} out of FIFO start order",
        ex.done.len(),
        samples.what(),
        samples.busy_max,
        out_of_wave.len()
    );
    if let Some(why) = samples.missing() {
        return c.fail(why);
    }
    c.require(samples.busy_max <= n as f64, || {
        format!(
            "{} reached {} with {total} requests in flight; the limit is {n}",
            samples.what(),
            samples.busy_max
        )
    });
    if let Some(overlap) = overlap {
        c.require(overlap <= n, || {
            format!("response timing shows {overlap} requests running at once (each held {WAVE_MS} ms); the limit is {n}")
        });
    }
    if !out_of_wave.is_empty() && ex.missing().is_empty() {
        let shown: Vec<&str> = out_of_wave
            .iter()
            .map(String::as_str)
            .take(MAX_QUOTED)
            .collect();
        c.fail(format!("start order is not FIFO: {}", shown.join(", ")));
    }
}

/// How much of each end of a request's run, as its answer's time places it, the overlap leaves
/// out ([`timing_slack`] over a hold). None when that leaves nothing of a hold: the fault
/// removes the count by timing, and the evidence says so.
fn timing_slack(t: &Target, c: &mut Ctx) -> Option<f64> {
    client::timing_slack(t, WAVE_MS)
        .map_err(|why| {
            let part = "the count of running requests by response timing";
            c.fault_removes(t, Some(part), why);
        })
        .ok()
}

/// The ids of `order` not in the wave of n their send position puts them in, described.
fn out_of_wave(
    order: &[String],
    position: &std::collections::HashMap<&str, usize>,
    n: usize,
    verb: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for (w, wave) in order.chunks(n).enumerate() {
        for id in wave {
            if let Some(&p) = position.get(id.as_str())
                && p / n != w
            {
                out.push(format!("#{p} {verb} in wave {w} (expected {})", p / n));
            }
        }
    }
    out
}

/// [`out_of_wave`] for arrivals at the checker's upstream.
fn out_of_wave_at(
    arrivals: &[String],
    position: &std::collections::HashMap<&str, usize>,
    n: usize,
) -> Vec<String> {
    out_of_wave(arrivals, position, n, "reached the upstream")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_intervals_running_together() {
        // Two waves of two, 300 ms holds: never more than two at once.
        let ends = [300.0, 305.0, 600.0, 604.0];
        assert_eq!(max_overlap(ends.into_iter(), 300.0, 30.0), 2);
        // All four ending together ran together.
        assert_eq!(max_overlap([300.0; 4].into_iter(), 300.0, 30.0), 4);
    }
}
