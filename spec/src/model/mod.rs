//! The typed model of `spec/contract.toml`. Field names are the TOML keys; every struct denies
//! unknown fields so a typo in the contract is an error with its line, not a silently ignored
//! value.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod api;
mod profiles;
mod rules;
mod service;
mod values;

pub use api::*;
pub use profiles::*;
pub use rules::*;
pub use service::*;
pub use values::*;

/// The version of the contract language this build reads (a contract's top-level `language`).
/// Language 1 (contracts 1.x) had no such field; `plimsoll contract upgrade` converts one.
pub const LANGUAGE: u32 = 2;

/// The whole contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Plimsoll contract")]
pub struct Contract {
    /// The contract language the document is written in: 2, the one this build reads.
    pub language: u32,
    /// What the contract is called and which version it is.
    pub contract: Meta,
    /// Documents the clauses cite, by key (`seed-000`, `decision`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, Source>,
    /// The service's pools of workers, by id: each with its routes, workers, queue, deadline,
    /// memory cap, cancellation and refusal.
    pub pools: Pools,
    /// What a full pool or a spent rate limit answers, by name (a pool's or a limit's
    /// `refusal` names one).
    pub refusals: Refusals,
    /// The service's rate limits, by id: each with its routes, rate, burst and refusal (T4).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rate_limits: RateLimits,
    /// How long a connection may take to send a request, and how many are served at once (B4).
    /// None: the service promises no connection bounds, and B4 is not applicable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<Connections>,
    /// Request bodies: their read timeout (B1) and the budget they share (B5). None: no upload
    /// bound is promised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<Upload>,
    /// Every clause, by id: its prose, its source, its own values and their overrides. Part of
    /// the reference surface (required with `api`); another service's contract may leave the
    /// prose out, and its reports name each clause by what it judges (`T1`: Pool limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clauses: Option<Clauses>,
    /// The reference service's routes (digitize, export, relay, claim, metrics, health) and
    /// their input limits. Declaring it declares the reference surface: the loader then requires
    /// every section the reference checks read (`hooks`, `observability`, `clauses`,
    /// `connections`, `upload`, `errors` and the digitize, export and relay pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    /// Every error code with its HTTP status: the only place a status is written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorSpec>,
    /// The request id every answer carries, for a service without the reference surface (F4).
    /// None: it promises none, and F4 is not applicable (the reference's is `clauses.f4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestIds>,
    /// Where a service without the reference surface serves its effective values (the
    /// `contract` check). None: it serves none, and its contract's own values are judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
    /// The service's error log lines, for a service without the reference surface (F3): one
    /// line per error answer, joined to it by its `request_id` member (the id `[request_id]`
    /// declares). None: F3 is not applicable (the reference's are `clauses.f3`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_logs: Option<ErrorLogs>,
    /// The Server-Timing entries a served answer carries, for a service without the reference
    /// surface (T1 cross-checks them). None: it reports none (the reference's are
    /// `[observability]`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timing: Option<ServerTiming>,
    /// Where a service without the reference surface keeps its requests' temporary files, all
    /// removed when their request ends, however it ends (F1's failures, B1's deadlines, B3's
    /// disconnects read the folder with `--temp-dir`). None: it promises nothing of them (the
    /// reference's is rule `temp-folder`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_files: Option<TempFiles>,
    /// The headers and metrics the implementation exposes for black-box checks. None: it
    /// exposes none, and the checker cross-checks nothing (it judges by its own clock alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observability: Option<Observability>,
    /// The test-hook header and its gate. None: the service honours no hook, and a check that
    /// needs to hold a worker uses the pool's declared `hold` or is not applicable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Hooks>,
    /// What an implementation does that no clause's sentence spells out: the rules an
    /// implementer would otherwise guess, each with the clause that judges it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub implementation: Vec<ImplementationRule>,
    /// The slack of the checker's timing judgements.
    pub tolerances: Tolerances,
    /// The load profiles `plimsoll load` runs, sized relative to capacity. Optional: they are
    /// the conformance kit's settings, not the service's, so an implementation's
    /// `/v1/contract` may leave them out (the embedded contract's profiles apply).
    #[serde(default)]
    pub load: Load,
}

/// `[contract]`: the contract's name and version, as the docs and OpenAPI head them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Short stable name, the OpenAPI document's `x-plimsoll.contract`.
    pub name: String,
    /// The docs' heading and the OpenAPI `info.title`.
    pub title: String,
    /// The contract's version: in the docs' heading and the OpenAPI `info.version`.
    pub version: String,
    /// One sentence on what the contract promises, under the docs' heading.
    pub summary: String,
}

/// A document the clauses cite (`[sources.KEY]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The document's title: sources are cited by title only (they are not files of this
    /// repository).
    pub title: String,
}

