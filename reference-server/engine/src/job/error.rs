//! How a job ends badly: an [`Interrupt`] found at a checkpoint, a [`StageError`] a stage's own
//! code reports, and the [`JobError`] every such ending becomes, naming the failed stage (F1).

use plimsoll_spec::{ErrorCode, Stage};

/// Why a job must stop now, found at a checkpoint or when charging memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Interrupt {
    #[error("cancelled")]
    Cancelled,
    #[error("deadline exceeded")]
    DeadlineExceeded,
    /// `requested_bytes` is the total the job would hold had the charge been granted.
    #[error("memory cap exceeded: {requested_bytes} bytes needed, cap is {cap_bytes} bytes")]
    MemoryCapExceeded {
        requested_bytes: u64,
        cap_bytes: u64,
    },
}

/// How a stage's own code reports failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Interrupted(#[from] Interrupt),
    /// The input is at fault (answered with a 400 and `code`).
    #[error("{message}")]
    Invalid { code: ErrorCode, message: String },
    /// The stage itself failed (answered with `stage_failed`).
    #[error("{message}")]
    Failed { message: String },
}

impl StageError {
    pub fn invalid(code: ErrorCode, message: impl Into<String>) -> Self {
        StageError::Invalid {
            code,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        StageError::Failed {
            message: message.into(),
        }
    }
}

/// A failed job: what went wrong, in which stage, and what had finished before it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} (stage `{failed_stage}`)")]
pub struct JobError {
    pub kind: JobErrorKind,
    pub failed_stage: Stage,
    /// The stages that completed before `failed_stage`, in order.
    pub completed_stages: Vec<Stage>,
}

/// What went wrong. An interrupt keeps its own type, so "the job was stopped" and "the job
/// failed" cannot be confused when the server chooses the answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobErrorKind {
    #[error(transparent)]
    Interrupted(#[from] Interrupt),
    #[error("{message}")]
    Invalid { code: ErrorCode, message: String },
    #[error("{message}")]
    Failed { message: String, backtrace: String },
    #[error("panicked: {message}")]
    Panicked { message: String, backtrace: String },
}

impl JobErrorKind {
    /// The contract's error code for this outcome; `None` for a cancellation, whose answer
    /// depends on who cancelled (the server decides).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            JobErrorKind::Interrupted(Interrupt::Cancelled) => None,
            JobErrorKind::Interrupted(Interrupt::DeadlineExceeded) => Some(ErrorCode::Timeout),
            JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. }) => {
                Some(ErrorCode::MemoryCapExceeded)
            }
            JobErrorKind::Invalid { code, .. } => Some(*code),
            JobErrorKind::Failed { .. } | JobErrorKind::Panicked { .. } => {
                Some(ErrorCode::StageFailed)
            }
        }
    }

    /// The captured stack of a failure or panic, for the F3 error log.
    pub fn backtrace(&self) -> Option<&str> {
        match self {
            JobErrorKind::Failed { backtrace, .. } | JobErrorKind::Panicked { backtrace, .. } => {
                Some(backtrace)
            }
            _ => None,
        }
    }
}
