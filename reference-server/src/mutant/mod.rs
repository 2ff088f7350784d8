//! Deliberately broken variants of single pieces of the server. They exist so the conformance
//! suite can prove each of its checks fails against a server that breaks that clause. This whole
//! module is compiled only with the `mutants` feature (test builds): a release build holds the
//! seams and the contract's components, and none of these.
//!
//! Each variant is a one-piece swap: [`Mutant::components`] is the reference set with exactly one
//! component replaced by a broken one from the submodules — or, for a variant whose claims lie
//! (`lies`), one object filling the seams of the behaviour and of the claim that hides it.

mod admission;
mod answers;
mod bounds;
mod lies;
mod observe;
mod relay;

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::Pool;

use crate::components::Components;

/// The HTTP job pools (the relay's has broken variants of its own).
const JOB_POOLS: &[Pool] = &[Pool::Digitize, Pool::Export];

/// One broken piece each. The name is what `PLIMSOLL_MUTANT` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// T1: admission lets everything run.
    NoAdmissionLimit,
    /// T1: one slot more than the contract says.
    LimitPlusOne,
    /// T2: the queue serves the newest waiter first.
    Lifo,
    /// T3: 503 without Retry-After.
    NoRetryAfter,
    /// T3: `Retry-After: 0`.
    RetryAfterZero,
    /// T3: Retry-After as an HTTP-date.
    RetryAfterHttpDate,
    /// T3: a refusal waits for a slot to free before answering.
    RefusalWaits,
    /// B1: the deadline is ignored (late 200).
    IgnoreTimeout,
    /// B1: a timeout is answered 500.
    TimeoutAs500,
    /// B2: the memory cap is not enforced.
    IgnoreMemoryCap,
    /// B3: client disconnects are not propagated to the job.
    IgnoreDisconnect,
    /// F1: temp files survive a failed job.
    LeakTempFiles,
    /// F1: `failed_stage` names the next stage.
    WrongFailedStage,
    /// F1: `completed_stages` is empty.
    WrongCompletedStages,
    /// F2: a malformed image is answered 500.
    MalformedAs500,
    /// F4: no `X-Request-Id`.
    NoRequestId,
    /// F3: error logs are plain text.
    PlainTextLogs,
    /// Load: a cancelled job never gives its slot back.
    LeakSlotOnCancel,
    /// R2: the relay handles envelopes one at a time.
    RelaySerial,
    /// R1: the relay pool has no bound.
    RelayUnbounded,
    /// R5: frames are written without the per-frame lock (split and interleaved).
    RelaySplitFrames,
    /// R6: a relay slot is leaked when the socket drops with work in flight.
    RelayLeakSlot,
    /// T3: Retry-After is always 1 s, whatever the load (no estimator).
    ConstantRetryAfter,
    /// B1: the deadline counts from the worker's start, not from arrival (queue time is free).
    DeadlineFromStart,
    /// B3: on a disconnect the busy gauge drops at once, but the job runs on to its natural end
    /// (at most its deadline), holding its slot.
    GaugeDropsOnDisconnect,
    /// B3: a cancelled job's slot is never given back, and `/metrics` hides it.
    SlotLeakHonestGauge,
    /// T1/T3: the export pool admits everything (no limit, no queue bound).
    ExportUnbounded,
    /// F4: 503 and 504 bodies carry another `request_id` than the `X-Request-Id` header.
    BodyIdMismatch,
    /// R3: concurrent relay responses go out under each other's `request_id`.
    RelayWrongId,
    /// B1: a timed-out job's temp dir is kept.
    LeakTempOnTimeout,
    /// F1: the temp dir of a job whose stage panicked is kept.
    LeakTempOnPanic,
    /// B2: the memory cap is half the contract's.
    MemoryCapTooLow,
    /// B4: no head timeout: a stalled or idle connection is held for ever.
    NoHeadTimeout,
    /// B4: no connection cap.
    NoConnectionCap,
    /// B4: connections closed at a quarter of the head timeout.
    HeadTimeoutTooShort,
    /// T1: no `Server-Timing` on any response.
    NoServerTiming,
    /// F3: the error log's `stage` names another stage than the failed one.
    WrongLogStage,
    /// B1: the slot is taken before the body is read, so a slow upload holds a worker.
    UploadHoldsSlot,
    /// B3 and the contract: `/v1/contract` claims a 5 s stop bound and tolerances 50 times
    /// wider, and a disconnected job runs on for 2.5 s.
    ContractClaimsLooser,
    /// T1: no admission limit, and `/metrics` clamps the busy gauge to the contract's limit.
    ClampedBusyGauge,
}

