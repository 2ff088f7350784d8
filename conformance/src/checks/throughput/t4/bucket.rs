//! The declared rate limit as a token bucket, fed with what the service did: `burst + 1` tokens,
//! refilled at the rate, one taken by each admitted request. The checker knows when it sent a
//! request and when the answer came back, not when the service counted it: each request's
//! count fell somewhere in a window from its sending (see [`window`]). So the bucket is kept
//! twice: `early`, every take at its window's start, holds the most tokens the service could
//! have had, and `late`, every take at its window's end (a bucket that stood full wastes the
//! refill until then), the fewest. A request must be refused only when even the early bucket
//! had no token by its window's end, and admitted only when the late one had one at its start;
//! anything between may go either way. nginx's `limit_req` ("excess" in thousandths, clamped
//! after adding the request) is the same bucket.

use std::time::{Duration, Instant};

use plimsoll_spec::model::RateLimit;

/// The refill a service's clock may not have counted yet: nginx counts it in whole
/// milliseconds.
const ROUNDING: Duration = Duration::from_millis(2);
/// Below any count of tokens that matters: float error.
const EPSILON: f64 = 1e-9;

/// How long after its sending a request's count may have fallen: no later than its answer
/// came back (`elapsed`), and never judged finer than `slack`, nor granted more than `most`
/// (the refusal tolerance: an answer slower than that is the service's own delay, as for
/// `delay`'s admitted requests, not its arrival's). A machine under load that delays a
/// request's arrival delays its answer too, so the window widens exactly when it must.
pub(super) fn window(elapsed: Duration, slack: Duration, most: Duration) -> Duration {
    elapsed.clamp(slack, most.max(slack))
}

/// What the declared limit allows one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Allowed {
    /// A token was there when it was sent: it must be admitted.
    Admit,
    /// No token could have been there by the time it arrived: it must be refused.
    Refuse,
    /// A token came back within its window: either is right.
    Either,
}

/// One view of the bucket's tokens at an instant.
#[derive(Debug, Clone, Copy)]
struct Level {
    tokens: f64,
    at: Instant,
}

/// The declared bucket, as the most and the fewest tokens the service could have had.
#[derive(Debug, Clone)]
pub(super) struct Bucket {
    capacity: f64,
    per_second: f64,
    /// Every admitted request's token taken as early as it could have been.
    early: Level,
    /// Every admitted request's token taken as late as it could have been.
    late: Level,
}

impl Bucket {
    /// `limit`'s bucket, full at `at` (the checker waited for it to refill).
    pub(super) fn full(limit: &RateLimit, at: Instant) -> Bucket {
        let capacity = f64::from(limit.bucket());
        let level = Level {
            tokens: capacity,
            at,
        };
        Bucket {
            capacity,
            per_second: f64::from(limit.rate_per_second),
            early: level,
            late: level,
        }
    }

    /// `level`'s tokens at `when` (none refilled before its last take).
    fn tokens(&self, level: Level, when: Instant) -> f64 {
        let refilled = when.saturating_duration_since(level.at).as_secs_f64() * self.per_second;
        (level.tokens + refilled).min(self.capacity)
    }

    /// What the limit allows a request sent at `sent` and counted within `window` of it.
    pub(super) fn allowed(&self, sent: Instant, window: Duration) -> Allowed {
        let early = sent.checked_sub(ROUNDING).unwrap_or(sent);
        if self.tokens(self.late, early) >= 1.0 - EPSILON {
            Allowed::Admit
        } else if self.tokens(self.early, sent + window) < 1.0 - EPSILON {
            Allowed::Refuse
        } else {
            Allowed::Either
        }
    }

    /// Records what the service did with a request sent at `sent` and counted within `window`
    /// of it: an admitted one took a token (the count may go below zero when the service
    /// admitted one the limit did not allow; the debt then delays the next admission as the
    /// service's own bucket would not).
    pub(super) fn record(&mut self, sent: Instant, window: Duration, admitted: bool) {
        let take = if admitted { 1.0 } else { 0.0 };
        self.early = self.taken(self.early, sent, take);
        self.late = self.taken(self.late, sent + window, take);
    }

    /// `level` after `take` tokens at `when` (no earlier than its last take).
    fn taken(&self, level: Level, when: Instant, take: f64) -> Level {
        let at = when.max(level.at);
        Level {
            tokens: self.tokens(level, at) - take,
            at,
        }
    }

