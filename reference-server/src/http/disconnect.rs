//! How a client disconnect reaches its job (B3): hyper drops the handler's future when the
//! connection goes, and this guard's `Drop` hands the job's cancellation token to the server's
//! [`crate::bounds::OnDisconnect`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use plimsoll_spec::Pool;
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// Armed from the request's arrival at its pool until its answer is ready.
pub struct DisconnectGuard {
    job: CancellationToken,
    /// Set when the client went away (as opposed to a deadline or shutdown cancel).
    client_gone: Arc<AtomicBool>,
    armed: AtomicBool,
    state: AppState,
    pool: Pool,
}

impl DisconnectGuard {
    /// A disarmed guard for the job `job` of `pool`.
    pub fn new(state: &AppState, pool: Pool, job: CancellationToken) -> DisconnectGuard {
        DisconnectGuard {
            job,
            client_gone: Arc::new(AtomicBool::new(false)),
            armed: AtomicBool::new(false),
            state: state.clone(),
            pool,
        }
    }

    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// The answer is ready: a drop from now on is not a disconnect.
    pub fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }

    /// Set once the client is gone; the worker reads it when it stops.
    pub fn client_gone(&self) -> Arc<AtomicBool> {
        self.client_gone.clone()
    }
}

impl Drop for DisconnectGuard {
    // clause: B3 — a client disconnect cancels its job
    fn drop(&mut self) {
        if !self.armed.load(Ordering::SeqCst) {
            return;
        }
        self.client_gone.store(true, Ordering::SeqCst);
        self.state.components().disconnect.client_gone(&self.job);
        self.state.metrics.cancelled(self.pool);
    }
}
