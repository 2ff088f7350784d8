//! `GET /quota`'s rate limit: a token bucket for each `X-Api-Key` value (or one for all),
//! refilled at the configured rate with room for a burst, as `governor`'s GCRA keeps it. A
//! request that finds no token is refused at once; none is delayed (nginx's `nodelay`). Every
//! answer carries the IETF fields of draft-ietf-httpapi-ratelimit-headers-09:
//! `RateLimit-Policy: "quota";q=BUCKET;w=SECONDS` and `RateLimit: "quota";r=LEFT;t=SECONDS`.

use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{RateLimiter, middleware::StateSnapshot};
use http::HeaderValue;

use crate::refusal::Refusal;

/// The most keys kept at once: past it, buckets as full as new are dropped, and if that is not
/// enough a new key shares one bucket with every other newcomer (a client cannot grow the map
/// without bound).
const MAX_KEYS: usize = 1024;

/// The policy's name in the RateLimit fields.
const POLICY: &str = "quota";

/// A keyed limiter that reports the state behind each decision.
type Limiter =
    RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock, StateInformationMiddleware>;

/// The buckets, by key, and what the fields say of them.
#[derive(Clone)]
pub(crate) struct Quota {
    limiter: Arc<Limiter>,
    /// Held around each decision, so each reads the clock after the one before it is recorded.
    /// `governor`'s GCRA reads the clock, then updates the key's state in a compare-and-swap
    /// loop with that reading: a request that read the clock first but lost the race to two
    /// others (a thread descheduled in between, on a loaded machine) is judged at an instant
    /// before the state it meets, and refused with a token left — two of a burst of three
    /// admitted where the bucket holds three (seen in CI, as T6 meeting a bucket short of full).
    one_at_a_time: Arc<std::sync::Mutex<()>>,
    per_key: bool,
    /// The quota `RateLimit-Policy` advertises (`None`: no fields at all).
    advertised: Option<u32>,
    /// Seconds the bucket takes to refill from empty: the policy's window.
    window: u64,
    /// The text a refusal's body is.
    refusal_body: &'static str,
}

impl Quota {
    /// `rate` requests a second (at least one), `burst` more at once; `advertised` is the quota
    /// the fields say (the bucket, `burst + 1`, when honest; none: no fields); a refusal's body
    /// is `refusal_body`.
    pub(crate) fn new(
        (rate, burst): (u32, u32),
        per_key: bool,
        advertised: Option<u32>,
        refusal_body: &'static str,
    ) -> Quota {
        let rate = NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN);
        let bucket = NonZeroU32::new(burst.saturating_add(1)).unwrap_or(NonZeroU32::MIN);
        let quota = governor::Quota::per_second(rate).allow_burst(bucket);
        Quota {
            limiter: Arc::new(RateLimiter::keyed(quota).with_middleware()),
            one_at_a_time: Arc::default(),
            per_key,
            advertised,
            window: u64::from(bucket.get()).div_ceil(u64::from(rate.get())),
            refusal_body,
        }
    }

    /// The bucket `key` draws from.
    fn key(&self, key: &str) -> String {
        if !self.per_key {
            return String::new();
        }
        if self.limiter.len() >= MAX_KEYS {
            self.limiter.retain_recent();
            if self.limiter.len() >= MAX_KEYS {
                return "\u{0}overflow".into();
            }
        }
        key.to_owned()
    }

    /// Adds the RateLimit fields: `left` tokens remain, the next in `reset` seconds.
    fn advertise(&self, response: &mut Response, left: u32, reset: u64) {
        let Some(q) = self.advertised else {
            return;
        };
        let headers = response.headers_mut();
        let policy = format!("\"{POLICY}\";q={q};w={}", self.window);
        let now = format!("\"{POLICY}\";r={left};t={reset}");
        for (name, value) in [("ratelimit-policy", policy), ("ratelimit", now)] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
    }
}

/// `/quota`'s admission: the request takes a token of its key's bucket, or is refused; either
/// answer says what is left.
pub(crate) async fn admit(State(quota): State<Quota>, request: Request, next: Next) -> Response {
    let key = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let key = quota.key(key);
    let decision = {
        let _turn = quota
            .one_at_a_time
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        quota.limiter.check_key(&key)
    };
    match decision {
        Ok(state) => {
            let left = StateSnapshot::remaining_burst_capacity(&state);
            let mut response = next.run(request).await;
            quota.advertise(&mut response, left, 0);
            response
        }
        Err(not_until) => {
            let wait = not_until.wait_time_from(quota.limiter.clock().now());
            let mut response = Refusal::Quota(quota.refusal_body).into_response();
            quota.advertise(&mut response, 0, wait.as_secs_f64().ceil() as u64);
            response
        }
    }
}
