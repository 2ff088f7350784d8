//! A job's worker: the work on a blocking thread, then — in this order — its temp dir removed and
//! its slot given back, so partial state is gone before the slot can be reused (F1, B1, B3). Both
//! steps are seams ([`TempCleaner`], [`SlotRelease`]); the relay's workers give their slots back
//! through the same [`SlotRelease`].

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use plimsoll_spec::{Pool, Stage};
use tokio::task::JoinHandle;

use crate::admission::Slot;
use plimsoll_engine::job::{JobConfig, JobContext, JobError, JobErrorKind};

/// How a worker ended, for the teardown steps.
#[derive(Debug, Clone, Copy)]
pub struct WorkerEnd<'a> {
    pub pool: Pool,
    /// The client went away before its answer (a dropped request, a closed relay socket).
    pub client_gone: bool,
    /// The job's deadline had passed when it stopped (it was timed out, whatever it saw first).
    pub deadline_passed: bool,
    /// Why the job failed, if it did.
    pub failure: Option<&'a JobErrorKind>,
}

/// Removes a finished job's temp dir.
pub trait TempCleaner: Debug + Send + Sync {
    fn clean(&self, dir: tempfile::TempDir, end: &WorkerEnd<'_>);
}

/// Removes it, whatever the outcome.
#[derive(Debug)]
pub(crate) struct RemoveTempDir;

impl TempCleaner for RemoveTempDir {
    // clause: F1 — partial state (temp files, half-built objects) is gone
    fn clean(&self, dir: tempfile::TempDir, _end: &WorkerEnd<'_>) {
        // A dir that cannot be removed now is removed at the next start (`temp::remove_stale`).
        let _ = dir.close();
    }
}

/// When a slot is given back. The defaults are the contract's ([`ReleaseWhenStopped`]): only a
/// stopped worker frees its slot, so a broken variant overrides the one moment it gets wrong.
pub trait SlotRelease: Debug + Send + Sync {
    /// The client of `pool` went away while its job held `slot`; the worker may still be
    /// running (it stops at its next checkpoint once cancelled).
    fn client_gone(&self, _slot: &Slot, _pool: Pool) {}
    /// The worker stopped (its temp dir already cleaned).
    // clause: T1 — a slot frees only when its worker has stopped
    fn worker_stopped(&self, slot: &Slot, _end: &WorkerEnd<'_>) {
        slot.release();
    }
}

/// Only a stopped worker frees its slot: a timed-out or cancelled job keeps it until its next
/// checkpoint, so the busy count never undercounts what runs.
#[derive(Debug)]
pub(crate) struct ReleaseWhenStopped;

impl SlotRelease for ReleaseWhenStopped {}

/// What a worker needs to end properly.
pub(crate) struct Teardown {
    pub pool: Pool,
    pub slot: Slot,
    /// Set by the request's disconnect guard.
    pub client_gone: Arc<AtomicBool>,
    pub cleaner: Arc<dyn TempCleaner>,
    pub slots: Arc<dyn SlotRelease>,
}

/// Creates the job's context on a blocking thread (its temp dir touches the disk, which under
/// writeback can stall for seconds: on an async thread that would stall every request the thread
/// serves, refusals included), runs `work` there, then tears the job down. A context that cannot
/// be created fails the job at `first_stage`, and the slot is given back.
pub(crate) fn spawn<T, F>(
    config: JobConfig,
    first_stage: Stage,
    teardown: Teardown,
    work: F,
) -> JoinHandle<Result<T, JobError>>
where
    T: Send + 'static,
    F: FnOnce(&mut JobContext) -> Result<T, JobError> + Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        let deadline = config.deadline;
        let (result, dir) = match JobContext::new(config) {
            Ok(mut ctx) => (work(&mut ctx), Some(ctx.into_temp_dir())),
            Err(e) => (Err(no_temp_dir(&e, first_stage)), None),
        };
        let end = WorkerEnd {
            pool: teardown.pool,
            client_gone: teardown.client_gone.load(Ordering::SeqCst),
            deadline_passed: Instant::now() >= deadline,
            failure: result.as_ref().err().map(|e| &e.kind),
        };
        if let Some(dir) = dir {
            teardown.cleaner.clean(dir, &end);
        }
        teardown.slots.worker_stopped(&teardown.slot, &end);
        result
    })
}

/// The job's failure when its temp dir cannot be made (a full or read-only disk).
fn no_temp_dir(e: &std::io::Error, stage: Stage) -> JobError {
    JobError {
        kind: JobErrorKind::Failed {
            message: format!("cannot create the job's temp dir: {e}"),
            backtrace: String::new(),
        },
        failed_stage: stage,
        completed_stages: Vec::new(),
    }
}
