//! Broken bounds and teardown: no deadline or one that forgets the queue, no memory cap or one
//! too low, an upload budget missing, too small or blind to chunked bodies, disconnects ignored,
//! temp dirs and slots leaked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::Pool;
use tokio_util::sync::CancellationToken;

use crate::admission::Slot;
use crate::bounds::{DeadlinePolicy, MemoryCap, OnDisconnect, UploadBudgetPolicy};
use crate::connections::ConnectionPolicy;
use crate::upload_budget::UploadBudget;
use crate::worker::{SlotRelease, TempCleaner, WorkerEnd};
use plimsoll_engine::job::JobErrorKind;
use plimsoll_spec::model::Connections;

/// B1: the deadline is a day away (a late 200 instead of a 504).
#[derive(Debug)]
pub(super) struct NoDeadline;

impl DeadlinePolicy for NoDeadline {
    fn deadline(&self, arrived: Instant, _started: Instant, _timeout: Duration) -> Instant {
        arrived + Duration::from_secs(86_400)
    }
}

/// B1: the deadline counts from the worker's start, so time spent queued is not counted.
#[derive(Debug)]
pub(super) struct FromStart;

impl DeadlinePolicy for FromStart {
    fn deadline(&self, _arrived: Instant, started: Instant, timeout: Duration) -> Instant {
        started + timeout
    }
}

/// B1 under a trickle: the upload read timer is an idle timer, restarted by every read, so a
/// body trickling in faster than the timeout is never timed out (a slowloris hole). A body that
/// stalls (the fault-free probe) is still timed out on time.
#[derive(Debug)]
pub(super) struct IdleUploadTimer;

impl DeadlinePolicy for IdleUploadTimer {
    fn deadline(&self, arrived: Instant, _started: Instant, timeout: Duration) -> Instant {
        arrived + timeout
    }

    fn upload_deadline(
        &self,
        _head: Instant,
        last_read: Instant,
        read_timeout: Duration,
    ) -> Instant {
        last_read + read_timeout
    }
}

/// F2: a body declared over the limit is refused at once from its `Content-Length`, unread (the
/// common shortcut): a client still sending meets a reset rather than the 400, and a head with no
/// body after it gets `payload_too_large` at once instead of `upload_timeout` at the deadline.
#[derive(Debug)]
pub(super) struct OversizeRefusedUnread;

impl DeadlinePolicy for OversizeRefusedUnread {
    fn deadline(&self, arrived: Instant, _started: Instant, timeout: Duration) -> Instant {
        arrived + timeout
    }

    fn drains_declared_oversize(&self) -> bool {
        false
    }
}

/// B2: the cap is never reached.
#[derive(Debug)]
pub(super) struct NoMemoryCap;

impl MemoryCap for NoMemoryCap {
    fn cap_bytes(&self, _contract_mb: u64) -> u64 {
        u64::MAX / 4
    }
}

/// B2: half the contract's cap.
#[derive(Debug)]
pub(super) struct HalfCap;

impl MemoryCap for HalfCap {
    fn cap_bytes(&self, contract_mb: u64) -> u64 {
        contract_mb.saturating_mul(1 << 20) / 2
    }
}

/// B5: no budget: every body is read into memory, however many there are.
#[derive(Debug)]
pub(super) struct NoUploadBudget;

impl UploadBudgetPolicy for NoUploadBudget {
    fn budget_bytes(&self, _contract_mb: u64) -> Option<u64> {
        None
    }
}

/// B5: half the contract's budget, so uploads the contract lets in are refused.
#[derive(Debug)]
pub(super) struct HalfBudget;

impl UploadBudgetPolicy for HalfBudget {
    fn budget_bytes(&self, contract_mb: u64) -> Option<u64> {
        Some(contract_mb.saturating_mul(1 << 20) / 2)
    }
}

/// B5: only declared lengths are charged; a chunked body is read without a budget (the
/// statement's "one without a length that grows past it is cut off the same way" forgotten).
#[derive(Debug)]
pub(super) struct BudgetIgnoresChunked;

