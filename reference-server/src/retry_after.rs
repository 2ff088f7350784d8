//! The Retry-After estimate (T3): each pool records its queue-wait samples in a [`WaitEstimator`]
//! and asks it for the delay a refused client is told. The reference estimator is the p50 of the
//! last N samples, in whole seconds; [`RetryAfterPolicy`] is the seam that chooses it per pool.

use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::Duration;

use plimsoll_spec::Pool;
use plimsoll_spec::model::{Estimator, RetryAfter};

/// Turns queue waits into the advertised Retry-After of one pool.
pub trait WaitEstimator: Debug + Send {
    /// Adds one queue-wait sample.
    fn record(&mut self, wait: Duration);
    /// The delay to advertise, in whole seconds, at most `max_seconds` (the pool's timeout).
    fn retry_after_seconds(&self, max_seconds: u64) -> u64;
    /// How many of the most recent samples can still change the answer: the pool keeps at most
    /// this many samples waiting to be recorded, so a flood of refusals costs bounded memory.
    fn window(&self) -> usize;
}

/// Chooses each pool's estimator.
pub trait RetryAfterPolicy: Debug + Send + Sync {
    fn estimator(&self, pool: Pool, t3: &RetryAfter) -> Box<dyn WaitEstimator>;
}

/// The contract's estimator for every pool: the median of the last `window_samples` waits.
#[derive(Debug)]
pub(crate) struct MedianWait;

impl RetryAfterPolicy for MedianWait {
    fn estimator(&self, _pool: Pool, t3: &RetryAfter) -> Box<dyn WaitEstimator> {
        Box::new(RetryAfterEstimator::new(
            t3.estimator,
            t3.window_samples as usize,
            t3.min_seconds,
            t3.empty_window_seconds,
        ))
    }
}

/// A wait as the advertised delay: rounded up to whole seconds, at least `min_seconds`, at most
/// `max_seconds` (the pool's timeout; `min_seconds` if that is smaller).
pub(crate) fn whole_seconds(wait: Duration, min_seconds: u64, max_seconds: u64) -> u64 {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    seconds.clamp(min_seconds, max_seconds.max(min_seconds))
}

/// A sliding window of queue-wait samples.
#[derive(Debug, Clone)]
pub(crate) struct RetryAfterEstimator {
    estimator: Estimator,
    window: VecDeque<Duration>,
    /// The window's order statistic, kept until the next sample: a flood asks for it once per
    /// refusal (a copy and a sort of the window, under the pool's lock), and between two
    /// samples it cannot change.
    statistic: Cell<Option<Duration>>,
    capacity: usize,
    min_seconds: u64,
    empty_seconds: u64,
}

impl RetryAfterEstimator {
    pub(crate) fn new(
        estimator: Estimator,
        capacity: usize,
        min_seconds: u64,
        empty_seconds: u64,
    ) -> Self {
        RetryAfterEstimator {
            estimator,
            window: VecDeque::with_capacity(capacity),
            statistic: Cell::new(None),
            capacity: capacity.max(1),
            min_seconds,
            empty_seconds,
        }
    }

    /// How many waits the window holds (the tests watch it fill and slide).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.window.len()
    }
}

impl WaitEstimator for RetryAfterEstimator {
    /// Adds one queue wait; the oldest falls out once the window is full.
    fn record(&mut self, wait: Duration) {
        if self.window.len() == self.capacity {
            self.window.pop_front();
        }
        self.window.push_back(wait);
        self.statistic.set(None);
    }

    /// The advertised delay: the nearest-rank median of the window, rounded up to whole
    /// seconds, at least `min_seconds`, at most `max_seconds` (the pool's timeout); an empty
    /// window answers `empty_seconds`.
    // clause: T3 — N = p50 queue wait, ceil, at least 1, at most the pool's timeout
    fn retry_after_seconds(&self, max_seconds: u64) -> u64 {
        if self.window.is_empty() {
            return self
                .empty_seconds
                .clamp(self.min_seconds, max_seconds.max(self.min_seconds));
        }
        let wait = self.statistic.get().unwrap_or_else(|| {
            let wait = self
                .estimator
                .of(self.window.iter().copied())
                .unwrap_or_default();
            self.statistic.set(Some(wait));
            wait
        });
        whole_seconds(wait, self.min_seconds, max_seconds)
    }

    /// The window: a sample older than the last `capacity` has fallen out.
    fn window(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn empty_window_answers_the_empty_value() {
        assert_eq!(
            RetryAfterEstimator::new(Estimator::P50, 64, 1, 1).retry_after_seconds(60),
            1
        );
    }

    #[test]
    fn median_is_rounded_up_and_clamped() {
        let mut e = RetryAfterEstimator::new(Estimator::P50, 64, 1, 1);
        for v in [100, 2500, 2600, 9000, 10] {
            e.record(ms(v));
        }
        // sorted: 10, 100, 2500, 2600, 9000 → median 2500 ms → 3 s
        assert_eq!(e.retry_after_seconds(60), 3);
        assert_eq!(e.retry_after_seconds(2), 2);
        let mut zero = RetryAfterEstimator::new(Estimator::P50, 64, 1, 1);
        zero.record(Duration::ZERO);
        assert_eq!(zero.retry_after_seconds(60), 1);
    }

    #[test]
    fn window_forgets_old_samples() {
        let mut e = RetryAfterEstimator::new(Estimator::P50, 4, 1, 1);
        for _ in 0..4 {
            e.record(ms(30_000));
        }
        for _ in 0..4 {
            e.record(ms(1_200));
        }
        assert_eq!(e.len(), 4);
        assert_eq!(e.retry_after_seconds(60), 2);
    }

    /// The statistic kept between samples is the window's own: every sample recorded after an
    /// answer moves the next answer as it would a fresh estimator's.
    #[test]
    fn every_answer_is_the_window_as_it_is_now() {
        let mut kept = RetryAfterEstimator::new(Estimator::P50, 4, 1, 1);
        let mut recorded = Vec::new();
        for wait in [30_000, 1_200, 1_200, 5_500, 2_100, 2_100, 9_000, 100] {
            kept.record(ms(wait));
            recorded.push(wait);
            let mut fresh = RetryAfterEstimator::new(Estimator::P50, 4, 1, 1);
            for &w in &recorded {
                fresh.record(ms(w));
            }
            for max in [1, 3, 60] {
                assert_eq!(
                    kept.retry_after_seconds(max),
                    fresh.retry_after_seconds(max)
                );
            }
        }
    }
}
