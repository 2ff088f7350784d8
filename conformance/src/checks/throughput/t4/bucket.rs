//! The declared rate limit as a token bucket, fed with what the service did: `burst + 1` tokens,
//! refilled at the rate, one taken by each admitted request. Given the instant a request was
//! sent and how late it may have reached the service, the bucket says what the contract allows
//! it: admitted, refused, or either (a token's refill fell within the slack). nginx's
//! `limit_req` ("excess" in thousandths, clamped after adding the request) is the same bucket.

use std::time::{Duration, Instant};

use plimsoll_spec::model::RateLimit;

/// The refill a service's clock may not have counted yet: nginx counts it in whole
/// milliseconds.
const ROUNDING: Duration = Duration::from_millis(2);
/// Below any count of tokens that matters: float error.
const EPSILON: f64 = 1e-9;

/// What the declared limit allows one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Allowed {
    /// A token was there when it was sent: it must be admitted.
    Admit,
    /// No token could have been there by the time it arrived: it must be refused.
    Refuse,
    /// A token came back within the slack: either is right.
    Either,
}

/// The bucket's tokens at an instant.
#[derive(Debug, Clone)]
pub(super) struct Bucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// `limit`'s bucket, full at `at` (the checker waited for it to refill).
    pub(super) fn full(limit: &RateLimit, at: Instant) -> Bucket {
        let capacity = f64::from(limit.bucket());
        Bucket {
            capacity,
            per_second: f64::from(limit.rate_per_second),
            tokens: capacity,
            at,
        }
    }

    /// The tokens at `when` (no earlier than the last request recorded).
    pub(super) fn tokens_at(&self, when: Instant) -> f64 {
        let refilled = when.saturating_duration_since(self.at).as_secs_f64() * self.per_second;
        (self.tokens + refilled).min(self.capacity)
    }

    /// What the limit allows a request sent at `sent` that reached the service within `slack`.
    pub(super) fn allowed(&self, sent: Instant, slack: Duration) -> Allowed {
        let early = sent.checked_sub(ROUNDING).unwrap_or(sent);
        if self.tokens_at(early) >= 1.0 - EPSILON {
            Allowed::Admit
        } else if self.tokens_at(sent + slack) < 1.0 - EPSILON {
            Allowed::Refuse
        } else {
            Allowed::Either
        }
    }

    /// Records what the service did with a request sent at `sent`: an admitted one took a token
    /// (the count may go below zero when the service admitted one the limit did not allow; the
    /// debt then delays the next admission as the service's own bucket would not).
    pub(super) fn record(&mut self, sent: Instant, admitted: bool) {
        let when = sent.max(self.at);
        self.tokens = self.tokens_at(when) - if admitted { 1.0 } else { 0.0 };
        self.at = when;
    }

    /// The requests a burst sent from `first` to `last` (each within `slack` of its send) can
    /// find tokens for: the bucket's tokens at the start, up to those refilled by the end.
    pub(super) fn burst_admits(
        &self,
        first: Instant,
        last: Instant,
        slack: Duration,
    ) -> (u32, u32) {
        let least = self.tokens_at(first) + EPSILON;
        let most = self.tokens_at(first)
            + (last + slack)
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
            b.record(t0, true);
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
        b.record(t0, true);
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(b.allowed(at(100), SLACK), Allowed::Refuse);
        assert_eq!(b.allowed(at(190), SLACK), Allowed::Either);
        assert_eq!(b.allowed(at(250), SLACK), Allowed::Admit);
        // A service that admitted at 100 ms went into debt: the next token is 400 ms away.
        b.record(at(100), true);
        assert_eq!(b.allowed(at(300), SLACK), Allowed::Refuse);
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
