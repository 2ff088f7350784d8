//! Where T3 puts its two levels: which whole seconds each statistic of the window must round to,
//! and the waits that keep every one of them well inside its second on the client's clock.
//!
//! The client knows the moment a held slot frees only as a bracket: no earlier than the hold's
//! end, no later than the holder's answer. The bracket's width is the pool's *overhead*, the
//! job's own work after the hold and the answer's way back (a few milliseconds on the reference
//! server, 0.1 to 0.3 s for the Python example's). A wait timed from the hold's end (the
//! bracket's early end) is the checker's to choose exactly; the late end is that plus the
//! overhead. So each level puts its early end inside its second far enough that the jitter
//! tolerance fits below it and the overhead and the tolerance fit above it. The overhead is
//! measured first (`calibrate`) to time the retries and the moment the low level's short waits
//! go out.
//!
//! With a timeout of three seconds or more (the contract's own values), the high level's p50 is
//! 2.4 s and more (→ 3 s) and its mean, with two fifths of the window admitted at once, 1.43 s
//! and more (→ 2 s); the low level's p50 is about 0.5 s (→ 1 s), its p90 and max about 2.7 s
//! (→ 3 s) and its mean about 1.5 s (→ 2 s): every statistic told apart sits 0.4 s or more
//! from a boundary, but for an overhead up to 0.45 s that the p50's 2.4 s leaves below 3 s. A
//! two-second timeout (the scaled values) clamps every delay to 1 or 2 s, and then the mean can
//! only be told from the p50 below it: at least 33 of the 64 waits are the p50 or longer, so the
//! mean is at least 0.52 × p50, and no p50 over 1 s leaves both more than 0.32 s from 1 s. There
//! the p50 is 1.3 s less a third of the overhead, and the mean a little over half of that and
//! the overhead (0.7 s for the reference server, 0.76 s for an overhead of 0.2 s): with the
//! tolerance, an overhead up to a third of a second.

use super::*;

/// What the high level's long refusals leave beyond the time the calibration took to fill the
/// pool, before they go out.
pub(super) const FILL_MARGIN: Duration = Duration::from_millis(50);
/// How long the calibration holds every worker: long enough for the checker to see the pool
/// full across a slow network (its gauges are polled, a few round trips).
pub(super) const CALIBRATION_HOLD: Duration = Duration::from_millis(500);
/// The largest overhead the plan adapts to; a slower pool is timed as if it were this one (its
/// levels may then round alike, and the check says so).
pub(super) const MAX_OVERHEAD: Duration = Duration::from_millis(400);
/// What a holder leaves before its deadline beyond the overhead, when that is the larger.
pub(super) const HOLD_MARGIN: Duration = Duration::from_millis(100);
/// What a retry sent after the advertised delay has beside the slot's freeing (the bracket's
/// width is already taken off the hold).
pub(super) const RETRY_SLACK: Duration = Duration::from_millis(150);
/// The low level's short waits, on the client's clock.
pub(super) const LOW_WAIT: Duration = Duration::from_millis(500);
/// How many ranks the p50 keeps from the boundary between the short and the long waits.
pub(super) const RANK_MARGIN: usize = 2;
/// Refusals sent beyond what the window keeps (the oldest fall out of it).
pub(super) const SPARE: usize = 2;

/// The whole seconds the high level's p50 rounds to; the low level's rounds to 1.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Plan {
    /// p50 → 3 s, mean → 2 s; low level: p50 → 1 s, p90, max → 3 s, mean → 2 s.
    Three,
    /// p50 → 2 s, mean → 1 s; low level: p50 → 1 s, p90, max → 2 s (the timeout's cap).
    Two,
}

impl Plan {
    /// The plan `pool`'s values allow: the timeout must let Retry-After reach the high level's
    /// seconds and leave the holders room for its wait; None when even two seconds do not fit.
    pub(super) fn for_pool(t: &Target, pool: Pool) -> Option<Plan> {
        let (cap, deadline) = (t.max_retry_after_s(pool), t.deadline(pool));
        [Plan::Three, Plan::Two].into_iter().find(|p| {
            cap >= p.seconds() && deadline >= FILL + p.high_wait(Duration::ZERO) + DEADLINE_MARGIN
        })
    }

