//! One pipeline job, from admission to its answer, composed of small pieces with their own
//! seams: admission ([`crate::admission::Admission`]), the disconnect guard
//! ([`super::disconnect`]), the deadline and memory cap ([`crate::bounds`]), the job's temp dir
//! and the blocking worker with its teardown ([`crate::worker`]).
//!
//! The slot is held by the worker and given back when the worker actually stops, so a timed-out
//! or cancelled job keeps its slot until its next checkpoint (at most the B3 bound).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use plimsoll_spec::{HookDirective, Pool, Stage};
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

use super::disconnect::DisconnectGuard;
use super::timing::Timing;
use crate::admission::{Admitted, Denied, Entry, Refused, Slot};
use crate::error::{ApiError, ErrorKind};
use crate::state::AppState;
use crate::upload::{Received, Upload};
use crate::worker::{self, Teardown};
use plimsoll_engine::job::{JobConfig, JobContext, JobError, JobErrorKind, Progress};

/// Which job: its pool, its timeout (B1) and the stage it starts with (named when it fails
/// before any stage ran).
pub(super) struct Job {
    pub pool: Pool,
    pub timeout: Duration,
    pub first_stage: Stage,
}

impl Job {
    fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX)
    }

    fn timed_out(&self, failed_stage: Stage, completed_stages: Vec<Stage>) -> ErrorKind {
        ErrorKind::Timeout {
            pool: self.pool,
            failed_stage,
            completed_stages,
            timeout_ms: self.timeout_ms(),
        }
    }
}

/// Admits the request, runs `work` on its body on a worker under the deadline, and returns the
/// result with its queue and run durations.
pub(super) async fn run_job<T, F>(
    state: &AppState,
    id: &str,
    job: Job,
    hooks: Vec<HookDirective>,
    upload: Upload,
    work: F,
) -> Result<(T, Timing), ApiError>
where
    T: Send + 'static,
    F: FnOnce(&mut JobContext, Bytes) -> Result<T, JobError> + Send + 'static,
{
    let parts = state.components();
    let guard = DisconnectGuard::new(state, job.pool);
    let answer = |result: Result<_, ErrorKind>| {
        guard.disarm();
        result.map_err(|kind| ApiError::new(id, Some(job.pool), kind))
    };

    let Admitted {
        upload: Received { body, reservation },
        permit,
        arrived,
    } = match admit(state, &job, upload, &guard).await {
        Ok(admitted) => admitted,
        Err(kind) => return answer(Err(kind)),
    };
    let started = permit.granted();
    let deadline = parts.deadline.deadline(arrived, started, job.timeout);
    let cancel = guard.job().clone();
    let config = job_config(state, job.pool, cancel.clone(), deadline, hooks, body.len());
    let progress = config.progress.clone();
    let slot = Slot::new(permit);
    guard.running(&slot, deadline);
    let teardown = Teardown {
        pool: job.pool,
        slot: slot.clone(),
        client_gone: guard.client_gone(),
        cleaner: parts.temp_cleaner.clone(),
        slots: parts.slot_release.clone(),
    };
    // The body's share of the upload budget goes back when the job has dropped the body.
    let handle = worker::spawn(config, job.first_stage, teardown, move |ctx| {
        let _held = reservation;
        work(ctx, body)
    });

    // clause: B1 — answered 504 at the deadline with the stage then running
    let joined = tokio::time::timeout_at(deadline.into(), handle).await;
    let ended = match joined {
        Err(_) => {
            // The worker stops at its next checkpoint and keeps its slot until then.
            cancel.cancel();
            let (current, completed) = snapshot(&progress, state, &job);
            Err(job.timed_out(current, completed))
        }
        Ok(Err(join_error)) => Err(panicked(join_error, &progress, state, &job)),
        Ok(Ok(result)) => result.map_err(|e| ErrorKind::from_job(e, job.pool, job.timeout_ms())),
    };
    let timing = Timing {
        queue: started - arrived,
        run: started.elapsed(),
    };
    answer(ended.map(|value| (value, timing)))
}

