//! The estimator's levels: a window of scripted refusals, what the checker expects the
//! advertised delay to be from its own observations, and the judgement of a level.

use super::*;

/// What the estimator should say after a window of scripted refusals, by the checker's model.
pub(super) struct Expectation {
    pub(super) refusals: usize,
    /// The window's p50 if the slot freed as early as it could have.
    pub(super) p50_early: Duration,
    /// The window's p50 if it freed when the client learnt of it.
    pub(super) p50: Duration,
    pub(super) accepted: RangeInclusive<u64>,
    pub(super) advertised: Option<u64>,
}

/// Sends a window's worth of requests at `at`, into a saturated pool; each must be refused at
/// once. Returns when each refused one was sent.
pub(super) async fn fire(
    t: &Arc<Target>,
    c: &mut Ctx,
    label: &str,
    at: Instant,
    latencies: &mut Vec<f64>,
) -> Vec<Instant> {
    let pool = Pool::Digitize;
    let window = t.expected.clauses.t3.value.window_samples as usize;
    sleep_until(at).await;
    // A window's worth at once, in waves that fit the connection cap beside the requests both
    // pools hold (an adopted MAX_CONNECTIONS can be smaller than the window): a refusal is
    // immediate, so the waves follow each other within milliseconds.
    let mut replies = Vec::with_capacity(window);
    for wave in waves(window, crowd_room(t)) {
        let tasks: Vec<_> = (0..wave).map(|_| spawn_in(t, pool, None)).collect();
        replies.extend(join_all(tasks).await);
    }
    let mut refused = Vec::new();
    let mut not_refused = Vec::new();
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
            Err(e) => not_refused.push(format!("{name}: {e}")),
        }
    }
    fail_many(
        c,
        &format!(
            "{} of {window} requests sent into a full pool were not answered {} {}",
            not_refused.len(),
            t.status(ErrorCode::Overloaded),
            ErrorCode::Overloaded
        ),
        &not_refused,
    );
    refused.sort();
    refused
}

/// The window the server should hold at its next refusal, from what the client saw: the
/// scripted refusals (each waited from its sending until the first slot freed), then the queued
/// requests' waits (recorded when they started, at that release too), then `zeros` requests
/// admitted at once. The advertised delay is its p50 rounded up, within the jitter tolerance
/// around the bracket the client has for the moment the slot freed.
pub(super) fn expectation(
    t: &Target,
    refused: &[Instant],
    queued: &[Reply],
    freed: Freed,
    zeros: usize,
) -> Expectation {
    let t3 = &t.expected.clauses.t3.value;
    let window = t3.window_samples as usize;
    let p50_at = |freed: Instant| {
        let mut model: Vec<Duration> = refused
            .iter()
            .map(|&at| freed.saturating_duration_since(at))
            .collect();
        model.extend(
            queued
                .iter()
                .map(|r| freed.saturating_duration_since(r.sent)),
        );
        model.extend(std::iter::repeat_n(Duration::ZERO, zeros));
        let keep = model.len().saturating_sub(window);
        t3.estimator
            .of(model[keep..].iter().copied())
            .unwrap_or_default()
    };
    let (p50_early, p50) = (p50_at(freed.earliest), p50_at(freed.latest));
    let jitter = Duration::from_millis(t.expected.tolerances.retry_after_jitter_ms);
    let (lo, hi) = (t3.min_seconds, t.max_retry_after_s(Pool::Digitize));
    Expectation {
        refusals: refused.len(),
        p50_early,
        p50,
        accepted: ceil_s(p50_early.saturating_sub(jitter)).clamp(lo, hi)
            ..=ceil_s(p50 + jitter).clamp(lo, hi),
        advertised: None,
    }
}

/// How long the holders of a reading saturation hold: until just before the lowest delay the
/// level accepts, so an honest delay finds a free slot and a shorter one does not.
pub(super) fn read_hold(e: &Expectation) -> Duration {
    e.p50_early
        .min(Duration::from_secs(*e.accepted.start()))
        .saturating_sub(Duration::from_millis(50))
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
}

/// Judges the advertised delay of a level against the checker's expectation.
pub(super) fn judge_level(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    e: &mut Expectation,
    probe: Option<(Instant, u64)>,
) {
    let t3 = &t.expected.clauses.t3.value;
    let header = &t3.retry_after_header;
    let Some((_, n)) = probe else {
        return;
    };
    e.advertised = Some(n);
    c.require(e.accepted.contains(&n), || {
        format!(
            "{label}: {header} {n} s, but the {} of the queue waits the checker observed was {} (±{} ms → {}..={} s)",
            t3.estimator,
            e.p50_text(),
            t.expected.tolerances.retry_after_jitter_ms,
            e.accepted.start(),
            e.accepted.end()
        )
    });
}

/// How many requests the checker may have open at once beside what both pools hold: the
/// connection cap less every worker and queue place and a few for the checker's probes.
fn crowd_room(t: &Target) -> usize {
    let held: usize = [Pool::Digitize, Pool::Export]
        .into_iter()
        .map(|p| t.workers(p) + t.queue_capacity(p))
        .sum();
    let cap = t.expected.clauses.b4.value.max_connections as usize;
    cap.saturating_sub(held + 4).max(1)
}

/// `total` split into waves of at most `room`.
fn waves(total: usize, room: usize) -> Vec<usize> {
    crate::checks::pieces(total as u64, room as u64)
        .into_iter()
        .map(|n| n as usize)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::waves;

    #[test]
    fn a_crowd_is_split_into_waves_that_fit_the_room() {
        assert_eq!(waves(64, 500), vec![64]);
        assert_eq!(waves(64, 50), vec![50, 14]);
        assert_eq!(waves(64, 32), vec![32, 32]);
        assert_eq!(waves(3, 0), vec![1, 1, 1]);
    }
}
