//! How big a pool is and who gets a freed slot: the contract's answers, as seams a broken variant
//! can replace for one pool or several (each method is told which pool asks).

use std::fmt::Debug;

use plimsoll_spec::Pool;

/// How many worker slots a pool gets.
pub trait PoolSizing: Debug + Send + Sync {
    /// `contract` is the contract's number for `pool` (after overrides).
    fn workers(&self, pool: Pool, contract: usize) -> usize;
    /// `contract` is the contract's queue places for `pool` (`usize::MAX / 2`: unbounded).
    fn queue_capacity(&self, pool: Pool, contract: usize) -> usize;
}

/// Exactly the contract's number of slots.
#[derive(Debug)]
pub struct ContractSizing;

impl PoolSizing for ContractSizing {
    // clause: T1 — 4 digitize workers by default (`WORKER_POOL_SIZE`)
    // clause: R1 — 8 relay workers by default (`RELAY_CONCURRENCY`)
    fn workers(&self, _pool: Pool, contract: usize) -> usize {
        contract
    }

    // clause: R1 — beyond the relay workers the queue is unbounded: never refused
    fn queue_capacity(&self, _pool: Pool, contract: usize) -> usize {
        contract
    }
}

/// Which waiter a freed slot goes to.
pub trait QueueDiscipline: Debug + Send + Sync {
    /// The index, in arrival order, of the waiter that gets the slot (`queued` ≥ 1).
    fn next(&self, pool: Pool, queued: usize) -> usize;
}

/// First come, first served, with no priority by user or size.
#[derive(Debug)]
pub struct Fifo;

impl QueueDiscipline for Fifo {
    // clause: T2 — FIFO, no priority by user or size
    fn next(&self, _pool: Pool, _queued: usize) -> usize {
        0
    }
}