/// Reads the upload and takes a slot through the server's [`crate::admission::Admission`]; the
/// disconnect guard is armed once the request arrives at the pool.
async fn admit(
    state: &AppState,
    job: &Job,
    upload: Upload,
    guard: &DisconnectGuard,
) -> Result<Admitted, ErrorKind> {
    let entry = Entry {
        pool: state.pool(job.pool),
        upload,
        timeout: job.timeout,
        on_arrival: &|arrived| guard.arm(arrived + job.timeout),
    };
    match state.components().admission.admit(entry).await {
        Ok(admitted) => Ok(admitted),
        Err(Denied::Upload(kind)) => Err(kind),
        // clause: B5 — refused at once, as an overload, when the upload budget is full
        Err(Denied::OverBudget) => {
            let retry_after_s = state.pool(job.pool).retry_after_s();
            Err(ErrorKind::Overloaded {
                retry_after_s,
                detail: format!(
                    "the server holds as many request bodies as its upload budget allows; retry after {retry_after_s} s"
                ),
            })
        }
        Err(Denied::QueueTimeout) => Err(job.timed_out(Stage::Queue, Vec::new())),
        // clause: T3 — 503 overloaded with Retry-After, answered at once
        Err(Denied::Full(Refused {
            retry_after_s,
            busy,
            queued,
        })) => Err(ErrorKind::Overloaded {
            retry_after_s,
            detail: refusal_detail(busy, job.pool, queued, retry_after_s),
        }),
    }
}

/// `all 4 digitize workers are busy and 16 requests are queued; retry after 3 s`, written piece
/// by piece: through `format!` it was a twentieth of a refusal's instructions (callgrind,
/// docs/benchmarks.md).
fn refusal_detail(busy: usize, pool: Pool, queued: usize, retry_after_s: u64) -> String {
    let mut number = itoa::Buffer::new();
    let mut detail = String::with_capacity(96);
    detail.push_str("all ");
    detail.push_str(number.format(busy));
    detail.push(' ');
    detail.push_str(pool.as_str());
    detail.push_str(" workers are busy and ");
    detail.push_str(number.format(queued));
    detail.push_str(" requests are queued; retry after ");
    detail.push_str(number.format(retry_after_s));
    detail.push_str(" s");
    detail
}

/// What the job is allowed: its deadline, its pool's memory cap (the server's
/// [`crate::bounds::MemoryCap`], already charged with the body it holds; a pool that declares
/// none has none), its test hooks and where its temp dir goes (made by the worker).
fn job_config(
    state: &AppState,
    pool: Pool,
    cancel: CancellationToken,
    deadline: Instant,
    hooks: Vec<HookDirective>,
    body_bytes: usize,
) -> JobConfig {
    let contract_mb = state
        .config
        .contract
        .pool(pool)
        .memory_cap_mb
        .unwrap_or(u64::MAX);
    JobConfig {
        cancel,
        deadline,
        memory_cap_bytes: state.components().memory_cap.cap_bytes(contract_mb),
        upload_bytes: body_bytes as u64,
        temp_root: state.config.temp_root.clone(),
        hooks,
        progress: Default::default(),
    }
}

/// Where the job is (rule `deadline-stage`): the running stage and the completed ones. Before
/// any stage ran, the first; between two stages, the one about to start; after the last, the
/// last, which then is not among the completed ones.
fn snapshot(progress: &Progress, state: &AppState, job: &Job) -> (Stage, Vec<Stage>) {
    let (current, mut completed) = progress.snapshot();
    if let Some(stage) = current {
        return (stage, completed);
    }
    let Some(&last) = completed.last() else {
        return (job.first_stage, completed);
    };
    let stages = state.config.contract.pool(job.pool).stages;
    let next = stages.iter().skip_while(|s| **s != last).nth(1);
    match next {
        Some(&next) => (next, completed),
        None => {
            completed.pop();
            (last, completed)
        }
    }
}

/// A panic that escaped the job's own capture (the worker thread itself died).
fn panicked(join_error: JoinError, progress: &Progress, state: &AppState, job: &Job) -> ErrorKind {
    let (failed_stage, completed_stages) = snapshot(progress, state, job);
    ErrorKind::Job(Box::new(JobError {
        kind: JobErrorKind::Panicked {
            message: join_error.to_string(),
            backtrace: String::new(),
        },
        failed_stage,
        completed_stages,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_how_full_the_pool_is_and_when_to_retry() {
        assert_eq!(
            refusal_detail(4, Pool::Digitize, 16, 3),
            "all 4 digitize workers are busy and 16 requests are queued; retry after 3 s"
        );
        assert_eq!(
            refusal_detail(0, Pool::Export, 0, 10_000),
            "all 0 export workers are busy and 0 requests are queued; retry after 10000 s"
        );
    }
}