/// What every clause says besides its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Clause<V> {
    /// The heading the docs give the clause (after its id).
    pub title: String,
    /// The docs section the clause is listed under.
    pub category: Category,
    /// The clause in one sentence, with its numbers.
    pub statement: String,
    /// Why this value.
    pub rationale: String,
    /// How the conformance suite checks it (the docs print the same sentence).
    pub verification: String,
    /// Where the clause comes from.
    pub source: SourceRef,
    /// Environment variables that override a field of `value` at deployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
    /// What the clause promises besides the service's pools and sections, field by field: the
    /// values the server enforces and the checker expects (`{}`: nothing of its own).
    pub value: V,
}

/// The docs section a clause is listed under, in the docs' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(
    missing_docs,
    reason = "documented variants would change the published schemas"
)]
pub enum Category {
    Throughput,
    Bounds,
    Failure,
    Relay,
}

impl Category {
    /// The heading of the category's section in the docs.
    pub fn title(self) -> &'static str {
        match self {
            Category::Throughput => "Throughput",
            Category::Bounds => "Per-request bounds",
            Category::Failure => "Failure semantics",
            Category::Relay => "Relay",
        }
    }
}

/// Where a clause comes from: a document of `[sources]` and a place in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    /// A key of `[sources]`.
    pub doc: String,
    /// Where in that document.
    pub section: String,
}

/// An environment variable that replaces one field of a clause's value at deployment; the server
/// and the checker apply it alike ([`Contract::with_overrides`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// Environment variable name.
    pub env: String,
    /// The field of the clause's `value` it replaces.
    pub field: String,
}

/// Every clause, by id. Ids are TOML keys, so a duplicate id is a TOML error with its line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Clauses {
    /// T1: how many requests each pool runs at once (its `workers`, what they count, its key,
    /// and its own series when declared).
    #[serde(rename = "T1")]
    pub t1: Clause<Empty>,
    /// T2: each pool's queue order and capacity (its `queue`).
    #[serde(rename = "T2")]
    pub t2: Clause<Empty>,
    /// T3: what a refusal carries (a `[refusals]` entry's `hint`).
    #[serde(rename = "T3")]
    pub t3: Clause<Empty>,
    /// B1: the per-request timeouts and the reference durations they must leave room for.
    #[serde(rename = "B1")]
    pub b1: Clause<Timeouts>,
    /// B2: the per-request memory cap (each pool's `memory_cap_mb`, and its `over_cap`
    /// requests).
    #[serde(rename = "B2")]
    pub b2: Clause<MemoryCap>,
    /// B3: how soon a disconnected client's request stops (each pool's `cancellation`).
    #[serde(rename = "B3")]
    pub b3: Clause<Empty>,
    /// B4: the request-head timeout and the connection cap (`[connections]`).
    #[serde(rename = "B4")]
    pub b4: Clause<Empty>,
    /// B5: the bytes of request bodies the server holds at once (`[upload]`'s budget).
    #[serde(rename = "B5")]
    pub b5: Clause<Empty>,
    /// F1: what a failing stage's answer carries.
    #[serde(rename = "F1")]
    pub f1: Clause<StageFailure>,
    /// F2: the codes bad input is answered with (and each pool's `bad_requests`).
    #[serde(rename = "F2")]
    pub f2: Clause<InvalidInput>,
    /// F3: the error log line.
    #[serde(rename = "F3")]
    pub f3: Clause<ErrorLogs>,
    /// F4: the request id header and which client-supplied ids are kept.
    #[serde(rename = "F4")]
    pub f4: Clause<RequestId>,
    /// T4: each rate limit's rate, burst and burst mode (a `[rate_limits]` entry). Optional: a
    /// contract that declares no rate limit (the digitize one) writes no prose for it.
    #[serde(rename = "T4", default, skip_serializing_if = "Option::is_none")]
    pub t4: Option<Clause<Empty>>,
    /// T5: each pool's queue timeout (its `queue.timeout_ms` and `queue.timeout_answer`).
    /// Optional, as T4.
    #[serde(rename = "T5", default, skip_serializing_if = "Option::is_none")]
    pub t5: Option<Clause<Empty>>,
    /// T6: what a refusal does to its connection (a `[refusals]` entry's `connection`).
    /// Optional, as T4.
    #[serde(rename = "T6", default, skip_serializing_if = "Option::is_none")]
    pub t6: Option<Clause<Empty>>,
    /// R1: the relay's worker pool (the `relay` pool).
    #[serde(rename = "R1")]
    pub r1: Clause<Empty>,
    /// R2: no head-of-line blocking on one connection (behaviour only).
    #[serde(rename = "R2")]
    pub r2: Clause<Empty>,
    /// R3: how response frames are matched to their requests.
    #[serde(rename = "R3")]
    pub r3: Clause<RelayMatching>,
    /// R4: how far past the pool size the overflow check goes.
    #[serde(rename = "R4")]
    pub r4: Clause<RelayOverflow>,
    /// R5: the largest body one frame carries.
    #[serde(rename = "R5")]
    pub r5: Clause<FrameAtomicity>,
    /// R6: surviving a reconnect with work in flight, and how soon a dialling bridge is back.
    #[serde(rename = "R6")]
    pub r6: Clause<RelayReconnect>,
}