    /// What the high level's p50 rounds up to.
    pub(super) fn seconds(self) -> u64 {
        match self {
            Plan::Three => 3,
            Plan::Two => 2,
        }
    }

    /// The high level's long waits until the holds end (the bracket's early end), for an
    /// overhead `w`. Three: the jitter and 0.25 s above 2 s, the overhead and the jitter below
    /// 3 s. Two: the p50's early end and the mean's late end (34/64 of the p50's, plus `w`)
    /// equally far inside their seconds with the jitter: p50 − jitter − 1 s = 1 s − jitter −
    /// 34/64 × (p50 + w), so p50 = 1.30 s − 0.35 × w (at least 1.2 s).
    pub(super) fn high_wait(self, w: Duration) -> Duration {
        match self {
            Plan::Three => Duration::from_millis(2400),
            Plan::Two => Duration::from_millis(1300)
                .saturating_sub(w.mul_f64(0.35))
                .max(Duration::from_millis(1200)),
        }
    }

    /// How many of the high window's waits are long; the rest are admitted at once (0). Three:
    /// three fifths, so the mean is about 1.5 s; Two: just over half, the mean as low as the
    /// p50 allows.
    pub(super) fn long(self, window: usize) -> usize {
        match self {
            Plan::Three => window * 3 / 5,
            Plan::Two => window.div_ceil(2) + RANK_MARGIN,
        }
        .min(window)
    }
}

/// What the calibration measured of a pool.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    /// How long after its hold a held request's answer came (the bracket's width).
    pub(super) overhead: Duration,
    /// How long the checker took to see the pool full.
    pub(super) fill: Duration,
}

/// How long the holders of the high level's saturation hold: the long refusals, sent once the
/// pool is full (as long as the calibration took, and a margin), wait `high_wait` until the
/// holds end; the holders and the queued requests still finish before their deadline.
pub(super) fn fill_hold(t: &Target, pool: Pool, plan: Plan, timing: Timing) -> Duration {
    let high = plan.high_wait(timing.overhead);
    (FILL.max(timing.fill + FILL_MARGIN) + high).min(room(t, pool, timing.overhead))
}

/// How long a holder may hold: its answer comes `w` after the hold, and within that the job's
/// own work must end before its deadline, with `DEADLINE_MARGIN` to spare or, for a large
/// overhead, `HOLD_MARGIN` beyond it.
fn room(t: &Target, pool: Pool, w: Duration) -> Duration {
    t.deadline(pool)
        .saturating_sub(DEADLINE_MARGIN.max(w + HOLD_MARGIN))
}

/// How long the holders of a reading saturation hold: the slot frees (`w` after the hold)
/// `RETRY_SLACK` before the `n` seconds a level advertises at the least, so a retry after them
/// finds it free; within the deadline as above.
pub(super) fn read_hold(t: &Target, pool: Pool, n: u64, w: Duration) -> Duration {
    Duration::from_secs(n)
        .saturating_sub(w + RETRY_SLACK)
        .min(room(t, pool, w))
        .max(FILL)
}

