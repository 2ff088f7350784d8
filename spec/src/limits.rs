//! A pool's limits, gathered from the clauses that set them: the one mapping from a [`Pool`] to
//! its workers (T1, R1), queue places (T2, R1) and deadline (B1), which the server sizes its
//! pools by and the checker expects.

use std::time::Duration;

use crate::model::OverflowPolicy;
use crate::{Contract, Pool, Stage};

/// What a pool is sized to, as the contract says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits<'c> {
    /// Requests it runs at once (T1; the relay's R1).
    pub workers: u32,
    /// Requests that may wait for a worker (T2). The relay's queue has no bound when R1's
    /// overflow is `queue` (`None`), and no place when it is `reject`.
    pub queue_capacity: Option<u32>,
    /// How long an admitted request may take, counted from arrival (B1); the relay has none.
    pub deadline: Option<Duration>,
    /// Its stages, in order (the relay runs none of its own).
    pub stages: &'c [Stage],
}

impl Contract {
    /// The limits of `pool`.
    pub fn pool(&self, pool: Pool) -> PoolLimits<'_> {
        let c = &self.clauses;
        let ms = |ms: u64| Some(Duration::from_millis(ms));
        match pool {
            Pool::Digitize => PoolLimits {
                workers: c.t1.value.digitize_workers,
                queue_capacity: Some(c.t2.value.digitize_queue_capacity),
                deadline: ms(c.b1.value.digitize_timeout_ms),
                stages: &self.stages.digitize,
            },
            Pool::Export => PoolLimits {
                workers: c.t1.value.export_workers,
                queue_capacity: Some(c.t2.value.export_queue_capacity),
                deadline: ms(c.b1.value.export_timeout_ms),
                stages: &self.stages.export,
            },
            Pool::Relay => PoolLimits {
                workers: c.r1.value.relay_concurrency,
                queue_capacity: match c.r1.value.overflow {
                    OverflowPolicy::Queue => None,
                    OverflowPolicy::Reject => Some(0),
                },
                deadline: None,
                stages: &[],
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pool_reads_its_own_clauses() {
        let c = Contract::embedded();
        let digitize = c.pool(Pool::Digitize);
        assert_eq!(digitize.workers, c.clauses.t1.value.digitize_workers);
        assert_eq!(
            digitize.deadline,
            Some(Duration::from_millis(
                c.clauses.b1.value.digitize_timeout_ms
            ))
        );
        let export = c.pool(Pool::Export);
        assert_eq!(
            export.queue_capacity,
            Some(c.clauses.t2.value.export_queue_capacity)
        );
        assert_eq!(export.stages, c.stages.export.as_slice());
        let relay = c.pool(Pool::Relay);
        assert_eq!(relay.workers, c.clauses.r1.value.relay_concurrency);
        assert_eq!((relay.queue_capacity, relay.deadline), (None, None));
    }
}
