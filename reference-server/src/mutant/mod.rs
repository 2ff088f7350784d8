//! Deliberately broken variants of single pieces of the server. They exist so the conformance
//! suite can prove each of its checks fails against a server that breaks that clause. This whole
//! module is compiled only with the `mutants` feature (test builds): a release build holds the
//! seams and the contract's components, and none of these.
//!
//! Each variant is a one-piece swap: [`Mutant::components`] is the reference set with exactly one
//! component replaced by a broken one from the submodules — or, for a variant whose claims lie
//! (`lies`), one object filling the seams of the behaviour and of the claim that hides it.
//!
//! A variant is declared once, in the [`mutants!`] table below: its name, what is broken, the
//! checks it must fail (and those its run also needs), and its swap. The enum, [`Mutant::ALL`],
//! the names, the mutation matrix of `tests/mutants.rs` (through [`Mutant::fails`]), its tests
//! (through [`for_each_mutant!`](crate::for_each_mutant)) and the matrix in the docs are all
//! derived from it, so adding a variant is one entry.

mod admission;
mod answers;
mod bounds;
mod input;
mod lies;
mod observe;
mod relay;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::{CheckId, Pool};

use crate::components::Components;

/// The HTTP job pools (the relay's has broken variants of its own).
const JOB_POOLS: &[Pool] = &[Pool::Digitize, Pool::Export];

/// Declares the broken variants: each entry is `Variant = "name", "what is broken", fails
/// [check ids] (, also [check ids])? (, bridge [check ids])?, |components| swap;`. Check ids are
/// [`CheckId`]'s constants and variants (`T1`…`R6`, `Api`, `Contract`), declared in the spec
/// crate beside the clauses: an id that names no check does not compile. `bridge` lists what
/// the variant must fail when its bridge is judged in bridge mode (`plimsoll check
/// --bridge-command` against `plimsoll serve --relay-url … --relay-upstream …`). `fault "name"`
/// lists what the variant must fail when the suite runs through that fault of the checker's
/// standard set (`plimsoll check --fault-set full`): a variant only a fault reveals fails
/// nothing without it.
macro_rules! mutants {
    ($(
        $variant:ident = $name:literal, $what:literal,
        fails [$($fail:ident),* $(,)?] $(, also [$($also:ident),* $(,)?])?
            $(, bridge [$($bridge:ident),* $(,)?])?
            $(, fault $fault:literal [$($under:ident),* $(,)?])?,
        |$c:ident| $swap:expr;
    )*) => {
        /// One broken piece each. The name is what `PLIMSOLL_MUTANT` takes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Mutant {
            $(
                #[doc = $what]
                $variant,
            )*
        }

        impl Mutant {
            /// Every variant, in declaration order (the matrix's row order).
            pub const ALL: &'static [Mutant] = &[$(Mutant::$variant),*];

            /// The name `PLIMSOLL_MUTANT` and the matrix use.
            pub fn name(self) -> &'static str {
                match self {
                    $(Mutant::$variant => $name,)*
                }
            }

            /// What is broken, in a few words (the matrix's second column).
            pub fn what(self) -> &'static str {
                match self {
                    $(Mutant::$variant => $what,)*
                }
            }

            /// The checks this variant must fail: no more, no fewer.
            pub fn fails(self) -> &'static [CheckId] {
                match self {
                    $(Mutant::$variant => &[$(CheckId::$fail),*],)*
                }
            }

            /// The relay checks this variant's bridge must fail in bridge mode, where the checker
            /// plays its relay and its local handler: no more, no fewer (empty: not judged so).
            pub fn bridge_fails(self) -> &'static [CheckId] {
                match self {
                    $(Mutant::$variant => &[$($(CheckId::$bridge),*)?],)*
                }
            }

            /// The fault of the checker's standard set (by name) under which this variant must
            /// fail, and the checks it must fail there: no more, no fewer.
            pub fn fault_fails(self) -> Option<(&'static str, &'static [CheckId])> {
                match self {
                    $(Mutant::$variant => None $(.or(Some(($fault, &[$(CheckId::$under),*]))))?,)*
                }
            }

            /// Checks its run needs besides those it fails: the ones that provoke the replies
            /// the failing checks judge.
            pub fn also_runs(self) -> &'static [CheckId] {
                match self {
                    $(Mutant::$variant => &[$($(CheckId::$also),*)?],)*
                }
            }

            /// The contract's components with this variant's one piece broken.
            pub fn components(self) -> Components {
                let mut components = Components::reference();
                match self {
                    $(Mutant::$variant => {
                        let $c = &mut components;
                        $swap;
                    })*
                }
                components
            }
        }

        /// Calls `$callback! { Variant, … }` with every variant: how a test crate makes one
        /// test per variant without a list of its own.
        #[macro_export]
        macro_rules! for_each_mutant {
            ($callback:ident) => {
                $callback! { $($variant),* }
            };
        }
    };
}

