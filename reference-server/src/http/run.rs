//! One pipeline job, from admission to its answer, composed of small pieces with their own
//! seams: admission ([`crate::admission::Admission`]), the disconnect guard
//! ([`super::disconnect`]), the deadline and memory cap ([`crate::bounds`]), the job's temp dir
//! and the blocking worker with its teardown ([`crate::worker`]).
//!
//! The slot is held by the worker and given back when the worker actually stops, so a timed-out
//! or cancelled job keeps its slot until its next checkpoint (at most the B3 bound).

use std::time::Duration;

use axum::body::Bytes;
use plimsoll_spec::{HookDirective, Pool, Stage};

use super::disconnect::DisconnectGuard;
use super::timing::Timing;
use crate::admission::{Admitted, Denied, Entry, Slot};
use crate::error::{ApiError, ErrorKind};
use crate::job::{JobConfig, JobContext, JobError, JobErrorKind};
use crate::state::AppState;
use crate::upload::Upload;
use crate::worker::{self, Teardown};

/// Which job: its pool, its timeout (B1) and the stage it starts with (named when it fails
/// before any stage ran).
pub struct Job {
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
pub async fn run_job<T, F>(
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
    let fail = |kind| ApiError::new(id, Some(job.pool), kind);
    let cancel = state.shutdown.child_token();
    let guard = DisconnectGuard::new(state, job.pool, cancel.clone());

    let admitted = parts
        .admission
        .admit(Entry {
            pool: state.pool(job.pool),
            upload,
            timeout: job.timeout,
            on_arrival: &|| guard.arm(),
        })
        .await;
    let Admitted {
        body,
        permit,
        arrived,
    } = match admitted {
        Ok(admitted) => admitted,
        Err(denied) => {
            guard.disarm();
            return Err(fail(denial(state, &job, denied)));
        }
    };
    let started = permit.granted();
    let deadline = parts.deadline.deadline(arrived, started, job.timeout);

    let ctx = JobContext::new(JobConfig {
        cancel: cancel.clone(),
        deadline,
        memory_cap_bytes: parts
            .memory_cap
            .cap_bytes(state.config.contract.clauses.b2.value.memory_cap_mb),
        temp_root: state.config.temp_root.clone(),
        hooks,
    });
    let ctx = match ctx {
        Ok(ctx) => ctx,
        Err(e) => {
            guard.disarm();
            return Err(fail(ErrorKind::Job(Box::new(JobError {
                kind: JobErrorKind::Failed {
                    message: format!("cannot create the job's temp dir: {e}"),
                    backtrace: String::new(),
                },
                failed_stage: job.first_stage,
                completed_stages: Vec::new(),
            }))));
        }
    };
    let progress = ctx.progress();
    let slot = Slot::new(permit);
    let teardown = Teardown {
        pool: job.pool,
        slot: slot.clone(),
        client_gone: guard.client_gone(),
        cleaner: parts.temp_cleaner.clone(),
        slots: parts.slot_release.clone(),
    };
    let handle = worker::spawn(ctx, teardown, move |ctx| work(ctx, body));

    // clause: B1 — answered 504 at the deadline with the stage then running
    let joined = tokio::time::timeout_at(deadline.into(), handle).await;
    guard.disarm();
    parts.slot_release.answered(&slot);
    let snapshot = || {
        let (current, completed) = progress.snapshot();
        (current.unwrap_or(job.first_stage), completed)
    };
    match joined {
        Err(_) => {
            cancel.cancel();
            let (current, completed) = snapshot();
            Err(fail(job.timed_out(current, completed)))
        }
        Ok(Err(join_error)) => {
            let (failed_stage, completed_stages) = snapshot();
            Err(fail(ErrorKind::Job(Box::new(JobError {
                kind: JobErrorKind::Panicked {
                    message: join_error.to_string(),
                    backtrace: String::new(),
                },
                failed_stage,
                completed_stages,
            }))))
        }
        Ok(Ok(Ok(value))) => Ok((
            value,
            Timing {
                queue: started - arrived,
                run: started.elapsed(),
            },
        )),
        Ok(Ok(Err(e))) => Err(fail(ErrorKind::from_job(e, job.pool, job.timeout_ms()))),
    }
}

/// The answer to a request that got no slot.
fn denial(state: &AppState, job: &Job, denied: Denied) -> ErrorKind {
    match denied {
        Denied::Upload(kind) => kind,
        Denied::QueueTimeout => job.timed_out(Stage::Queue, Vec::new()),
        // clause: T3 — 503 overloaded with Retry-After, answered at once
        Denied::Full(refused) => {
            let (busy, queued) = state.pool(job.pool).load();
            ErrorKind::Overloaded {
                retry_after_s: refused.retry_after_s,
                detail: format!(
                    "all {busy} {} workers are busy and {queued} requests are queued; retry after {} s",
                    job.pool, refused.retry_after_s
                ),
            }
        }
    }
}
