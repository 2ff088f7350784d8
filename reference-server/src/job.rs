//! The job context: everything one pipeline run needs to stop early and clean up after itself.
//!
//! A job owns a private temp directory (removed when the context drops, whatever the exit path),
//! a memory budget that stages charge before they allocate, a cancellation token and a deadline.
//! Stages call [`JobContext::checkpoint`] inside their long loops, so cancellation, the deadline
//! and the budget are observed within milliseconds rather than at the next stage boundary
//! (contract clauses B1, B2, B3). [`JobContext::run_stage`] turns every way a stage can end
//! (success, interrupt, invalid input, error, panic) into one [`JobError`] that names the failed
//! stage and the stages completed before it (clause F1).

use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use plimsoll_spec::{ErrorCode, HookDirective, Stage};
use tokio_util::sync::CancellationToken;

/// What a job is allowed: how long, how much memory, where its files go, which test hooks apply.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Cancelled when the client goes away (B3).
    pub cancel: CancellationToken,
    /// The job fails with [`Interrupt::DeadlineExceeded`] at the first checkpoint past this (B1).
    pub deadline: Instant,
    /// The per-request memory budget (B2).
    pub memory_cap_bytes: u64,
    /// Parent of the job's private temp directory.
    pub temp_root: PathBuf,
    /// Test hooks (`X-Plimsoll-Hook`), already parsed and authorised by the server.
    pub hooks: Vec<HookDirective>,
}

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobErrorKind {
    #[error("cancelled")]
    Cancelled,
    #[error("deadline exceeded")]
    DeadlineExceeded,
    #[error("memory cap exceeded: {requested_bytes} bytes needed, cap is {cap_bytes} bytes")]
    MemoryCapExceeded {
        requested_bytes: u64,
        cap_bytes: u64,
    },
    #[error("{message}")]
    Invalid { code: ErrorCode, message: String },
    #[error("{message}")]
    Failed { message: String, backtrace: String },
    #[error("panicked: {message}")]
    Panicked { message: String, backtrace: String },
}

impl JobErrorKind {
    /// The contract's error code for this outcome; `None` for a cancellation, which has no
    /// response (the client is gone).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            JobErrorKind::Cancelled => None,
            JobErrorKind::DeadlineExceeded => Some(ErrorCode::Timeout),
            JobErrorKind::MemoryCapExceeded { .. } => Some(ErrorCode::MemoryCapExceeded),
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

impl From<Interrupt> for JobErrorKind {
    fn from(interrupt: Interrupt) -> Self {
        match interrupt {
            Interrupt::Cancelled => JobErrorKind::Cancelled,
            Interrupt::DeadlineExceeded => JobErrorKind::DeadlineExceeded,
            Interrupt::MemoryCapExceeded {
                requested_bytes,
                cap_bytes,
            } => JobErrorKind::MemoryCapExceeded {
                requested_bytes,
                cap_bytes,
            },
        }
    }
}

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

    fn start(&self, stage: Stage) {
        self.lock().current = Some(stage);
    }

    fn finish(&self, stage: Stage, elapsed: Duration, gap: Duration, ok: bool) {
        let mut state = self.lock();
        state.timings.push((stage, elapsed));
        state.gaps.push((stage, gap));
        if ok {
            state.completed.push(stage);
            state.current = None;
        }
    }
}

/// The memory budget shared by the job and its outstanding charges.
#[derive(Debug)]
struct Budget {
    cap: u64,
    used: AtomicU64,
    peak: AtomicU64,
}

impl Budget {
    fn try_add(&self, bytes: u64) -> Result<(), Interrupt> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let total = used.saturating_add(bytes);
            if total > self.cap {
                return Err(Interrupt::MemoryCapExceeded {
                    requested_bytes: total,
                    cap_bytes: self.cap,
                });
            }
            match self
                .used
                .compare_exchange_weak(used, total, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(total, Ordering::Relaxed);
                    return Ok(());
                }
                Err(actual) => used = actual,
            }
        }
    }

    fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Memory held against the job's budget; given back when dropped.
#[derive(Debug)]
#[must_use = "the charge is released as soon as it is dropped"]
pub struct Charge<'a> {
    budget: &'a Budget,
    bytes: u64,
}

