//! The per-request bounds (B1–B3) as seams: when a job's deadline falls, how much memory it may
//! hold, and what a client that goes away does to its job; and the bound on all requests'
//! bodies together (B5). The contract's answers are [`FromArrival`], [`ContractCap`],
//! [`CancelJob`] and [`ContractBudget`].

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::upload_budget::UploadBudget;

/// When a job is past its time.
pub trait DeadlinePolicy: Debug + Send + Sync {
    /// `arrived`: the request joined its pool's queue (upload already read); `started`: it got
    /// its worker slot; `timeout`: the pool's timeout.
    fn deadline(&self, arrived: Instant, started: Instant, timeout: Duration) -> Instant;

    /// When an upload still arriving is late: `head` is when its request head was read,
    /// `last_read` when its latest bytes were, `read_timeout` the contract's upload read
    /// timeout. The contract's timer is a total one from the head: a client trickling a byte
    /// at a time cannot hold the server past it (an idle timer, reset by every read, could be
    /// held for ever).
    fn upload_deadline(
        &self,
        head: Instant,
        _last_read: Instant,
        read_timeout: Duration,
    ) -> Instant {
        // clause: B1 — the whole body within the upload read timeout of the head
        head + read_timeout
    }

    /// Whether a body whose declared length is over the endpoint's limit is read (and
    /// dropped) until it ends or its upload deadline passes before it is refused. The
    /// contract's answer is yes (rule `upload-read`): a client still sending reads the 400
    /// rather than a reset, and one that sends nothing is `upload_timeout`.
    fn drains_declared_oversize(&self) -> bool {
        true
    }
}

/// The deadline counts from arrival at the pool: time spent queued is part of the budget.
#[derive(Debug)]
pub(crate) struct FromArrival;

impl DeadlinePolicy for FromArrival {
    // clause: B1 — the pool's timeout (`digitize_timeout_ms`, `export_timeout_ms`), counted from
    // arrival at the pool
    fn deadline(&self, arrived: Instant, _started: Instant, timeout: Duration) -> Instant {
        arrived + timeout
    }
}

/// How much memory one job may hold.
pub trait MemoryCap: Debug + Send + Sync {
    /// `contract_mb` is the contract's cap (after overrides).
    fn cap_bytes(&self, contract_mb: u64) -> u64;
}

/// The contract's cap.
#[derive(Debug)]
pub(crate) struct ContractCap;

impl MemoryCap for ContractCap {
    // clause: B2 — `memory_cap_mb` per request (`REQUEST_MEMORY_CAP_MB`)
    fn cap_bytes(&self, contract_mb: u64) -> u64 {
        contract_mb.saturating_mul(1 << 20)
    }
}

/// What a client disconnect does to its job.
pub trait OnDisconnect: Debug + Send + Sync {
    fn client_gone(&self, job: &CancellationToken);
}

/// Cancels the job; it stops at its next checkpoint.
#[derive(Debug)]
pub(crate) struct CancelJob;

impl OnDisconnect for CancelJob {
    // clause: B3 — a client disconnect stops the worker within `stop_within_ms`
    fn client_gone(&self, job: &CancellationToken) {
        job.cancel();
    }
}

/// How many bytes of request bodies the server holds at once.
pub trait UploadBudgetPolicy: Debug + Send + Sync {
    /// `contract_mb` is the contract's budget (after overrides); `None` means no budget at all.
    fn budget_bytes(&self, contract_mb: u64) -> Option<u64>;

    /// The budget an upload is charged to, `declared` its `Content-Length`: the server's, for
    /// a body with a length and a chunked one alike (B5 bounds them together).
    fn budget_for(&self, server: &Arc<UploadBudget>, _declared: Option<u64>) -> Arc<UploadBudget> {
        server.clone()
    }
}

/// The contract's budget.
#[derive(Debug)]
pub(crate) struct ContractBudget;

impl UploadBudgetPolicy for ContractBudget {
    // clause: B5 — `upload_budget_mb` of bodies in flight (`UPLOAD_BUDGET_MB`)
    fn budget_bytes(&self, contract_mb: u64) -> Option<u64> {
        Some(contract_mb.saturating_mul(1 << 20))
    }
}