impl UploadBudgetPolicy for BudgetIgnoresChunked {
    fn budget_bytes(&self, contract_mb: u64) -> Option<u64> {
        Some(contract_mb.saturating_mul(1 << 20))
    }

    fn budget_for(&self, server: &Arc<UploadBudget>, declared: Option<u64>) -> Arc<UploadBudget> {
        match declared {
            Some(_) => server.clone(),
            None => UploadBudget::new(u64::MAX),
        }
    }
}

/// B3: a client that goes away leaves its job running.
#[derive(Debug)]
pub(super) struct IgnoreDisconnect;

impl OnDisconnect for IgnoreDisconnect {
    fn client_gone(&self, _job: &CancellationToken) {}
}

/// F1 (and B1, B3): a failed, timed-out or cancelled job's temp dir stays.
#[derive(Debug)]
pub(super) struct KeepWhenFailed;

impl TempCleaner for KeepWhenFailed {
    fn clean(&self, dir: tempfile::TempDir, end: &WorkerEnd<'_>) {
        if end.failure.is_some() {
            let _ = dir.keep();
        }
    }
}

/// B1: a timed-out job's temp dir stays (every other outcome is cleaned).
#[derive(Debug)]
pub(super) struct KeepWhenTimedOut;

impl TempCleaner for KeepWhenTimedOut {
    fn clean(&self, dir: tempfile::TempDir, end: &WorkerEnd<'_>) {
        if end.deadline_passed {
            let _ = dir.keep();
        }
    }
}

/// F1: the temp dir of a job whose stage panicked stays (an error, a timeout or a cancel is
/// cleaned).
#[derive(Debug)]
pub(super) struct KeepWhenPanicked;

impl TempCleaner for KeepWhenPanicked {
    fn clean(&self, dir: tempfile::TempDir, end: &WorkerEnd<'_>) {
        if matches!(end.failure, Some(JobErrorKind::Panicked { .. })) {
            let _ = dir.keep();
        }
    }
}

/// B3/R6: in the listed pools, a worker whose client went away never gives its slot back.
#[derive(Debug)]
pub(super) struct LeakWhenClientGone(pub &'static [Pool]);

impl SlotRelease for LeakWhenClientGone {
    fn worker_stopped(&self, slot: &Slot, end: &WorkerEnd<'_>) {
        if end.client_gone && self.0.contains(&end.pool) {
            std::mem::forget(slot.take());
        } else {
            slot.release();
        }
    }
}

/// B4: a connection may take for ever to send its request head (a slowloris holds it).
#[derive(Debug)]
pub(super) struct NoHeadTimeout;

impl ConnectionPolicy for NoHeadTimeout {
    fn head_timeout(&self, _contract: &Connections) -> Option<Duration> {
        None
    }

    fn max_connections(&self, contract: &Connections) -> Option<usize> {
        contract.max_connections.map(|n| n as usize)
    }
}

/// B4: every connection is accepted and served, however many are open.
#[derive(Debug)]
pub(super) struct NoConnectionCap;

impl ConnectionPolicy for NoConnectionCap {
    fn head_timeout(&self, contract: &Connections) -> Option<Duration> {
        Some(Duration::from_millis(contract.head_timeout_ms))
    }

    fn max_connections(&self, _contract: &Connections) -> Option<usize> {
        None
    }
}

/// B4: the head timer runs at a quarter of the contract's: stalled connections are closed, and
/// so are keep-alive connections a client was about to reuse.
#[derive(Debug)]
pub(super) struct HeadTimeoutTooShort;

impl ConnectionPolicy for HeadTimeoutTooShort {
    fn head_timeout(&self, contract: &Connections) -> Option<Duration> {
        Some(Duration::from_millis(contract.head_timeout_ms / 4))
    }

    fn max_connections(&self, contract: &Connections) -> Option<usize> {
        contract.max_connections.map(|n| n as usize)
    }
}
