//! The job context: everything one pipeline run needs to stop early and clean up after itself.
//!
//! A job owns a private temp directory (removed when the context drops, whatever the exit path),
//! a memory budget that stages charge before they allocate, a cancellation token and a deadline.
//! Stages call [`JobContext::checkpoint`] inside their long loops, so cancellation, the deadline
//! and the budget are observed within milliseconds rather than at the next stage boundary
//! (contract clauses B1, B2, B3). [`JobContext::run_stage`] turns every way a stage can end
//! (success, interrupt, invalid input, error, panic) into one [`JobError`] that names the failed
//! stage and the stages completed before it (clause F1).

pub mod allocator;
mod budget;
mod error;
mod panic;
mod progress;

use std::backtrace::Backtrace;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use plimsoll_spec::{HookDirective, Stage};
use tokio_util::sync::CancellationToken;

use crate::temp::JOB_DIR_PREFIX;
use budget::Budget;
pub use budget::Charge;
pub use error::{Interrupt, JobError, JobErrorKind, StageError};
pub use panic::install_panic_hook;
use panic::{panic_message, take_panic_capture, with_panic_capture};
pub use progress::Progress;

/// What a job is allowed: how long, how much memory, where its files go, which test hooks apply.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// Cancelled when the client goes away (B3).
    pub cancel: CancellationToken,
    /// The job fails with [`Interrupt::DeadlineExceeded`] at the first checkpoint past this (B1).
    pub deadline: Instant,
    /// The per-request memory budget (B2).
    pub memory_cap_bytes: u64,
    /// The request body the job holds, charged to the budget from the start (B2).
    pub upload_bytes: u64,
    /// Parent of the job's private temp directory.
    pub temp_root: PathBuf,
    /// Test hooks (`X-Plimsoll-Hook`), already parsed and authorised by the server.
    pub hooks: Vec<HookDirective>,
    /// Where the job reports its stages. The server makes it before the job's thread starts
    /// (which is where the context, and its temp dir, are created), so a deadline that passes
    /// meanwhile can still name the stage.
    pub progress: Arc<Progress>,
}

/// One job's private state. Dropping it removes the temp directory (so does
/// [`JobContext::into_temp_dir`] and dropping what it returns).
#[derive(Debug)]
pub struct JobContext {
    cancel: CancellationToken,
    deadline: Instant,
    budget: Budget,
    hooks: Vec<HookDirective>,
    hooks_started: bool,
    progress: Arc<Progress>,
    /// Checkpoint bookkeeping (nanoseconds since `epoch`): the last call, and the longest gap
    /// in the running stage.
    epoch: Instant,
    last_check: AtomicU64,
    max_gap: AtomicU64,
    /// Set only by a benchmark or a test ([`JobContext::observe`]); the server never sets it,
    /// so a checkpoint costs one more branch on `None`.
    observer: Option<Arc<dyn CheckpointObserver>>,
    temp: tempfile::TempDir,
}

/// Watches one job's checkpoints: told when each stage starts, at every checkpoint, and when
/// the stage ends, on the job's own thread. A benchmark measures the work between two calls
/// (in thread CPU time, which a preempted thread does not accrue); a test counts them against
/// the work a stage did. No global state: each job carries its own, if any.
pub trait CheckpointObserver: Send + Sync + std::fmt::Debug {
    /// `stage` is about to start (before its first checkpoint).
    fn stage_started(&self, stage: Stage);
    /// The running stage passed a checkpoint.
    fn checkpoint(&self);
    /// The running stage ended, whatever the outcome.
    fn stage_ended(&self, stage: Stage);
}

impl JobContext {
    /// Creates the job's temp directory ([`JOB_DIR_PREFIX`]`*` under `temp_root`). Also installs the
    /// panic hook, so a panicking stage always reports its backtrace. It touches the disk, which
    /// can stall for a long time under writeback: call it on a blocking thread, never on an
    /// async one.
    pub fn new(config: JobConfig) -> std::io::Result<Self> {
        install_panic_hook();
        let temp = tempfile::Builder::new()
            .prefix(JOB_DIR_PREFIX)
            .tempdir_in(&config.temp_root)?;
        Ok(JobContext {
            cancel: config.cancel,
            deadline: config.deadline,
            budget: Budget::charged(config.memory_cap_bytes, config.upload_bytes),
            hooks: config.hooks,
            hooks_started: false,
            progress: config.progress,
            epoch: Instant::now(),
            last_check: AtomicU64::new(0),
            max_gap: AtomicU64::new(0),
            observer: None,
            temp,
        })
    }

    /// Returns why the job must stop, if it must. Costs a clock read and a few uncontended atomic
    /// operations (~30 ns), so it is safe to call every few thousand pixels. Also records the
    /// longest stretch without a call, per stage (see [`Progress::stage_checkpoint_gaps`]).
    // clause: B3 — the flag checked between stages and inside long loops (also B1, B2)
    #[inline]
    pub fn checkpoint(&self) -> Result<(), Interrupt> {
        let now = Instant::now();
        self.note_gap(now);
        if let Some(observer) = &self.observer {
            observer.checkpoint();
        }
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

    /// Has `observer` watch this job's stages and checkpoints from now on. For benchmarks and
    /// tests: the server never calls it.
    pub fn observe(&mut self, observer: Arc<dyn CheckpointObserver>) {
        self.observer = Some(observer);
    }

    /// Reserves `bytes` of the budget until the returned guard drops. Charge before allocating.
    pub fn charge(&self, bytes: u64) -> Result<Charge<'_>, Interrupt> {
        self.budget.try_add(bytes)?;
        Ok(Charge { ctx: self, bytes })
    }

    /// When the job is past its time (B1).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The job's memory cap (B2), for refusals that name it.
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

    /// Ends the job and hands over its temp directory, so the server can remove it at a moment
    /// of its choosing (before the worker's slot is given back).
    pub fn into_temp_dir(self) -> tempfile::TempDir {
        self.temp
    }

    /// The job's progress, shared so the server can report the stage a job is in.
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
    // clause: F1 — a stage's error or panic becomes one failure naming the stage
    pub fn run_stage<T>(
        &mut self,
        stage: Stage,
        f: impl FnOnce(&JobContext) -> Result<T, StageError>,
    ) -> Result<T, JobError> {
        self.progress.start(stage);
        if let Some(observer) = &self.observer {
            observer.stage_started(stage);
        }
        let started = Instant::now();
        self.last_check.store(
            started.duration_since(self.epoch).as_nanos() as u64,
            Ordering::Relaxed,
        );
        self.max_gap.store(0, Ordering::Relaxed);
        let result = self.run_stage_inner(stage, f);
        let ended = Instant::now();
        let gap = self.note_gap(ended);
        if let Some(observer) = &self.observer {
            observer.stage_ended(stage);
        }
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
                // Held until the job ends: the budget goes with the context.
                self.budget.try_add(bytes)?;
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
