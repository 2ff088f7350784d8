//! The estimator's levels: a window of scripted refusals and requests admitted at once, what the
//! checker expects the advertised delay to be from its own observations (and what the other
//! order statistics of the same window would advertise), and the judgement of a level.

use super::*;

/// The order statistics of the window the contract's estimator must be told apart from: a
/// server advertising one of these instead passes a window of nearly equal waits.
const OTHERS: [Other; 3] = [Other::Mean, Other::P90, Other::Max];

/// An order statistic of the window other than the contract's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Other {
    Mean,
    P90,
    Max,
}

impl Other {
    pub(super) fn name(self) -> &'static str {
        match self {
            Other::Mean => "mean",
            Other::P90 => "p90",
            Other::Max => "max",
        }
    }

    /// The statistic of `sorted` (ascending, not empty).
    pub(super) fn of(self, sorted: &[Duration]) -> Duration {
        match self {
            Other::Mean => {
                sorted.iter().sum::<Duration>() / u32::try_from(sorted.len()).unwrap_or(u32::MAX)
            }
            Other::P90 => sorted[(sorted.len() * 90).div_ceil(100).max(1) - 1],
            Other::Max => sorted[sorted.len() - 1],
        }
    }
}

/// What another statistic of the observed window would advertise.
pub(super) struct Alternative {
    pub(super) other: Other,
    /// Its value if the slot freed when the client learnt of it.
    pub(super) value: Duration,
    /// The delays it would advertise, jitter and the bracket included.
    pub(super) rounds_to: RangeInclusive<u64>,
}

/// What the estimator should say after a window of scripted refusals, by the checker's model.
pub(super) struct Expectation {
    pub(super) refusals: usize,
    /// The window's p50 if the slot freed as early as it could have.
    pub(super) p50_early: Duration,
    /// The window's p50 if it freed when the client learnt of it.
    pub(super) p50: Duration,
    pub(super) accepted: RangeInclusive<u64>,
    pub(super) advertised: Option<u64>,
    /// The other statistics of the same window, and what they would advertise.
    pub(super) alternatives: Vec<Alternative>,
}

/// Sends `count` requests at `at`, into a saturated `pool`; each must be refused at once.
/// Returns when each refused one was sent.
pub(super) async fn fire(
    t: &Arc<Target>,
    c: &mut Ctx,
    (pool, count): (Pool, usize),
    (label, at): (&str, Instant),
    latencies: &mut Vec<f64>,
) -> Vec<Instant> {
    let window = count;
    sleep_until(at).await;
    // All at once, in waves that fit the connection cap beside the requests both
    // pools hold (an adopted MAX_CONNECTIONS can be smaller than the window): a refusal is
    // immediate, so the waves follow each other within milliseconds.
    let mut replies = Vec::with_capacity(window);
    let room = crowd_room(t);
    for wave in waves(window, room) {
        let tasks: Vec<_> = (0..wave).map(|_| spawn_in(t, pool, None)).collect();
        replies.extend(join_all(tasks).await);
    }
    let mut refused = Vec::new();
    let mut not_refused = Vec::new();
    let mut unanswered = 0;
    for (i, r) in replies.into_iter().enumerate() {
        let name = format!("{label}-{i}");
        match r {
            Ok(reply) if t.is_error(&reply, ErrorCode::Overloaded) => {
                latencies.push(ms(reply.elapsed));
                refused.push(reply.sent);
                // The first few judged in full (the header), the rest by status and code.
                if refused.len() <= 3 {
                    judge_refusal(t, c, pool, &name, &reply);
                } else {
                    c.reply(t, name, &reply);
                }
            }
            Ok(reply) => {
                c.reply(t, &name, &reply);
                not_refused.push(format!("{name}: {} {}", reply.status, reply.code()));
            }
            Err(e) => {
                unanswered += 1;
                not_refused.push(format!("{name}: {e}"));
            }
        }
    }
    let cap = t.expected.connection_cap();
    fail_many(
        c,
        &format!(
            "{} of {window} requests sent into a full {pool} pool were not answered {} {}{}",
            not_refused.len(),
            t.status(ErrorCode::Overloaded),
            ErrorCode::Overloaded,
            crowd_note(unanswered, room, (held_by_pools(t), cap))
        ),
        &not_refused,
    );
    refused.sort();
    refused
}