    /// The requests a burst sent from `first` to `last` (each counted within `window` of its
    /// sending) can find tokens for: the bucket's tokens at the start, up to those refilled by
    /// the end.
    pub(super) fn burst_admits(
        &self,
        first: Instant,
        last: Instant,
        window: Duration,
    ) -> (u32, u32) {
        let least = self.tokens(self.late, first) + EPSILON;
        let most = self.tokens(self.early, first)
            + (last + window)
                .saturating_duration_since(first)
                .as_secs_f64()
                * self.per_second
            + EPSILON;
        (least.floor().max(0.0) as u32, most.floor().max(0.0) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_spec::model::{BurstMode, LimitKey, Recipe};

    fn limit(rate: u32, burst: u32) -> RateLimit {
        RateLimit {
            title: "test".into(),
            routes: Vec::new(),
            rate_per_second: rate,
            burst,
            burst_mode: BurstMode::Delay,
            refusal: "limited".into(),
            key: LimitKey::All,
            request: Recipe {
                method: "GET".into(),
                path: "/".into(),
                headers: Default::default(),
                body: None,
                body_file: None,
                body_bytes: None,
                status: 200,
            },
            fields: None,
            overrides: Vec::new(),
        }
    }

    const SLACK: Duration = Duration::from_millis(20);

    /// A full bucket of burst + 1 admits that many at once and refuses the next: nginx's
    /// `burst=3` admits four requests sent together.
    #[test]
    fn a_full_bucket_admits_burst_plus_one_at_once() {
        let t0 = Instant::now();
        let mut b = Bucket::full(&limit(5, 3), t0);
        for _ in 0..4 {
            assert_eq!(b.allowed(t0, SLACK), Allowed::Admit);
            b.record(t0, SLACK, true);
        }
        assert_eq!(b.allowed(t0, SLACK), Allowed::Refuse);
        assert_eq!(b.burst_admits(t0, t0, SLACK).0, 0);
    }

    /// An empty bucket at 5 a second has a token again 200 ms later, and only then: a request
    /// within the slack of the refill may go either way.
    #[test]
    fn the_refill_follows_the_rate_and_the_slack_excuses_its_edge() {
        let t0 = Instant::now();
        let mut b = Bucket::full(&limit(5, 0), t0);
        b.record(t0, SLACK, true);
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(b.allowed(at(100), SLACK), Allowed::Refuse);
        assert_eq!(b.allowed(at(190), SLACK), Allowed::Either);
        assert_eq!(b.allowed(at(250), SLACK), Allowed::Admit);
        // A service that admitted at 100 ms went into debt: the next token is 400 ms away.
        b.record(at(100), SLACK, true);
        assert_eq!(b.allowed(at(300), SLACK), Allowed::Refuse);
    }

    /// A request answered late may have been counted late: its window is its answer's time,
    /// between the slack and the refusal tolerance.
    #[test]
    fn a_window_runs_to_the_answer_within_the_slack_and_the_tolerance() {
        let ms = Duration::from_millis;
        assert_eq!(window(ms(5), SLACK, ms(100)), SLACK);
        assert_eq!(window(ms(60), SLACK, ms(100)), ms(60));
        assert_eq!(window(ms(900), SLACK, ms(100)), ms(100));
        assert_eq!(window(ms(900), SLACK, ms(10)), SLACK);
    }

    /// A token a loaded service may have counted 100 ms late leaves its bucket full that much
    /// longer, wasting the refill: a request the prompt count would have to admit may now go
    /// either way, and one with no token even by the early count is still refused.
    #[test]
    fn a_late_count_excuses_only_what_it_could_have_cost() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let (mut prompt, mut late) = (
            Bucket::full(&limit(5, 0), t0),
            Bucket::full(&limit(5, 0), t0),
        );
        prompt.record(t0, SLACK, true);
        late.record(t0, Duration::from_millis(100), true);
        assert_eq!(prompt.allowed(at(250), SLACK), Allowed::Admit);
        assert_eq!(late.allowed(at(250), SLACK), Allowed::Either);
        assert_eq!(late.allowed(at(100), SLACK), Allowed::Refuse);
    }

    /// A burst sent over 100 ms at 10 a second may find one token more than the bucket held.
    #[test]
    fn a_burst_spread_over_time_may_find_refilled_tokens() {
        let t0 = Instant::now();
        let b = Bucket::full(&limit(10, 2), t0);
        assert_eq!(
            b.burst_admits(t0, t0 + Duration::from_millis(100), SLACK),
            (3, 4)
        );
        assert_eq!(b.burst_admits(t0, t0, Duration::ZERO), (3, 3));
    }
}
