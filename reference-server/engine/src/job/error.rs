//! How a job ends badly: an [`Interrupt`] found at a checkpoint, a [`StageError`] a stage's own
//! code reports, and the [`JobError`] every such ending becomes, naming the failed stage (F1).

use plimsoll_spec::{ErrorCode, Stage};

/// Why a job must stop now, found at a checkpoint or when charging memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Interrupt {
    /// The job's cancellation token fired (a disconnect or a shutdown).
    #[error("cancelled")]
    Cancelled,
    /// The job is past its deadline (B1).
    #[error("deadline exceeded")]
    DeadlineExceeded,
    /// `requested_bytes` is the total the job would hold had the charge been granted.
    #[error("memory cap exceeded: {requested_bytes} bytes needed, cap is {cap_bytes} bytes")]
    MemoryCapExceeded {
        /// The total the job would have held.
        requested_bytes: u64,
        /// The job's memory cap.
        cap_bytes: u64,
    },
}

/// How a stage's own code reports failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    /// A checkpoint or a charge stopped the stage.
    #[error(transparent)]
    Interrupted(#[from] Interrupt),
    /// The input is at fault (answered with a 400 and `code`).
    #[error("{message}")]
    Invalid {
        /// The contract's error code for the refusal.
        code: ErrorCode,
        /// What is wrong with the input, for the client.
        message: String,
    },
    /// The stage itself failed (answered with `stage_failed`).
    #[error("{message}")]
    Failed {
        /// What failed, for the log and the client.
        message: String,
    },
}

impl StageError {
    /// The input is at fault: a refusal with `code`.
    pub fn invalid(code: ErrorCode, message: impl Into<String>) -> Self {
        StageError::Invalid {
            code,
            message: message.into(),
        }
    }

    /// The stage itself failed, through no fault of the input.
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
    /// What went wrong.
    pub kind: JobErrorKind,
    /// The stage it went wrong in (F1: every failure names its stage).
    pub failed_stage: Stage,
    /// The stages that completed before `failed_stage`, in order.
    pub completed_stages: Vec<Stage>,
}

/// What went wrong. An interrupt keeps its own type, so "the job was stopped" and "the job
/// failed" cannot be confused when the server chooses the answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobErrorKind {
    /// The job was stopped: cancelled, timed out or over its memory cap.
    #[error(transparent)]
    Interrupted(#[from] Interrupt),
    /// The input is at fault (a 400 with `code`).
    #[error("{message}")]
    Invalid {
        /// The contract's error code for the refusal.
        code: ErrorCode,
        /// What is wrong with the input, for the client.
        message: String,
    },
    /// A stage failed through no fault of the input.
    #[error("{message}")]
    Failed {
        /// What failed.
        message: String,
        /// Where it failed, for the log.
        backtrace: String,
    },
    /// A stage panicked; the panic was caught so the worker survives it.
    #[error("panicked: {message}")]
    Panicked {
        /// The panic's message.
        message: String,
        /// Where it panicked, for the log.
        backtrace: String,
    },
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
