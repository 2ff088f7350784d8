//! Every failure the API can answer, and the one place each becomes an HTTP response (with its
//! F3 log line).

use plimsoll_spec::{ErrorCode, Stage};

use crate::job::{JobError, JobErrorKind};

/// A failed request, with the id it is answered under.
#[derive(Debug)]
pub struct ApiError {
    pub request_id: String,
    pub pool: &'static str,
    pub kind: ErrorKind,
}

#[derive(Debug)]
pub enum ErrorKind {
    /// Refused before admission (bad input, hooks disabled, slow upload): a 4xx with `code`.
    Rejected { code: ErrorCode, detail: String },
    /// The pool is full (T3).
    Overloaded { retry_after_s: u64, detail: String },
    /// The deadline passed (B1) while `failed_stage` ran (or queued).
    Timeout {
        failed_stage: Stage,
        completed_stages: Vec<Stage>,
        timeout_ms: u64,
    },
    /// The job ended in error (B2, F1, F2 found while decoding). Boxed: errors travel in
    /// `Result`s, and the common path should stay small.
    Job(Box<JobError>),
}

impl ApiError {
    pub fn rejected(
        request_id: &str,
        pool: &'static str,
        code: ErrorCode,
        detail: impl Into<String>,
    ) -> ApiError {
        ApiError {
            request_id: request_id.to_owned(),
            pool,
            kind: ErrorKind::Rejected {
                code,
                detail: detail.into(),
            },
        }
    }

    /// The contract's code for this error.
    pub fn code(&self) -> ErrorCode {
        match &self.kind {
            ErrorKind::Rejected { code, .. } => *code,
            ErrorKind::Overloaded { .. } => ErrorCode::Overloaded,
            ErrorKind::Timeout { .. } => ErrorCode::Timeout,
            ErrorKind::Job(e) => e.kind.code().unwrap_or(ErrorCode::Overloaded),
        }
    }

    /// The stage for `failed_stage` and the log's `stage`, with what finished before it.
    pub fn stages(&self) -> Option<(Stage, &[Stage])> {
        match &self.kind {
            ErrorKind::Timeout {
                failed_stage,
                completed_stages,
                ..
            } => Some((*failed_stage, completed_stages)),
            ErrorKind::Job(e) => Some((e.failed_stage, &e.completed_stages)),
            _ => None,
        }
    }

    /// What went wrong, for `detail`, `error` and the log.
    pub fn detail(&self) -> String {
        match &self.kind {
            ErrorKind::Rejected { detail, .. } | ErrorKind::Overloaded { detail, .. } => {
                detail.clone()
            }
            ErrorKind::Timeout {
                failed_stage,
                timeout_ms,
                ..
            } => format!(
                "{} exceeded its {timeout_ms} ms timeout during {failed_stage}",
                self.pool
            ),
            ErrorKind::Job(e) => match &e.kind {
                JobErrorKind::Interrupted(crate::job::Interrupt::Cancelled) => {
                    "the server is shutting down; the job was cancelled".to_owned()
                }
                JobErrorKind::Panicked { message, .. } => {
                    format!("{} panicked: {message}", e.failed_stage)
                }
                other => format!("{}: {other}", e.failed_stage),
            },
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
    pub fn outcome(&self) -> &'static str {
        match self.code() {
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Timeout => "timeout",
            ErrorCode::MemoryCapExceeded => "memory_cap_exceeded",
            ErrorCode::StageFailed => "stage_failed",
            _ => "invalid",
        }
    }
}
