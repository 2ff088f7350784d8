//! How a client disconnect reaches its job (B3): hyper drops the handler's future when the
//! connection goes, and this guard's `Drop` hands the job's cancellation token to the server's
//! [`crate::bounds::OnDisconnect`] (and the slot the job holds, if any, to its
//! [`crate::worker::SlotRelease`]).
//!
//! Only a client that went away counts as a cancellation (`plimsoll_cancellations_total`): a
//! request dropped after its deadline passed is a timeout (B1), and one dropped because the
//! server itself is stopping is neither.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use plimsoll_spec::{Outcome, Pool};
use tokio_util::sync::CancellationToken;

use crate::admission::Slot;
use crate::state::AppState;

/// Armed from the request's arrival at its pool until its answer is ready.
pub(super) struct DisconnectGuard {
    /// The job's cancellation token, a child of the server's shutdown token: made when first
    /// asked for, so a request refused at once (T3) never touches the shared parent.
    job: OnceLock<CancellationToken>,
    /// Set when the client went away (as opposed to a deadline or shutdown cancel).
    client_gone: Arc<AtomicBool>,
    armed: Mutex<Armed>,
    state: AppState,
    pool: Pool,
}

/// What the guard knows about its request while it is armed.
#[derive(Default)]
struct Armed {
    /// `None`: disarmed (not yet arrived, or answered).
    deadline: Option<Instant>,
    /// The worker slot the job holds, once it has one.
    slot: Option<Slot>,
}

impl DisconnectGuard {
    /// A disarmed guard for a job of `pool`.
    pub(super) fn new(state: &AppState, pool: Pool) -> DisconnectGuard {
        DisconnectGuard {
            job: OnceLock::new(),
            client_gone: Arc::new(AtomicBool::new(false)),
            armed: Mutex::new(Armed::default()),
            state: state.clone(),
            pool,
        }
    }

    /// The job's cancellation token (cancelled when the server's drain time is up).
    pub(super) fn job(&self) -> &CancellationToken {
        self.job.get_or_init(|| self.state.shutdown.child_token())
    }

    fn lock(&self) -> MutexGuard<'_, Armed> {
        // Nothing panics while the lock is held; recover the data regardless.
        self.armed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The request arrived at its pool; its deadline falls at `deadline`.
    pub(super) fn arm(&self, deadline: Instant) {
        self.lock().deadline = Some(deadline);
    }

    /// The job got `slot` and runs until `deadline`.
    pub(super) fn running(&self, slot: &Slot, deadline: Instant) {
        let mut armed = self.lock();
        if armed.deadline.is_some() {
            armed.deadline = Some(deadline);
            armed.slot = Some(slot.clone());
        }
    }

    /// The answer is ready: a drop from now on is not a disconnect.
    pub(super) fn disarm(&self) {
        *self.lock() = Armed::default();
    }

    /// Set once the client is gone; the worker reads it when it stops.
    pub(super) fn client_gone(&self) -> Arc<AtomicBool> {
        self.client_gone.clone()
    }
}

impl Drop for DisconnectGuard {
    // clause: B3 — a client disconnect cancels its job
    fn drop(&mut self) {
        let Armed { deadline, slot } = std::mem::take(&mut *self.lock());
        let Some(deadline) = deadline else {
            return;
        };
        self.client_gone.store(true, Ordering::SeqCst);
        let parts = self.state.components();
        parts.disconnect.client_gone(self.job());
        if let Some(slot) = &slot {
            parts.slot_release.client_gone(slot, self.pool);
        }
        // clause: B3 — only a client that went away is a cancellation; never a timeout (B1)
        // nor a server that drops its connections while stopping
        if self.state.shutdown.is_cancelled() {
            self.state.metrics.outcome(self.pool, Outcome::Overloaded);
        } else if Instant::now() >= deadline {
            self.state.metrics.outcome(self.pool, Outcome::Timeout);
        } else {
            self.state.metrics.cancelled(self.pool);
        }
    }
}
