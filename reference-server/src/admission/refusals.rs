//! The queue-wait samples of refused requests (T3). A refused request never waits, but what it
//! would have waited is a sample for the Retry-After estimate: the sample opens at the refusal and
//! closes when the next slot frees. Only the newest `window` open samples are kept, so a flood of
//! refusals costs memory and release work bounded by the estimator's window, not by the flood.

use std::collections::VecDeque;
use std::time::Instant;

use crate::retry_after::WaitEstimator;

/// Refusals whose sample is still open, oldest first, at most `keep` of them.
#[derive(Debug)]
pub(super) struct OpenRefusals {
    since: VecDeque<Instant>,
    keep: usize,
}

impl OpenRefusals {
    /// Keeps at most `keep` open samples: the estimator's [`WaitEstimator::window`].
    ///
    /// Why dropping the older ones changes nothing the estimator says: open samples are recorded
    /// all at once when a slot frees, oldest first, after every sample recorded before. Of the
    /// `n` recorded then, only the newest `window` can remain among the estimator's last
    /// `window` samples; the others fall out of the window in that same release, before anyone
    /// asks it for an answer (the pool's lock is held throughout).
    pub(super) fn new(keep: usize) -> OpenRefusals {
        OpenRefusals {
            since: VecDeque::new(),
            keep,
        }
    }

    /// A refusal at `at` opens a sample; the oldest open one is forgotten if `keep` are open.
    pub(super) fn push(&mut self, at: Instant) {
        if self.keep == 0 {
            return;
        }
        if self.since.len() >= self.keep {
            self.since.pop_front();
        }
        self.since.push_back(at);
    }

    /// A slot freed at `now`: each open sample closes as the time since its refusal, oldest
    /// first. O(keep).
    pub(super) fn close(&mut self, now: Instant, estimator: &mut dyn WaitEstimator) {
        for refused in self.since.drain(..) {
            estimator.record(now.saturating_duration_since(refused));
        }
    }

    /// Open samples now (at most `keep`).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.since.len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.since.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::retry_after::RetryAfterEstimator;

    /// What happens to a pool, as far as its samples are concerned.
    #[derive(Debug, Clone)]
    enum Event {
        /// A request refused `after_ms` after the previous event.
        Refused { after_ms: u64 },
        /// A slot frees `after_ms` after the previous event; a waiter that waited `waited_ms`
        /// takes it, if there is one.
        Freed {
            after_ms: u64,
            waited_ms: Option<u64>,
        },
        /// A request admitted at once (a zero-wait sample).
        AdmittedAtOnce,
    }

    fn event() -> impl Strategy<Value = Event> {
        // Many refusals per release, with waits spread over several whole seconds, so the
        // median moves and the open samples overflow `keep` often.
        prop_oneof![
            8 => (0u64..700).prop_map(|after_ms| Event::Refused { after_ms }),
            1 => (0u64..4_000, proptest::option::of(0u64..9_000))
                .prop_map(|(after_ms, waited_ms)| Event::Freed { after_ms, waited_ms }),
            1 => Just(Event::AdmittedAtOnce),
        ]
    }

    /// A pool's samples: its open refusals and its estimator.
    struct Samples {
        open: OpenRefusals,
        estimator: RetryAfterEstimator,
    }

    impl Samples {
        fn apply(&mut self, now: Instant, event: &Event) {
            match event {
                Event::Refused { .. } => self.open.push(now),
                Event::Freed { waited_ms, .. } => {
                    self.open.close(now, &mut self.estimator);
                    if let Some(ms) = waited_ms {
                        self.estimator.record(Duration::from_millis(*ms));
                    }
                }
                Event::AdmittedAtOnce => self.estimator.record(Duration::ZERO),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Keeping only the newest `window` open samples advertises exactly what keeping every
        /// one would, after every event of a random history, and leaves the same window.
        #[test]
        fn keeping_the_newest_window_changes_no_advertised_value(
            window in 1usize..10,
            events in proptest::collection::vec(event(), 1..400),
        ) {
            let estimator = RetryAfterEstimator::new(plimsoll_spec::model::Estimator::P50, window, 1, 1);
            let mut bounded = Samples { open: OpenRefusals::new(window), estimator: estimator.clone() };
            let mut unbounded = Samples { open: OpenRefusals::new(usize::MAX), estimator };
            let mut now = Instant::now();
            for event in &events {
                if let Event::Refused { after_ms } | Event::Freed { after_ms, .. } = event {
                    now += Duration::from_millis(*after_ms);
                }
                bounded.apply(now, event);
                unbounded.apply(now, event);
                prop_assert!(bounded.open.len() <= window);
                for max in [1, 3, 60] {
                    prop_assert_eq!(
                        bounded.estimator.retry_after_seconds(max),
                        unbounded.estimator.retry_after_seconds(max)
                    );
                }
                prop_assert_eq!(
                    format!("{:?}", bounded.estimator),
                    format!("{:?}", unbounded.estimator)
                );
            }
        }
    }

    #[test]
    fn keep_zero_keeps_nothing() {
        let mut open = OpenRefusals::new(0);
        open.push(Instant::now());
        assert!(open.is_empty());
    }
}
