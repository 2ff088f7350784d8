//! A pool's limits, as its declaration (`[pools.NAME]`) sets them: the one mapping from a
//! [`Pool`] of the reference implementation to its workers (T1, R1), queue places (T2) and
//! deadline (B1), which the server sizes its pools by and the checker expects.

use std::time::Duration;

use crate::{Contract, Pool, Stage};

/// What a pool is sized to, as the contract says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits<'c> {
    /// Requests it runs at once (T1; the relay's R1).
    pub workers: u32,
    /// Requests that may wait for a worker (T2); `None`: the queue has no bound.
    pub queue_capacity: Option<u32>,
    /// How long an admitted request may take, counted from arrival (B1); the relay has none.
    pub deadline: Option<Duration>,
    /// Its stages, in order (the relay runs none of its own).
    pub stages: &'c [Stage],
    /// The most memory one request may be charged (B2); `None`: no cap is promised.
    pub memory_cap_mb: Option<u64>,
}

impl crate::model::PoolSpec {
    /// The limits this declaration sets, for any pool of any service.
    pub fn limits(&self) -> PoolLimits<'_> {
        PoolLimits {
            workers: self.workers,
            queue_capacity: self.queue.capacity.places(),
            deadline: self.deadline_ms.map(Duration::from_millis),
            stages: &self.stages,
            memory_cap_mb: self.memory_cap_mb,
        }
    }
}

impl Contract {
    /// The limits of `pool`, one of the pools the reference implementation serves. Its
    /// declaration is `pools.<pool>` (the loader requires the three, see [`Pool`]).
    pub fn pool(&self, pool: Pool) -> PoolLimits<'_> {
        self.pools[pool.as_str()].limits()
    }

    /// The declaration of `pool`.
    pub fn pool_spec(&self, pool: Pool) -> &crate::model::PoolSpec {
        &self.pools[pool.as_str()]
    }

    /// The refusal a full `pool` answers with, if it refuses.
    pub fn refusal(&self, pool: Pool) -> Option<&crate::model::Refusal> {
        let name = self.pool_spec(pool).refusal.as_ref()?;
        self.refusals.get(name)
    }

    /// The status `refusal` answers with: its own, or its error's in `[[errors]]` (None only
    /// for an error the table lacks, which the loader refuses).
    pub fn refusal_status(&self, refusal: &crate::model::Refusal) -> Option<u16> {
        match (refusal.status, refusal.error) {
            (Some(status), _) => Some(status),
            (None, Some(code)) => self
                .errors
                .iter()
                .find(|e| e.code == code)
                .map(|e| e.status),
            (None, None) => None,
        }
    }

    /// A refusal's answer in words, as the checks' expectations print it: its status and, when
    /// it declares one, its body's shape (`504 with the text "lookup timed out\n"`).
    pub fn refusal_words(&self, refusal: &crate::model::Refusal) -> String {
        let status = self.refusal_status(refusal).unwrap_or(0);
        match &refusal.body {
            Some(body) => format!("{status} with {}", body.words()),
            None => status.to_string(),
        }
    }

    /// The `Retry-After` hint of the contract's refusals (T3): the first refusal that carries
    /// one. The reference implementation refuses with one hint for every pool.
    pub fn retry_after(&self) -> &crate::model::RetryAfter {
        self.refusals
            .values()
            .find_map(|r| r.hint.as_ref().and_then(|h| h.estimated()))
            .expect("the loader requires a refusal with a Retry-After hint")
    }

    /// How soon a request whose client went away stops (B3), in the digitize pool.
    pub fn cancellation(&self) -> &crate::model::Cancellation {
        self.pool_spec(Pool::Digitize)
            .cancellation
            .as_ref()
            .expect("the loader requires the digitize pool's cancellation")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pool_reads_its_own_declaration() {
        let c = Contract::embedded();
        let digitize = c.pool(Pool::Digitize);
        assert_eq!(digitize.workers, c.pools["digitize"].workers);
        assert_eq!(
            digitize.deadline,
            c.pools["digitize"].deadline_ms.map(Duration::from_millis)
        );
        let export = c.pool(Pool::Export);
        assert_eq!(
            export.queue_capacity,
            c.pools["export"].queue.capacity.places()
        );
        assert_eq!(export.stages, c.pools["export"].stages.as_slice());
        let relay = c.pool(Pool::Relay);
        assert_eq!(relay.workers, c.pools["relay"].workers);
        assert_eq!((relay.queue_capacity, relay.deadline), (None, None));
    }
}