impl Mutant {
    pub const ALL: [Mutant; 40] = [
        Mutant::NoAdmissionLimit,
        Mutant::LimitPlusOne,
        Mutant::Lifo,
        Mutant::NoRetryAfter,
        Mutant::RetryAfterZero,
        Mutant::RetryAfterHttpDate,
        Mutant::RefusalWaits,
        Mutant::IgnoreTimeout,
        Mutant::TimeoutAs500,
        Mutant::IgnoreMemoryCap,
        Mutant::IgnoreDisconnect,
        Mutant::LeakTempFiles,
        Mutant::WrongFailedStage,
        Mutant::WrongCompletedStages,
        Mutant::MalformedAs500,
        Mutant::NoRequestId,
        Mutant::PlainTextLogs,
        Mutant::LeakSlotOnCancel,
        Mutant::RelaySerial,
        Mutant::RelayUnbounded,
        Mutant::RelaySplitFrames,
        Mutant::RelayLeakSlot,
        Mutant::ConstantRetryAfter,
        Mutant::DeadlineFromStart,
        Mutant::GaugeDropsOnDisconnect,
        Mutant::SlotLeakHonestGauge,
        Mutant::ExportUnbounded,
        Mutant::BodyIdMismatch,
        Mutant::RelayWrongId,
        Mutant::LeakTempOnTimeout,
        Mutant::LeakTempOnPanic,
        Mutant::MemoryCapTooLow,
        Mutant::NoHeadTimeout,
        Mutant::NoConnectionCap,
        Mutant::HeadTimeoutTooShort,
        Mutant::NoServerTiming,
        Mutant::WrongLogStage,
        Mutant::UploadHoldsSlot,
        Mutant::ContractClaimsLooser,
        Mutant::ClampedBusyGauge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::NoAdmissionLimit => "no-admission-limit",
            Mutant::LimitPlusOne => "limit-plus-one",
            Mutant::Lifo => "lifo",
            Mutant::NoRetryAfter => "no-retry-after",
            Mutant::RetryAfterZero => "retry-after-zero",
            Mutant::RetryAfterHttpDate => "retry-after-http-date",
            Mutant::RefusalWaits => "refusal-waits",
            Mutant::IgnoreTimeout => "ignore-timeout",
            Mutant::TimeoutAs500 => "timeout-as-500",
            Mutant::IgnoreMemoryCap => "ignore-memory-cap",
            Mutant::IgnoreDisconnect => "ignore-disconnect",
            Mutant::LeakTempFiles => "leak-temp-files",
            Mutant::WrongFailedStage => "wrong-failed-stage",
            Mutant::WrongCompletedStages => "wrong-completed-stages",
            Mutant::MalformedAs500 => "malformed-as-500",
            Mutant::NoRequestId => "no-request-id",
            Mutant::PlainTextLogs => "plain-text-logs",
            Mutant::LeakSlotOnCancel => "leak-slot-on-cancel",
            Mutant::RelaySerial => "relay-serial",
            Mutant::RelayUnbounded => "relay-unbounded",
            Mutant::RelaySplitFrames => "relay-split-frames",
            Mutant::RelayLeakSlot => "relay-leak-slot",
            Mutant::ConstantRetryAfter => "constant-retry-after",
            Mutant::DeadlineFromStart => "deadline-from-start",
            Mutant::GaugeDropsOnDisconnect => "gauge-drops-on-disconnect",
            Mutant::SlotLeakHonestGauge => "slot-leak-honest-gauge",
            Mutant::ExportUnbounded => "export-unbounded",
            Mutant::BodyIdMismatch => "body-id-mismatch",
            Mutant::RelayWrongId => "relay-wrong-id",
            Mutant::LeakTempOnTimeout => "leak-temp-on-timeout",
            Mutant::LeakTempOnPanic => "leak-temp-on-panic",
            Mutant::MemoryCapTooLow => "memory-cap-too-low",
            Mutant::NoHeadTimeout => "no-head-timeout",
            Mutant::NoConnectionCap => "no-connection-cap",
            Mutant::HeadTimeoutTooShort => "head-timeout-too-short",
            Mutant::NoServerTiming => "no-server-timing",
            Mutant::WrongLogStage => "wrong-log-stage",
            Mutant::UploadHoldsSlot => "upload-holds-slot",
            Mutant::ContractClaimsLooser => "contract-claims-looser",
            Mutant::ClampedBusyGauge => "clamped-busy-gauge",
        }
    }
}