/// The window the server should hold at its next refusal, from what the client saw: the
/// scripted refusals (each waited from its sending until the first slot freed), then the queued
/// requests' waits (recorded when they started, at that release too), then `zeros` requests
/// admitted at once; its last `window_samples`, sorted.
struct Window<'a> {
    refused: &'a [Instant],
    queued: &'a [Reply],
    zeros: usize,
}

impl Window<'_> {
    fn at(&self, window: usize, freed: Instant) -> Vec<Duration> {
        let mut model: Vec<Duration> = self
            .refused
            .iter()
            .map(|&at| freed.saturating_duration_since(at))
            .collect();
        model.extend(
            self.queued
                .iter()
                .map(|r| freed.saturating_duration_since(r.sent)),
        );
        model.extend(std::iter::repeat_n(Duration::ZERO, self.zeros));
        let mut kept = model.split_off(model.len().saturating_sub(window));
        kept.sort_unstable();
        kept
    }
}

/// The advertised delay is the window's p50 rounded up, within the jitter tolerance around the
/// bracket the client has for the moment the slot freed; each other statistic's delays are
/// rounded the same way.
pub(super) fn expectation(
    t: &Target,
    pool: Pool,
    (refused, queued): (&[Instant], &[Reply]),
    freed: Freed,
    zeros: usize,
) -> Expectation {
    let t3 = t.expected.retry_after();
    let model = Window {
        refused,
        queued,
        zeros,
    };
    let window = t3.window_samples as usize;
    let (early, late) = (
        model.at(window, freed.earliest),
        model.at(window, freed.latest),
    );
    let jitter = Duration::from_millis(t.expected.tolerances.retry_after_jitter_ms);
    let (lo, hi) = (t3.min_seconds, t.max_retry_after_s(pool));
    let rounds_to = |a: Duration, b: Duration| {
        ceil_s(a.saturating_sub(jitter)).clamp(lo, hi)..=ceil_s(b + jitter).clamp(lo, hi)
    };
    let p50 = |w: &[Duration]| t3.estimator.of(w.iter().copied()).unwrap_or_default();
    let (p50_early, p50_late) = (p50(&early), p50(&late));
    let alternatives = if late.is_empty() {
        Vec::new()
    } else {
        OTHERS
            .iter()
            .map(|&other| Alternative {
                other,
                value: other.of(&late),
                rounds_to: rounds_to(other.of(&early), other.of(&late)),
            })
            .collect()
    };
    Expectation {
        refusals: refused.len(),
        p50_early,
        p50: p50_late,
        accepted: rounds_to(p50_early, p50_late),
        advertised: None,
        alternatives,
    }
}

impl Expectation {
    /// `0.55 s`, or `0.50–0.62 s` when the client could only bracket the moment.
    pub(super) fn p50_text(&self) -> String {
        let (a, b) = (self.p50_early.as_secs_f64(), self.p50.as_secs_f64());
        if b - a < 0.005 {
            format!("{b:.2} s")
        } else {
            format!("{a:.2}–{b:.2} s")
        }
    }

    /// Whether a server advertising `other` instead of the p50 fails this level: every delay
    /// `other` rounds to lies outside the ones the level accepts.
    pub(super) fn tells_apart(&self, other: Other) -> bool {
        self.alternatives.iter().any(|a| {
            a.other == other
                && (a.rounds_to.end() < self.accepted.start()
                    || a.rounds_to.start() > self.accepted.end())
        })
    }

    /// `mean 0.78 s → 1 s, p90 1.31 s → 2 s, max 1.52 s → 2 s`.
    pub(super) fn alternatives_text(&self) -> String {
        let shown: Vec<String> = self.alternatives.iter().map(Alternative::text).collect();
        shown.join(", ")
    }

    /// `mean 0.78 s → 1 s`, for one of the other statistics.
    pub(super) fn alternative_text(&self, other: Other) -> String {
        let shown = self.alternatives.iter().find(|a| a.other == other);
        shown.map_or_else(|| format!("{} unknown", other.name()), Alternative::text)
    }
}