/// How long after its hold a held request of `pool` frees its slot, as the client sees it (the
/// job's work after the hold and the answer's way back), and how long filling the pool takes:
/// every worker held briefly, once.
pub(super) async fn calibrate(t: &Arc<Target>, c: &mut Ctx, pool: Pool) -> Timing {
    idle(t, c, pool).await;
    let s = saturate(t, pool, CALIBRATION_HOLD).await;
    // A pool not seen full before the holds ended says only that filling took that long.
    let fill = (s.ready - s.sent).min(CALIBRATION_HOLD);
    let (freed, _) = finish(t, c, &tag(pool, "calibrate"), s).await;
    let w = freed.map_or(Duration::ZERO, |f| f.latest - f.earliest);
    c.evidence.push(format!(
        "{pool}: the pool was seen full {:.0} ms after its holders went out, and a held request's answer came {:.0} ms after its hold (the levels are timed on both{})",
        ms(fill),
        ms(w),
        if w > MAX_OVERHEAD {
            format!(", as if {:.0} ms", ms(MAX_OVERHEAD))
        } else {
            String::new()
        }
    ));
    Timing {
        overhead: w.min(MAX_OVERHEAD),
        fill,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::throughput::t3::levels::Other;

    const MS: fn(u64) -> Duration = Duration::from_millis;
    const JITTER: Duration = Duration::from_millis(150);

    /// A window as a plan lays it out: zeros, the short waits, the long ones; sorted.
    fn window(zeros: usize, short: (usize, Duration), long: (usize, Duration)) -> Vec<Duration> {
        let mut w = vec![Duration::ZERO; zeros];
        w.extend(std::iter::repeat_n(short.1, short.0));
        w.extend(std::iter::repeat_n(long.1, long.0));
        assert_eq!(w.len(), 64);
        w.sort_unstable();
        w
    }

    fn p50(w: &[Duration]) -> Duration {
        w[w.len().div_ceil(2) - 1]
    }

    /// `stat` on the early clock (`shift` earlier for the long waits) and on the late one.
    fn rounds(early: Duration, late: Duration, cap: u64) -> (u64, u64) {
        (
            ceil_s(early.saturating_sub(JITTER)).clamp(1, cap),
            ceil_s(late + JITTER).clamp(1, cap),
        )
    }

    /// Every statistic told apart stays in its second with the bracket (`w`) and the jitter on
    /// both sides, for any overhead up to a third of a second.
    #[test]
    fn the_plans_keep_every_statistic_inside_its_second() {
        for (plan, cap) in [(Plan::Three, 60), (Plan::Two, 2)] {
            for w in [0, 50, 150, 250, 330].map(MS) {
                let n = plan.seconds();
                // The high level: `long` waits of high_wait (early), zeros for the rest.
                let long = plan.long(64);
                let late = window(64 - long, (0, MS(0)), (long, plan.high_wait(w) + w));
                let early = window(64 - long, (0, MS(0)), (long, plan.high_wait(w)));
                assert_eq!(
                    rounds(p50(&early), p50(&late), cap),
                    (n, n),
                    "{plan:?} {w:?}"
                );
                let mean = (Other::Mean.of(&early), Other::Mean.of(&late));
                assert_eq!(
                    rounds(mean.0, mean.1, cap),
                    (n - 1, n - 1),
                    "{plan:?} {w:?}"
                );
                // The low level: 34 short (5 of them zeros), 30 long waits that end when the
                // read hold's slot frees, n − slack after the probe (sent about 50 ms late).
                let long = n * 1000 - (RETRY_SLACK + MS(50)).as_millis() as u64;
                let late = window(5, (29, LOW_WAIT + w / 2), (30, MS(long)));
                let early = window(5, (29, LOW_WAIT.saturating_sub(w)), (30, MS(long) - w));
                assert_eq!(
                    rounds(p50(&early), p50(&late), cap),
                    (1, 1),
                    "{plan:?} {w:?}"
                );
                for other in [Other::P90, Other::Max] {
                    let (x, y) = (other.of(&early), other.of(&late));
                    assert_eq!(rounds(x, y, cap), (n, n), "{plan:?} {other:?} {w:?}");
                }
                if plan == Plan::Three {
                    let mean = (Other::Mean.of(&early), Other::Mean.of(&late));
                    assert_eq!(rounds(mean.0, mean.1, cap), (2, 2), "low mean {w:?}");
                }
            }
        }
    }

    #[test]
    fn the_distances_from_the_boundaries_are_what_the_docs_say() {
        // Three: the p50 2.4 s, the mean 1.43 s, with the reference server's overhead.
        let w = MS(10);
        let mean = (Plan::Three.high_wait(w) + w).mul_f64(38.0 / 64.0);
        assert!(mean >= MS(1400) && mean <= MS(1600), "{mean:?}");
        // Two: the p50 1.3 s, the mean 0.7 s; with a 0.2 s overhead 1.23 s and 0.76 s.
        let mean = (Plan::Two.high_wait(w) + w).mul_f64(34.0 / 64.0);
        assert!(mean <= MS(700), "{mean:?}");
        let w = MS(200);
        let p50 = Plan::Two.high_wait(w);
        let mean = (p50 + w).mul_f64(34.0 / 64.0);
        assert!(p50 >= MS(1230) && mean <= MS(760), "{p50:?} {mean:?}");
    }
}
