//! `GET /quota`'s rate limit: a token bucket for each `X-Api-Key` value (or one for all),
//! refilled at the configured rate with room for a burst, as `governor`'s GCRA keeps it. A
//! request that finds no token is refused at once; none is delayed (nginx's `nodelay`).

use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::{DefaultKeyedRateLimiter, RateLimiter};

use crate::refusal::Refusal;

/// The most keys kept at once: past it, buckets as full as new are dropped, and if that is not
/// enough a new key shares one bucket with every other newcomer (a client cannot grow the map
/// without bound).
const MAX_KEYS: usize = 1024;

/// The buckets, by key.
#[derive(Clone)]
pub(crate) struct Quota {
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    per_key: bool,
}

impl Quota {
    /// `rate` requests a second (at least one), `burst` more at once.
    pub(crate) fn new(rate: u32, burst: u32, per_key: bool) -> Quota {
        let rate = NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN);
        let bucket = NonZeroU32::new(burst.saturating_add(1)).unwrap_or(NonZeroU32::MIN);
        let quota = governor::Quota::per_second(rate).allow_burst(bucket);
        Quota {
            limiter: Arc::new(RateLimiter::keyed(quota)),
            per_key,
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
}

/// `/quota`'s admission: the request takes a token of its key's bucket, or is refused.
pub(crate) async fn admit(State(quota): State<Quota>, request: Request, next: Next) -> Response {
    let key = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let key = quota.key(key);
    match quota.limiter.check_key(&key) {
        Ok(()) => next.run(request).await,
        Err(_) => Refusal::Quota.into_response(),
    }
}
