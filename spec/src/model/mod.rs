//! The typed model of `spec/contract.toml`. Field names are the TOML keys; every struct denies
//! unknown fields so a typo in the contract is an error with its line, not a silently ignored
//! value.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod api;
mod profiles;
mod rules;
mod values;

pub use api::*;
pub use profiles::*;
pub use rules::*;
pub use values::*;

/// The whole contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Plimsoll contract")]
pub struct Contract {
    pub contract: Meta,
    /// Documents the clauses cite, by key (`seed-000`, `decision`, ...).
    pub sources: BTreeMap<String, Source>,
    pub clauses: Clauses,
    pub api: Api,
    pub stages: Stages,
    /// Every error code with its HTTP status: the only place a status is written.
    pub errors: Vec<ErrorSpec>,
    pub observability: Observability,
    pub hooks: Hooks,
    /// What an implementation does that no clause's sentence spells out: the rules an
    /// implementer would otherwise guess, each with the clause that judges it.
    pub implementation: Vec<ImplementationRule>,
    pub tolerances: Tolerances,
    /// The load profiles `plimsoll load` runs, sized relative to capacity. Optional: they are
    /// the conformance kit's settings, not the service's, so an implementation's
    /// `/v1/contract` may leave them out (the embedded contract's profiles apply).
    #[serde(default)]
    pub load: Load,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    pub title: String,
    pub version: String,
    pub summary: String,
}

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
    pub title: String,
    pub category: Category,
    /// The clause in one sentence, with its numbers.
    pub statement: String,
    /// Why this value.
    pub rationale: String,
    /// How the conformance suite checks it (the docs print the same sentence).
    pub verification: String,
    pub source: SourceRef,
    /// Environment variables that override a field of `value` at deployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
    pub value: V,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Throughput,
    Bounds,
    Failure,
    Relay,
}

impl Category {
    pub fn title(self) -> &'static str {
        match self {
            Category::Throughput => "Throughput",
            Category::Bounds => "Per-request bounds",
            Category::Failure => "Failure semantics",
            Category::Relay => "Relay",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    /// A key of `[sources]`.
    pub doc: String,
    /// Where in that document.
    pub section: String,
}

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
    #[serde(rename = "T1")]
    pub t1: Clause<WorkerLimits>,
    #[serde(rename = "T2")]
    pub t2: Clause<QueuePolicy>,
    #[serde(rename = "T3")]
    pub t3: Clause<Backpressure>,
    #[serde(rename = "B1")]
    pub b1: Clause<Timeouts>,
    #[serde(rename = "B2")]
    pub b2: Clause<MemoryCap>,
    #[serde(rename = "B3")]
    pub b3: Clause<Cancellation>,
    #[serde(rename = "B4")]
    pub b4: Clause<ConnectionBounds>,
    #[serde(rename = "F1")]
    pub f1: Clause<StageFailure>,
    #[serde(rename = "F2")]
    pub f2: Clause<InvalidInput>,
    #[serde(rename = "F3")]
    pub f3: Clause<ErrorLogs>,
    #[serde(rename = "F4")]
    pub f4: Clause<RequestId>,
    #[serde(rename = "R1")]
    pub r1: Clause<RelayPool>,
    #[serde(rename = "R2")]
    pub r2: Clause<Empty>,
    #[serde(rename = "R3")]
    pub r3: Clause<RelayMatching>,
    #[serde(rename = "R4")]
    pub r4: Clause<RelayOverflow>,
    #[serde(rename = "R5")]
    pub r5: Clause<FrameAtomicity>,
    #[serde(rename = "R6")]
    pub r6: Clause<Empty>,
}
