//! Where a job is, readable from another thread while it runs.

use std::sync::Mutex;
use std::time::Duration;

use plimsoll_spec::Stage;

/// Where a job is, readable from another thread (the server reads it on timeout and for logs).
#[derive(Debug, Default)]
pub struct Progress {
    state: Mutex<ProgressState>,
}

#[derive(Debug, Default)]
struct ProgressState {
    current: Option<Stage>,
    completed: Vec<Stage>,
    timings: Vec<(Stage, Duration)>,
    gaps: Vec<(Stage, Duration)>,
}

impl Progress {
    /// The stage running now (or the one that failed), and the stages completed, in order.
    pub fn snapshot(&self) -> (Option<Stage>, Vec<Stage>) {
        let state = self.lock();
        (state.current, state.completed.clone())
    }

    /// Wall time of every stage run so far, completed or failed, in order.
    pub fn stage_timings(&self) -> Vec<(Stage, Duration)> {
        self.lock().timings.clone()
    }

    /// For every stage run so far, the longest stretch it went without a checkpoint (from its
    /// start, between checkpoints, to its end): how late it could notice a cancel (B3).
    pub fn stage_checkpoint_gaps(&self) -> Vec<(Stage, Duration)> {
        self.lock().gaps.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        // A poisoned lock only means a panic elsewhere; the state itself is always consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn start(&self, stage: Stage) {
        self.lock().current = Some(stage);
    }

    pub(super) fn finish(&self, stage: Stage, elapsed: Duration, gap: Duration, ok: bool) {
        let mut state = self.lock();
        state.timings.push((stage, elapsed));
        state.gaps.push((stage, gap));
        if ok {
            state.completed.push(stage);
            state.current = None;
        }
    }
}
