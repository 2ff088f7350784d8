//! The swappable pieces of the server, one of each seam. A request handler never asks "am I
//! broken?": it calls whichever component its server was built with. [`Components::reference`]
//! is the contract's set; the self-test's broken variants (`mutant`, test builds only) replace
//! exactly one piece each.

use std::sync::Arc;

use crate::admission::{Admission, ContractSizing, Fifo, PoolSizing, QueueDiscipline, UploadFirst};
use crate::bounds::{
    CancelJob, ContractBudget, ContractCap, DeadlinePolicy, FromArrival, MemoryCap, OnDisconnect,
    UploadBudgetPolicy,
};
use crate::claims::{Claims, Truthful};
use crate::connections::{ConnectionPolicy, ContractConnections};
use crate::logging::{JsonLines, LogFormat};
use crate::media::{MediaTypes, ParametersIgnored};
use crate::problem::{ContractAnswers, ErrorMapper};
use crate::relay::dispatch::{Concurrent, RelayDispatch};
use crate::relay::hooks::{Authorised, RelayHooks};
use crate::relay::redial::{ContractBackoff, Redial};
use crate::relay::stop::{CutAtOnce, RelayStop};
use crate::relay::writer::{FrameSender, WholeFrames};
use crate::retry_after::{MedianWait, RetryAfterPolicy};
use crate::worker::{ReleaseWhenStopped, RemoveTempDir, SlotRelease, TempCleaner};

#[derive(Debug, Clone)]
pub struct Components {
    /// Worker slots per pool (T1, R1).
    pub sizing: Arc<dyn PoolSizing>,
    /// Who gets a freed slot (T2).
    pub discipline: Arc<dyn QueueDiscipline>,
    /// The Retry-After estimate per pool (T3).
    pub retry_after: Arc<dyn RetryAfterPolicy>,
    /// Upload, then slot or refusal (T3, and a slow upload never holds a slot).
    pub admission: Arc<dyn Admission>,
    /// When a job is past its time (B1).
    pub deadline: Arc<dyn DeadlinePolicy>,
    /// How much memory a job may hold (B2).
    pub memory_cap: Arc<dyn MemoryCap>,
    /// How many bytes of request bodies are held at once (B5).
    pub upload_budget: Arc<dyn UploadBudgetPolicy>,
    /// What a client disconnect does to its job (B3).
    pub disconnect: Arc<dyn OnDisconnect>,
    /// Removing a finished job's temp dir (F1, B1, B3).
    pub temp_cleaner: Arc<dyn TempCleaner>,
    /// When a worker's slot is given back (T1, B3, R6).
    pub slot_release: Arc<dyn SlotRelease>,
    /// Error → status, body, Retry-After and log stage (T3, B1, B2, F1, F2, F3).
    pub answers: Arc<dyn ErrorMapper>,
    /// X-Request-Id, Server-Timing, `/v1/contract`, `/metrics` (F4, observability).
    pub claims: Arc<dyn Claims>,
    /// The log line format (F3).
    pub log_format: Arc<dyn LogFormat>,
    /// The media type a request's `Content-Type` names (F2).
    pub media_types: Arc<dyn MediaTypes>,
    /// How an envelope's hook header is authorised and held (R1).
    pub relay_hooks: Arc<dyn RelayHooks>,
    /// How a relay envelope's job runs (R2).
    pub relay_dispatch: Arc<dyn RelayDispatch>,
    /// How a relay frame goes on the socket (R3, R5).
    pub frame_sender: Arc<dyn FrameSender>,
    /// The head timeout and the connection cap (B4).
    pub connections: Arc<dyn ConnectionPolicy>,
    /// When a bridge that lost its relay dials again (R6).
    pub redial: Arc<dyn Redial>,
    /// How long relay work may run once the server is told to stop (R6).
    pub relay_stop: Arc<dyn RelayStop>,
}

impl Components {
    /// The contract's components.
    pub fn reference() -> Components {
        Components {
            sizing: Arc::new(ContractSizing),
            discipline: Arc::new(Fifo),
            retry_after: Arc::new(MedianWait),
            admission: Arc::new(UploadFirst),
            deadline: Arc::new(FromArrival),
            memory_cap: Arc::new(ContractCap),
            upload_budget: Arc::new(ContractBudget),
            disconnect: Arc::new(CancelJob),
            temp_cleaner: Arc::new(RemoveTempDir),
            slot_release: Arc::new(ReleaseWhenStopped),
            answers: Arc::new(ContractAnswers),
            claims: Arc::new(Truthful),
            log_format: Arc::new(JsonLines),
            media_types: Arc::new(ParametersIgnored),
            relay_hooks: Arc::new(Authorised),
            relay_dispatch: Arc::new(Concurrent),
            frame_sender: Arc::new(WholeFrames),
            connections: Arc::new(ContractConnections),
            redial: Arc::new(ContractBackoff),
            relay_stop: Arc::new(CutAtOnce),
        }
    }
}
