//! `plimsoll-spec`: the concurrency contract as data.
//!
//! `spec/contract.toml` is the single source of truth. This crate loads and validates it, applies
//! environment overrides, and renders everything derived from it (OpenAPI, JSON Schemas, docs).
//!
//! ## Doc comments and the published schemas
//!
//! The doc comments of the types that derive [`schemars::JsonSchema`] are the descriptions in
//! the checked-in JSON Schemas, the OpenAPI document and `docs/language.md`: every one of the
//! contract's model since language 2. The design and relay types keep the descriptions they were
//! published with (`#[schemars(description = "")]` on what was documented later), and the unit
//! variants of some schema enums stay undocumented (`#[expect(missing_docs)]`: schemars turns a
//! documented variant into a `oneOf` entry of its own). Publishing either is a schema change of
//! its own: drop the attribute, document the variants, regenerate.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod design;
pub mod hooks;
pub mod metric;
pub mod problem;
pub mod relay;
pub mod render;
pub mod stage;

pub use design::{
    Design, ExportFormat, Extents, Stitch, StitchCommand, Thread, UnknownExportFormat,
};
pub use hooks::{HookDirective, HookParseError, parse_hooks};
pub use metric::{MetricName, Outcome, Pool};
pub use problem::{ErrorCode, PROBLEM_CONTENT_TYPE, Problem, UnknownErrorCode};
pub use stage::{InvalidStageName, Stage, StageName, UnknownStage};

pub mod bodies;
pub mod changelog;
pub mod clause;
pub mod draft;
pub mod limits;
pub mod model;
pub mod overrides;
pub mod parse;
pub mod reconcile;
pub mod reference;
pub mod refusal;
pub mod upgrade;
mod validate;

pub use changelog::{Changelog, Release};
pub use clause::{CheckId, ClauseId, ClauseRef, ExpandError, UnknownCheck, UnknownClause};
pub use limits::PoolLimits;
pub use model::Contract;
pub use overrides::{Applied, OverrideError};
pub use parse::{ContractError, EMBEDDED_TOML, Violation};
pub use reconcile::{Adopted, Difference, Reconciliation, Refused};
pub use refusal::{AnswerBody, RefusalAnswer};