mutants! {
    // B3 judges a freed place by a request admitted where it would otherwise be refused; a
    // pool that never refuses leaves it nothing to judge, so it says so (skip, a failure under
    // --strict) instead of failing for T1's defect.
    NoAdmissionLimit = "no-admission-limit", "admission lets every request run",
        fails [T1, T2, T3],
        |c| c.sizing = Arc::new(admission::Unbounded(JOB_POOLS));
    // T2 orders requests that must wait; with a slot too many the first of them runs at once.
    LimitPlusOne = "limit-plus-one", "one slot more than the contract",
        fails [T1, T2, T3],
        |c| c.sizing = Arc::new(admission::PlusOne(JOB_POOLS));
    Lifo = "lifo", "the queue serves the newest waiter first",
        fails [T2],
        |c| c.discipline = Arc::new(admission::Lifo(JOB_POOLS));
    // B5 judges the Retry-After of an upload-budget refusal too.
    NoRetryAfter = "no-retry-after", "503 without Retry-After",
        fails [T3, B5],
        |c| c.answers = answers::NO_RETRY_AFTER.arc();
    RetryAfterZero = "retry-after-zero", "`Retry-After: 0`",
        fails [T3, B5],
        |c| c.answers = answers::RETRY_AFTER_ZERO.arc();
    RetryAfterHttpDate = "retry-after-http-date", "Retry-After as an HTTP-date",
        fails [T3, B5, Api],
        |c| c.answers = answers::RETRY_AFTER_HTTP_DATE.arc();
    RefusalWaits = "refusal-waits", "a refusal waits for a free slot",
        fails [T3],
        |c| c.admission = Arc::new(admission::RefusalWaits);
    IgnoreTimeout = "ignore-timeout", "the deadline is ignored (late 200)",
        fails [B1],
        |c| c.deadline = Arc::new(bounds::NoDeadline);
    TimeoutAs500 = "timeout-as-500", "a timeout is answered 500",
        fails [B1, Api],
        |c| c.answers = answers::TIMEOUT_AS_500.arc();
    IgnoreMemoryCap = "ignore-memory-cap", "the memory cap is not enforced",
        fails [B2],
        |c| c.memory_cap = Arc::new(bounds::NoMemoryCap);
    NoUploadBudget = "no-upload-budget", "request bodies are buffered without a budget",
        fails [B5],
        |c| c.upload_budget = Arc::new(bounds::NoUploadBudget);
    UploadBudgetTooSmall = "upload-budget-too-small", "the upload budget is half the contract's",
        fails [B5],
        |c| c.upload_budget = Arc::new(bounds::HalfBudget);
    BudgetIgnoresChunked = "budget-ignores-chunked",
        "the upload budget charges declared lengths only, not chunked bodies",
        fails [B5],
        |c| c.upload_budget = Arc::new(bounds::BudgetIgnoresChunked);
    // The variants only a fault reveals: each passes the fault-free suite.
    IdleUploadTimer = "idle-upload-timer", "the upload read timer restarts at every read (a trickle holds it for ever)",
        fails [], fault "trickle" [B1],
        |c| c.deadline = Arc::new(bounds::IdleUploadTimer);
    IdleHeadTimer = "idle-head-timer", "the head timer restarts at every byte of the head",
        fails [], fault "trickle" [B4],
        |c| c.connections = Arc::new(wire::IdleHeadTimer);
    ResetUnnoticed = "reset-unnoticed", "a client's FIN cancels its job, its RST does not",
        fails [], fault "vanish" [B3],
        |c| c.connections = Arc::new(wire::ResetUnnoticed);
    RelayResetNoRedial = "relay-reset-no-redial", "the bridge dials its relay again after a close, not after a reset",
        fails [], fault "vanish" [R6],
        |c| c.redial = Arc::new(relay::ResetEndsDialling);
    IgnoreDisconnect = "ignore-disconnect", "client disconnects do not reach the job",
        fails [B3],
        |c| c.disconnect = Arc::new(bounds::IgnoreDisconnect);
    LeakTempFiles = "leak-temp-files", "temp files survive a failed job",
        fails [B1, B3, F1],
        |c| c.temp_cleaner = Arc::new(bounds::KeepWhenFailed);
    WrongFailedStage = "wrong-failed-stage", "`failed_stage` names the next stage",
        fails [B1, F1],
        |c| c.answers = answers::NEXT_FAILED_STAGE.arc();
    WrongCompletedStages = "wrong-completed-stages", "`completed_stages` is empty",
        fails [B1, F1],
        |c| c.answers = answers::NO_COMPLETED_STAGES.arc();
    MalformedAs500 = "malformed-as-500", "a malformed image is answered 500",
        fails [F2, Api],
        |c| c.answers = answers::MALFORMED_AS_500.arc();
    ContentTypeParametersKept = "content-type-parameters-kept", "`image/png; charset=x` is refused: the whole `Content-Type` is compared",
        fails [F2],
        |c| c.media_types = Arc::new(input::ParametersKept);
    OversizeRefusedUnread = "oversize-refused-unread", "a body declared over the limit is refused at once, unread (a client still sending meets a reset)",
        fails [F2],
        |c| c.deadline = Arc::new(bounds::OversizeRefusedUnread);
    NoRequestId = "no-request-id", "no `X-Request-Id` header",
        fails [F4],
        |c| c.claims = Arc::new(observe::NoRequestId);
    // R3 too: the relay's first frame joins the two values into one header (found by the full
    // matrix), which is not the envelope's trace id (rule `relay-inner-request`).
    DuplicateRequestId = "duplicate-request-id", "`X-Request-Id` twice, the second a proxy's",
        fails [F4, R3],
        |c| c.claims = Arc::new(observe::DuplicateRequestId);
    // R3 too, as duplicate-request-id.
    CommaJoinedRequestId = "comma-joined-request-id", "`X-Request-Id` is one line joining the id and a proxy's with a comma",
        fails [F4, R3],
        |c| c.claims = Arc::new(observe::CommaJoinedRequestId);
    UpgradeRequiredAs400 = "upgrade-required-as-400", "a plain `GET` of the relay path is 400, not 426",
        fails [F4],
        |c| c.answers = answers::UPGRADE_REQUIRED_AS_400.arc();
    PlainTextLogs = "plain-text-logs", "error logs are plain text",
        fails [F3],
        |c| c.log_format = Arc::new(observe::PlainText);
    LeakSlotOnCancel = "leak-slot-on-cancel", "a cancelled job never gives its slot back",
        fails [B3],
        |c| {
            c.slot_release = Arc::new(bounds::LeakWhenClientGone(JOB_POOLS));
        };
    // Serial dispatch breaks the bound's premise too: N never run at once, overflow and
    // orphans after a reconnect drain one at a time.
    RelaySerial = "relay-serial", "the relay handles envelopes one at a time",
        fails [R1, R2, R4, R6], bridge [R1, R2, R4, R5, R6],
        |c| c.relay_dispatch = Arc::new(relay::Serial);
    RelayUnbounded = "relay-unbounded", "the relay pool has no bound",
        fails [R1, R4], bridge [R1, R4],
        |c| c.sizing = Arc::new(admission::Unbounded(&[Pool::Relay]));
    RelaySplitFrames = "relay-split-frames", "frames written without the per-frame lock (split)",
        fails [R5], bridge [R5],
        |c| c.frame_sender = Arc::new(relay::SplitFrames);
    // In bridge mode every check takes a socket the bridge dialled after the last one closed.
    // R1 closes the socket its envelope-hook probe used and waits for the next one, so a bridge
    // that never dials again fails every relay check from R1 on.
    RelayNoRedial = "relay-no-redial", "the bridge never dials its relay again after a drop",
        fails [R1, R2, R3, R4, R5, R6], bridge [R2, R3, R4, R5, R6],
        |c| c.redial = Arc::new(relay::NoRedial);
    RelaySlowRedial = "relay-slow-redial", "the bridge dials its relay again only after twice R6's bound",
        fails [R6], bridge [R6],
        |c| c.redial = Arc::new(relay::SlowRedial);
    RelayRejectWhenFull = "relay-reject-when-full", "a full relay pool refuses instead of queueing (the seed's rejected alternative)",
        fails [R1, R4, R6], bridge [R1, R4, R6],
        |c| c.sizing = Arc::new(admission::RejectWhenFull(&[Pool::Relay]));
    RelayLifo = "relay-lifo", "the relay queue serves the newest envelope first",
        fails [R4], bridge [R4],
        |c| c.discipline = Arc::new(admission::Lifo(&[Pool::Relay]));
    RelayHooksUnchecked = "relay-hooks-unchecked", "an envelope's malformed hook header is ignored, not refused",
        fails [R1],
        |c| c.relay_hooks = Arc::new(relay::UncheckedHooks);
    RelayErrorsUnanswered = "relay-errors-unanswered", "a message that is no envelope gets no `relay-error`",
        fails [R3], bridge [R3],
        |c| c.frame_sender = Arc::new(relay::DropsRelayErrors);
    RelayBuffered = "relay-buffered", "the bridge buffers each whole response before its first frame",
        fails [], bridge [R5],
        |c| c.frame_sender = Arc::new(relay::Buffered::default());
    RelayWaitsForStragglers = "relay-waits-for-stragglers", "told to stop, the bridge waits for its workers",
        fails [], bridge [R6],
        |c| c.relay_stop = Arc::new(relay::WaitsForStragglers);
    RelayLeakSlot = "relay-leak-slot", "a relay slot leaks when the socket drops mid-flight",
        fails [R6], bridge [R6],
        |c| {
            c.slot_release = Arc::new(bounds::LeakWhenClientGone(&[Pool::Relay]));
        };
    // The rows below are the holes. Several are caught only by the client-evidence
    // checks (T1 burst timings, T3 two wait levels, B1 queued deadline and stalled upload, B3
    // probe after a drop, B2 just under the cap, capacity proofs after faults); until those
    // merge, `reference-server/tests/server/mutants_*.rs` show each variant misbehaves.
    ConstantRetryAfter = "constant-retry-after", "Retry-After is always 1 s, whatever the load",
        fails [T3],
        |c| {
            c.retry_after = Arc::new(admission::ConstantRetryAfter(1));
        };
    RetryAfterMean = "retry-after-mean", "Retry-After from the mean of the window, not its p50",
        fails [T3],
        |c| {
            c.retry_after = Arc::new(admission::OtherStatistic(admission::Statistic::Mean));
        };
    RetryAfterP90 = "retry-after-p90", "Retry-After from the p90 of the window, not its p50",
        fails [T3],
        |c| {
            c.retry_after = Arc::new(admission::OtherStatistic(admission::Statistic::P90));
        };
    RetryAfterMax = "retry-after-max", "Retry-After from the longest wait of the window, not its p50",
        fails [T3],
        |c| {
            c.retry_after = Arc::new(admission::OtherStatistic(admission::Statistic::Max));
        };
    DeadlineFromStart = "deadline-from-start", "the deadline counts from the worker's start (queue time free)",
        fails [B1],
        |c| c.deadline = Arc::new(bounds::FromStart);
    GaugeDropsOnDisconnect = "gauge-drops-on-disconnect", "on a disconnect the gauge drops but the job runs on, holding its slot",
        fails [B3],
        |c| {
            let lie = Arc::new(lies::GaugeDropsOnDisconnect::default());
            c.disconnect = lie.clone();
            c.slot_release = lie.clone();
            c.claims = Arc::new(lies::LyingMetrics(lie));
        };
    // F1's capacity proof finds the slots B3's drops leaked: the gauge hides them, so nothing
    // tells F1 they were gone before it began.
    SlotLeakHonestGauge = "slot-leak-honest-gauge", "a cancelled job's slot leaks; `/metrics` hides it",
        fails [B3, F1],
        |c| {
            let lie = Arc::new(lies::SlotLeakHonestGauge::default());
            c.slot_release = lie.clone();
            c.claims = Arc::new(lies::LyingMetrics(lie));
        };
    ExportUnbounded = "export-unbounded", "the export pool admits everything",
        fails [T1, T3],
        |c| {
            c.sizing = Arc::new(admission::Unbounded(&[Pool::Export]));
        };
    BodyIdMismatch = "body-id-mismatch", "503/504 bodies carry another `request_id` than the header",
        fails [F4], also [T3, B1],
        |c| c.answers = answers::BODY_ID_MISMATCH.arc();
    RelayWrongId = "relay-wrong-id", "concurrent relay responses go out under each other's ids",
        fails [R3, R5], bridge [R3, R5],
        |c| {
            c.frame_sender = Arc::new(relay::SwapIds::new(Duration::from_millis(100)));
        };
    // B3's dropped requests include one that reaches its deadline: its temp dir is kept too.
    LeakTempOnTimeout = "leak-temp-on-timeout", "a timed-out job's temp dir is kept",
        fails [B1, B3],
        |c| c.temp_cleaner = Arc::new(bounds::KeepWhenTimedOut);
    LeakTempOnPanic = "leak-temp-on-panic", "a panicked job's temp dir is kept",
        fails [F1],
        |c| c.temp_cleaner = Arc::new(bounds::KeepWhenPanicked);
    MemoryCapTooLow = "memory-cap-too-low", "the memory cap is half the contract's",
        fails [B2],
        |c| c.memory_cap = Arc::new(bounds::HalfCap);
    NoHeadTimeout = "no-head-timeout", "a stalled or idle connection is never closed",
        fails [B4],
        |c| c.connections = Arc::new(bounds::NoHeadTimeout);
    NoConnectionCap = "no-connection-cap", "every connection is served, however many are open",
        fails [B4],
        |c| c.connections = Arc::new(bounds::NoConnectionCap);
    HeadTimeoutTooShort = "head-timeout-too-short", "connections are closed at a quarter of the head timeout",
        fails [B4],
        |c| c.connections = Arc::new(bounds::HeadTimeoutTooShort);
    NoServerTiming = "no-server-timing", "no `Server-Timing` header",
        fails [T1, T2],
        |c| c.claims = Arc::new(observe::NoServerTiming);
    WrongLogStage = "wrong-log-stage", "the error log's `stage` is not the failed stage",
        fails [F3],
        |c| c.answers = answers::WRONG_LOG_STAGE.arc();
    // Waiting for a slot before its body, B5's large upload meets the read timeout instead of
    // the budget's prompt refusal.
    UploadHoldsSlot = "upload-holds-slot", "a slow upload holds a worker slot",
        fails [B1, B5],
        |c| c.admission = Arc::new(admission::SlotFirst);
    ContractClaimsLooser = "contract-claims-looser", "`/v1/contract` claims a 5 s stop bound and 50x tolerances; a dropped job runs 2.5 s",
        fails [Contract, B3],
        |c| {
            let lie = Arc::new(lies::LooserContract {
            claimed_stop_within_ms: 5000,
            tolerance_factor: 50,
            stops_after: Duration::from_millis(2500),
            });
            c.disconnect = lie.clone();
            c.claims = lie;
        };
    // Like no-admission-limit: nothing is ever refused, so B3 cannot see a place free and
    // says so (skip) rather than fail for T1's defect; T1 catches the clamp by client timings.
    ClampedBusyGauge = "clamped-busy-gauge", "no admission limit; `/metrics` clamps the busy gauge to the limit",
        fails [T1, T2, T3],
        |c| {
            c.sizing = Arc::new(admission::Unbounded(JOB_POOLS));
            c.claims = Arc::new(lies::LyingMetrics(Arc::new(lies::ClampToLimit)));
        };
}

impl std::str::FromStr for Mutant {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mutant::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .ok_or(())
    }
}

impl Mutant {
    /// Says on standard output that this variant's run was judged, and by which test: the
    /// mutation matrix, a bridge row, a fault row. `.ci/run` reads these lines back from the
    /// tests' JUnit record (`ci/every-test-ran.py`) and fails when a declared variant has none:
    /// a variant whose test passed without judging it, or that no test ran.
    pub fn report_judged(self, by: &str) {
        println!("variant {self:?} judged by {by}");
    }
}