impl Charge<'_> {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Changes the amount held to `bytes` (growing is refused past the cap; the old amount stays
    /// held then). Lets a stage track a buffer that grows, charging *before* it reserves.
    pub fn resize(&mut self, bytes: u64) -> Result<(), Interrupt> {
        if bytes > self.bytes {
            self.budget.try_add(bytes - self.bytes)?;
        } else {
            self.budget.release(self.bytes - bytes);
        }
        self.bytes = bytes;
        Ok(())
    }

    /// Grows the amount held by `bytes`.
    pub fn grow(&mut self, bytes: u64) -> Result<(), Interrupt> {
        self.resize(self.bytes.saturating_add(bytes))
    }
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

/// One job's private state. Dropping it removes the temp directory.
#[derive(Debug)]
pub struct JobContext {
    cancel: CancellationToken,
    deadline: Instant,
    budget: Budget,
    hooks: Vec<HookDirective>,
    /// Bytes charged by an `alloc=` hook, held until the job ends.
    hook_bytes: u64,
    hooks_started: bool,
    progress: Arc<Progress>,
    /// Checkpoint bookkeeping (nanoseconds since `epoch`): the last call, and the longest gap
    /// in the running stage.
    epoch: Instant,
    last_check: AtomicU64,
    max_gap: AtomicU64,
    temp: tempfile::TempDir,
}

impl JobContext {
    /// Creates the job's temp directory (`plimsoll-job-*` under `temp_root`). Also installs the
    /// panic hook, so a panicking stage always reports its backtrace.
    pub fn new(config: JobConfig) -> std::io::Result<Self> {
        install_panic_hook();
        let temp = tempfile::Builder::new()
            .prefix("plimsoll-job-")
            .tempdir_in(&config.temp_root)?;
        Ok(JobContext {
            cancel: config.cancel,
            deadline: config.deadline,
            budget: Budget {
                cap: config.memory_cap_bytes,
                used: AtomicU64::new(0),
                peak: AtomicU64::new(0),
            },
            hooks: config.hooks,
            hook_bytes: 0,
            hooks_started: false,
            progress: Arc::new(Progress::default()),
            epoch: Instant::now(),
            last_check: AtomicU64::new(0),
            max_gap: AtomicU64::new(0),
            temp,
        })
    }

    /// Returns why the job must stop, if it must. Costs a clock read and a few uncontended atomic
    /// operations (~30 ns), so it is safe to call every few thousand pixels. Also records the
    /// longest stretch without a call, per stage (see [`Progress::stage_checkpoint_gaps`]).
    #[inline]
    pub fn checkpoint(&self) -> Result<(), Interrupt> {
        let now = Instant::now();
        self.note_gap(now);
        if self.cancel.is_cancelled() {
            return Err(Interrupt::Cancelled);
        }
        if now >= self.deadline {
            return Err(Interrupt::DeadlineExceeded);
        }
        let used = self.budget.used.load(Ordering::Relaxed);
        if used > self.budget.cap {
            return Err(Interrupt::MemoryCapExceeded {
                requested_bytes: used,
                cap_bytes: self.budget.cap,
            });
        }
        Ok(())
    }

    #[inline]
    fn note_gap(&self, now: Instant) -> Duration {
        let t = now.duration_since(self.epoch).as_nanos() as u64;
        let previous = self.last_check.swap(t, Ordering::Relaxed);
        let gap = t.saturating_sub(previous);
        Duration::from_nanos(self.max_gap.fetch_max(gap, Ordering::Relaxed).max(gap))
    }

