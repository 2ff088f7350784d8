//! Broken bounds and teardown: no deadline, no memory cap, disconnects ignored, temp dirs and
//! slots leaked.

use std::time::{Duration, Instant};

use plimsoll_spec::Pool;
use tokio_util::sync::CancellationToken;

use crate::admission::Slot;
use crate::bounds::{DeadlinePolicy, MemoryCap, OnDisconnect};
use crate::worker::{SlotRelease, TempCleaner, WorkerEnd};

/// B1: the deadline is a day away (a late 200 instead of a 504).
#[derive(Debug)]
pub struct NoDeadline;

impl DeadlinePolicy for NoDeadline {
    fn deadline(&self, arrived: Instant, _started: Instant, _timeout: Duration) -> Instant {
        arrived + Duration::from_secs(86_400)
    }
}

/// B2: the cap is never reached.
#[derive(Debug)]
pub struct NoMemoryCap;

impl MemoryCap for NoMemoryCap {
    fn cap_bytes(&self, _contract_mb: u64) -> u64 {
        u64::MAX / 4
    }
}

/// B3: a client that goes away leaves its job running.
#[derive(Debug)]
pub struct IgnoreDisconnect;

impl OnDisconnect for IgnoreDisconnect {
    fn client_gone(&self, _job: &CancellationToken) {}
}

/// F1 (and B1, B3): a failed, timed-out or cancelled job's temp dir stays.
#[derive(Debug)]
pub struct KeepWhenFailed;

impl TempCleaner for KeepWhenFailed {
    fn clean(&self, dir: tempfile::TempDir, end: &WorkerEnd<'_>) {
        if end.failure.is_some() {
            let _ = dir.keep();
        }
    }
}

/// B3/R6: in the listed pools, a worker whose client went away never gives its slot back.
#[derive(Debug)]
pub struct LeakWhenClientGone(pub &'static [Pool]);

impl SlotRelease for LeakWhenClientGone {
    fn answered(&self, _slot: &Slot) {}

    fn worker_stopped(&self, slot: &Slot, end: &WorkerEnd<'_>) {
        if end.client_gone && self.0.contains(&end.pool) {
            std::mem::forget(slot.take());
        } else {
            slot.release();
        }
    }
}