impl Mutant {
    /// The contract's components with this variant's one piece broken.
    pub fn components(self) -> Components {
        let mut c = Components::reference();
        match self {
            Mutant::NoAdmissionLimit => c.sizing = Arc::new(admission::Unbounded(JOB_POOLS)),
            Mutant::LimitPlusOne => c.sizing = Arc::new(admission::PlusOne(JOB_POOLS)),
            Mutant::Lifo => c.discipline = Arc::new(admission::Lifo(JOB_POOLS)),
            Mutant::NoRetryAfter => c.answers = answers::NO_RETRY_AFTER.arc(),
            Mutant::RetryAfterZero => c.answers = answers::RETRY_AFTER_ZERO.arc(),
            Mutant::RetryAfterHttpDate => c.answers = answers::RETRY_AFTER_HTTP_DATE.arc(),
            Mutant::RefusalWaits => c.admission = Arc::new(admission::RefusalWaits),
            Mutant::IgnoreTimeout => c.deadline = Arc::new(bounds::NoDeadline),
            Mutant::TimeoutAs500 => c.answers = answers::TIMEOUT_AS_500.arc(),
            Mutant::IgnoreMemoryCap => c.memory_cap = Arc::new(bounds::NoMemoryCap),
            Mutant::IgnoreDisconnect => c.disconnect = Arc::new(bounds::IgnoreDisconnect),
            Mutant::LeakTempFiles => c.temp_cleaner = Arc::new(bounds::KeepWhenFailed),
            Mutant::WrongFailedStage => c.answers = answers::NEXT_FAILED_STAGE.arc(),
            Mutant::WrongCompletedStages => c.answers = answers::NO_COMPLETED_STAGES.arc(),
            Mutant::MalformedAs500 => c.answers = answers::MALFORMED_AS_500.arc(),
            Mutant::NoRequestId => c.claims = Arc::new(observe::NoRequestId),
            Mutant::PlainTextLogs => c.log_format = Arc::new(observe::PlainText),
            Mutant::LeakSlotOnCancel => {
                c.slot_release = Arc::new(bounds::LeakWhenClientGone(JOB_POOLS));
            }
            Mutant::RelaySerial => c.relay_dispatch = Arc::new(relay::Serial),
            Mutant::RelayUnbounded => c.sizing = Arc::new(admission::Unbounded(&[Pool::Relay])),
            Mutant::RelaySplitFrames => c.frame_sender = Arc::new(relay::SplitFrames),
            Mutant::RelayLeakSlot => {
                c.slot_release = Arc::new(bounds::LeakWhenClientGone(&[Pool::Relay]));
            }
            Mutant::ConstantRetryAfter => {
                c.retry_after = Arc::new(admission::ConstantRetryAfter(1));
            }
            Mutant::DeadlineFromStart => c.deadline = Arc::new(bounds::FromStart),
            Mutant::GaugeDropsOnDisconnect => {
                let lie = Arc::new(lies::GaugeDropsOnDisconnect::default());
                c.disconnect = lie.clone();
                c.slot_release = lie.clone();
                c.claims = Arc::new(lies::LyingMetrics(lie));
            }
            Mutant::SlotLeakHonestGauge => {
                let lie = Arc::new(lies::SlotLeakHonestGauge::default());
                c.slot_release = lie.clone();
                c.claims = Arc::new(lies::LyingMetrics(lie));
            }
            Mutant::ExportUnbounded => {
                c.sizing = Arc::new(admission::Unbounded(&[Pool::Export]));
            }
            Mutant::BodyIdMismatch => c.answers = answers::BODY_ID_MISMATCH.arc(),
            Mutant::RelayWrongId => {
                c.frame_sender = Arc::new(relay::SwapIds::new(Duration::from_millis(100)));
            }
            Mutant::LeakTempOnTimeout => c.temp_cleaner = Arc::new(bounds::KeepWhenTimedOut),
            Mutant::LeakTempOnPanic => c.temp_cleaner = Arc::new(bounds::KeepWhenPanicked),
            Mutant::MemoryCapTooLow => c.memory_cap = Arc::new(bounds::HalfCap),
            Mutant::NoHeadTimeout => c.connections = Arc::new(bounds::NoHeadTimeout),
            Mutant::NoConnectionCap => c.connections = Arc::new(bounds::NoConnectionCap),
            Mutant::HeadTimeoutTooShort => c.connections = Arc::new(bounds::HeadTimeoutTooShort),
            Mutant::NoServerTiming => c.claims = Arc::new(observe::NoServerTiming),
            Mutant::WrongLogStage => c.answers = answers::WRONG_LOG_STAGE.arc(),
            Mutant::UploadHoldsSlot => c.admission = Arc::new(admission::SlotFirst),
            Mutant::ContractClaimsLooser => {
                let lie = Arc::new(lies::LooserContract {
                    claimed_stop_within_ms: 5000,
                    tolerance_factor: 50,
                    stops_after: Duration::from_millis(2500),
                });
                c.disconnect = lie.clone();
                c.claims = lie;
            }
            Mutant::ClampedBusyGauge => {
                c.sizing = Arc::new(admission::Unbounded(JOB_POOLS));
                c.claims = Arc::new(lies::LyingMetrics(Arc::new(lies::ClampToLimit)));
            }
        }
        c
    }
}

impl std::str::FromStr for Mutant {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mutant::ALL.into_iter().find(|m| m.name() == s).ok_or(())
    }
}