    /// Reserves `bytes` of the budget until the returned guard drops. Charge before allocating.
    pub fn charge(&self, bytes: u64) -> Result<Charge<'_>, Interrupt> {
        self.budget.try_add(bytes)?;
        Ok(Charge {
            budget: &self.budget,
            bytes,
        })
    }

    pub fn memory_cap_bytes(&self) -> u64 {
        self.budget.cap
    }

    /// Budget not yet charged.
    pub fn memory_available_bytes(&self) -> u64 {
        self.budget
            .cap
            .saturating_sub(self.budget.used.load(Ordering::Relaxed))
    }

    /// The most ever charged at once (the bench compares it with the measured heap peak).
    pub fn peak_charged_bytes(&self) -> u64 {
        self.budget.peak.load(Ordering::Relaxed)
    }

    /// The job's private directory; everything in it is removed with the context.
    pub fn temp_dir(&self) -> &Path {
        self.temp.path()
    }

    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// Shorthand for `progress().stage_timings()`.
    pub fn stage_timings(&self) -> Vec<(Stage, Duration)> {
        self.progress.stage_timings()
    }

    /// Shorthand for `progress().stage_checkpoint_gaps()`.
    pub fn stage_checkpoint_gaps(&self) -> Vec<(Stage, Duration)> {
        self.progress.stage_checkpoint_gaps()
    }

    /// Runs one stage: marks it current, honours the checkpoint and the test hooks, catches a
    /// panic, and on failure names this stage and the ones completed before it.
    pub fn run_stage<T>(
        &mut self,
        stage: Stage,
        f: impl FnOnce(&JobContext) -> Result<T, StageError>,
    ) -> Result<T, JobError> {
        self.progress.start(stage);
        let started = Instant::now();
        self.last_check.store(
            started.duration_since(self.epoch).as_nanos() as u64,
            Ordering::Relaxed,
        );
        self.max_gap.store(0, Ordering::Relaxed);
        let result = self.run_stage_inner(stage, f);
        let ended = Instant::now();
        let gap = self.note_gap(ended);
        self.progress
            .finish(stage, ended - started, gap, result.is_ok());
        result.map_err(|kind| JobError {
            kind,
            failed_stage: stage,
            completed_stages: self.progress.snapshot().1,
        })
    }

    fn run_stage_inner<T>(
        &mut self,
        stage: Stage,
        f: impl FnOnce(&JobContext) -> Result<T, StageError>,
    ) -> Result<T, JobErrorKind> {
        self.checkpoint()?;
        if !self.hooks_started {
            self.hooks_started = true;
            let mb: u64 = self
                .hooks
                .iter()
                .map(|h| match h {
                    HookDirective::Alloc { mb } => *mb,
                    _ => 0,
                })
                .sum();
            let bytes = mb.saturating_mul(1 << 20);
            if bytes > 0 {
                self.budget.try_add(bytes)?;
                self.hook_bytes = bytes;
            }
        }
        let this: &JobContext = self;
        let outcome = with_panic_capture(|| {
            catch_unwind(AssertUnwindSafe(|| {
                this.apply_hooks(stage)?;
                f(this)
            }))
        });
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(StageError::Interrupted(interrupt))) => Err(interrupt.into()),
            Ok(Err(StageError::Invalid { code, message })) => {
                Err(JobErrorKind::Invalid { code, message })
            }
            Ok(Err(StageError::Failed { message })) => Err(JobErrorKind::Failed {
                message,
                backtrace: Backtrace::force_capture().to_string(),
            }),
            Err(payload) => {
                let (message, backtrace) = take_panic_capture().unwrap_or_else(|| {
                    (
                        panic_message(payload.as_ref()),
                        "backtrace not captured".to_owned(),
                    )
                });
                Err(JobErrorKind::Panicked { message, backtrace })
            }
        }
    }

    fn apply_hooks(&self, stage: Stage) -> Result<(), StageError> {
        for hook in &self.hooks {
            match *hook {
                HookDirective::Hold { stage: s, ms } if s == stage => {
                    let until = Instant::now() + Duration::from_millis(ms);
                    loop {
                        self.checkpoint()?;
                        let now = Instant::now();
                        if now >= until {
                            break;
                        }
                        std::thread::sleep((until - now).min(Duration::from_millis(5)));
                    }
                }
                HookDirective::Fail { stage: s } if s == stage => {
                    return Err(StageError::failed(format!("injected failure at {stage}")));
                }
                HookDirective::Panic { stage: s } if s == stage => {
                    panic!("injected panic at {stage}");
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Drop for JobContext {
    fn drop(&mut self) {
        self.budget.release(self.hook_bytes);
    }
}

thread_local! {
    /// Set while a stage runs on this thread, so the hook knows the panic belongs to a job.
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
    /// The message and backtrace of the last job panic on this thread.
    static CAPTURED: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

fn with_panic_capture<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_JOB.with(|c| c.set(self.0));
        }
    }
    CAPTURED.with(|c| c.borrow_mut().take());
    let _reset = Reset(IN_JOB.with(|c| c.replace(true)));
    f()
}

fn take_panic_capture() -> Option<(String, String)> {
    CAPTURED.with(|c| c.borrow_mut().take())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// Installs (once) a panic hook that, for panics inside [`JobContext::run_stage`], records the
/// message and a forced backtrace for the job's error instead of printing to stderr (the server
/// logs it as one structured line, F3). Panics elsewhere go to the previous hook unchanged.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_JOB.with(Cell::get) {
                let mut message = panic_message(info.payload());
                if let Some(location) = info.location() {
                    message = format!("{message} at {location}");
                }
                let backtrace = Backtrace::force_capture().to_string();
                CAPTURED.with(|c| *c.borrow_mut() = Some((message, backtrace)));
            } else {
                previous(info);
            }
        }));
    });
}
