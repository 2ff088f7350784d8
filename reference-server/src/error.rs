//! Every failure the API answers, typed. [`crate::problem`] is the one place each becomes an
//! HTTP response and an F3 log line.

use std::borrow::Cow;

use plimsoll_spec::{ErrorCode, Outcome, Pool, Stage};

use plimsoll_engine::job::{Interrupt, JobError, JobErrorKind};

/// A failed request, with the id it is answered under.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct ApiError {
    pub request_id: String,
    /// The pool whose endpoint failed (the `pool` metric label and log field); `None` for a
    /// request no pool endpoint took (404).
    pub pool: Option<Pool>,
    pub kind: ErrorKind,
}

/// What went wrong; the `Display` text is the body's `detail` and the log's `error`.
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    /// Refused before admission (bad input, hooks disabled, slow upload): a 4xx with `code`.
    #[error("{detail}")]
    Rejected { code: ErrorCode, detail: String },
    /// The pool is full (T3).
    #[error("{detail}")]
    Overloaded { retry_after_s: u64, detail: String },
    /// The deadline passed (B1) while `failed_stage` ran (or queued).
    #[error("{pool} exceeded its {timeout_ms} ms timeout during {failed_stage}")]
    Timeout {
        pool: Pool,
        failed_stage: Stage,
        completed_stages: Vec<Stage>,
        timeout_ms: u64,
    },
    /// The server is stopping: its drain time ran out and the job was cancelled at a checkpoint.
    /// (A job whose client went away is cancelled too, but nobody is left to answer.)
    #[error("the server is shutting down; the job was cancelled")]
    ShuttingDown {
        failed_stage: Stage,
        completed_stages: Vec<Stage>,
    },
    /// The job failed (B2, F1, or F2 found while running). Boxed: errors travel in `Result`s,
    /// and the common path should stay small.
    #[error("{}", job_detail(.0))]
    Job(Box<JobError>),
}

fn job_detail(e: &JobError) -> String {
    match &e.kind {
        JobErrorKind::Panicked { message, .. } => format!("{} panicked: {message}", e.failed_stage),
        other => format!("{}: {other}", e.failed_stage),
    }
}

impl ErrorKind {
    /// The `Display` text, borrowed where the kind holds it whole (a refusal's, every time the
    /// server is full: no formatting on the T3 path).
    pub fn message(&self) -> Cow<'_, str> {
        match self {
            ErrorKind::Rejected { detail, .. } | ErrorKind::Overloaded { detail, .. } => {
                Cow::Borrowed(detail)
            }
            other => Cow::Owned(other.to_string()),
        }
    }

    pub fn rejected(code: ErrorCode, detail: impl Into<String>) -> ErrorKind {
        ErrorKind::Rejected {
            code,
            detail: detail.into(),
        }
    }

    /// How a job of `pool` that ended in `error` is answered: a deadline is a timeout, a
    /// cancellation that reaches an answer is the server shutting down, the rest are failures.
    pub fn from_job(error: JobError, pool: Pool, timeout_ms: u64) -> ErrorKind {
        match error.kind {
            JobErrorKind::Interrupted(Interrupt::DeadlineExceeded) => ErrorKind::Timeout {
                pool,
                failed_stage: error.failed_stage,
                completed_stages: error.completed_stages,
                timeout_ms,
            },
            JobErrorKind::Interrupted(Interrupt::Cancelled) => ErrorKind::ShuttingDown {
                failed_stage: error.failed_stage,
                completed_stages: error.completed_stages,
            },
            _ => ErrorKind::Job(Box::new(error)),
        }
    }
}

impl ApiError {
    pub fn new(request_id: &str, pool: Option<Pool>, kind: ErrorKind) -> ApiError {
        ApiError {
            request_id: request_id.to_owned(),
            pool,
            kind,
        }
    }

    pub fn rejected(
        request_id: &str,
        pool: Option<Pool>,
        code: ErrorCode,
        detail: impl Into<String>,
    ) -> ApiError {
        ApiError::new(request_id, pool, ErrorKind::rejected(code, detail))
    }

    /// The contract's code for this error.
    pub fn code(&self) -> ErrorCode {
        match &self.kind {
            ErrorKind::Rejected { code, .. } => *code,
            ErrorKind::Overloaded { .. } => ErrorCode::Overloaded,
            ErrorKind::Timeout { .. } => ErrorCode::Timeout,
            // The contract has no code of its own for a stopping server; to a client it is a
            // full one (503, try again), without a Retry-After estimate.
            ErrorKind::ShuttingDown { .. } => ErrorCode::Overloaded,
            // `from_job` never leaves a cancellation here, so every kind has its code.
            ErrorKind::Job(e) => e.kind.code().unwrap_or(ErrorCode::StageFailed),
        }
    }

    /// The stage for `failed_stage` and the log's `stage`, with what finished before it.
    pub fn stages(&self) -> Option<(Stage, &[Stage])> {
        match &self.kind {
            ErrorKind::Timeout {
                failed_stage,
                completed_stages,
                ..
            }
            | ErrorKind::ShuttingDown {
                failed_stage,
                completed_stages,
            } => Some((*failed_stage, completed_stages)),
            ErrorKind::Job(e) => Some((e.failed_stage, &e.completed_stages)),
            ErrorKind::Rejected { .. } | ErrorKind::Overloaded { .. } => None,
        }
    }

    /// The backtrace behind a stage failure, if one was captured.
    pub fn backtrace(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::Job(e) => e.kind.backtrace(),
            _ => None,
        }
    }

    /// The `outcome` label of `plimsoll_requests_total`.
    pub fn outcome(&self) -> Outcome {
        match self.code() {
            ErrorCode::Overloaded => Outcome::Overloaded,
            ErrorCode::Timeout => Outcome::Timeout,
            ErrorCode::MemoryCapExceeded => Outcome::MemoryCapExceeded,
            ErrorCode::StageFailed => Outcome::StageFailed,
            _ => Outcome::Invalid,
        }
    }
}