impl Alternative {
    /// `p90 1.31 s → 2 s`: the statistic, its value on the late clock, the delays it rounds to.
    fn text(&self) -> String {
        let (x, y) = (self.rounds_to.start(), self.rounds_to.end());
        let secs = if x == y {
            format!("{x}")
        } else {
            format!("{x}..={y}")
        };
        format!(
            "{} {:.2} s → {secs} s",
            self.other.name(),
            self.value.as_secs_f64()
        )
    }
}

/// The other statistics neither level tells apart from the p50 (a server advertising one of
/// them would pass).
pub(super) fn untold(levels: &[&Expectation]) -> Vec<&'static str> {
    OTHERS
        .iter()
        .filter(|&&o| !levels.iter().any(|l| l.tells_apart(o)))
        .map(|o| o.name())
        .collect()
}

/// Judges the advertised delay of a level against the checker's expectation.
pub(super) fn judge_level(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    e: &mut Expectation,
    probe: Option<(Instant, u64)>,
) {
    let t3 = t.expected.retry_after();
    let header = &t3.header;
    let Some((_, n)) = probe else {
        return;
    };
    e.advertised = Some(n);
    c.require(e.accepted.contains(&n), || {
        format!(
            "{label}: {header} {n} s, but the {} of the queue waits the checker observed was {} (±{} ms → {}..={} s; the same window's {})",
            t3.estimator,
            e.p50_text(),
            t.expected.tolerances.retry_after_jitter_ms,
            e.accepted.start(),
            e.accepted.end(),
            e.alternatives_text()
        )
    });
}

/// How many requests the checker may have open at once beside what both pools hold: the
/// connection cap less every worker and queue place and a few for the checker's probes.
fn crowd_room(t: &Target) -> usize {
    let cap = t.expected.connection_cap();
    cap.saturating_sub(held_by_pools(t) + 4).max(1)
}

/// Every worker and queue place of both job pools.
fn held_by_pools(t: &Target) -> usize {
    [Pool::Digitize, Pool::Export]
        .into_iter()
        .map(|p| t.workers(p) + t.queue_capacity(p))
        .sum()
}

/// When some of a crowd got no answer at all: the crowd was sent within the connection cap, so
/// the cap is not what cut them off; a full pool owes each an immediate refusal (T3).
fn crowd_note(unanswered: usize, room: usize, (held, cap): (usize, usize)) -> String {
    if unanswered == 0 {
        return String::new();
    }
    format!(
        " ({unanswered} got no answer at all, though the checker sent them in waves of at most {room}, so that with the {held} requests the pools hold they stay within the {cap}-connection cap it judges by (B4): a full pool owes each an immediate refusal, T3)"
    )
}

/// `total` split into waves of at most `room`.
pub(super) fn waves(total: usize, room: usize) -> Vec<usize> {
    crate::checks::pieces(total as u64, room as u64)
        .into_iter()
        .map(|n| n as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_crowd_cut_off_says_it_was_sent_within_the_cap() {
        assert_eq!(crowd_note(0, 50, (8, 64)), "");
        let note = crowd_note(16, 52, (8, 64));
        assert!(note.contains("waves of at most 52"), "{note}");
        assert!(note.contains("within the 64-connection cap"), "{note}");
        assert!(note.ends_with("T3)"), "{note}");
    }

    #[test]
    fn the_other_statistics_take_nearest_ranks() {
        let w: Vec<Duration> = (1..=10).map(Duration::from_secs).collect();
        assert_eq!(Other::P90.of(&w), Duration::from_secs(9));
        assert_eq!(Other::Max.of(&w), Duration::from_secs(10));
        assert_eq!(Other::Mean.of(&w), MS(5500));
    }

    #[test]
    fn a_crowd_is_split_into_waves_that_fit_the_room() {
        assert_eq!(waves(64, 500), vec![64]);
        assert_eq!(waves(64, 50), vec![50, 14]);
        assert_eq!(waves(64, 32), vec![32, 32]);
        assert_eq!(waves(3, 0), vec![1, 1, 1]);
    }
}
