//! `plimsoll-server`: the reference implementation of the Plimsoll contract.
//!
//! The pipeline ([`pipeline`], [`export`]) is real work with cooperative checkpoints ([`job`]);
//! the HTTP layer ([`http`]) and the relay bridge ([`bridge`], speaking [`relay`]) put every
//! clause of the contract around it: admission ([`admission`], [`retry_after`]), the per-request
//! bounds ([`bounds`]), the worker and its teardown ([`worker`]), error answers ([`problem`]),
//! logs ([`logging`]), metrics ([`metrics`]) and what the server claims about itself
//! ([`claims`]).
//!
//! Each piece a broken variant may replace is a seam: a trait with the contract's implementation
//! next to it, gathered in [`components::Components`]. The broken variants themselves (`mutant`)
//! exist only in builds with the `mutants` feature.

pub mod accept;
pub mod admission;
pub mod bounds;
pub mod bridge;
pub mod claims;
pub mod components;
pub mod config;
pub mod connections;
pub mod embedded;
pub mod error;
pub mod hooks;
pub mod http;
pub mod logging;
pub mod metrics;
#[cfg(feature = "mutants")]
pub mod mutant;
pub mod problem;
pub mod relay;
pub mod retry_after;
pub mod server;
pub mod state;
pub mod upload;
pub mod upload_budget;
pub mod worker;

pub use config::{Config, ConfigError};
pub use embedded::Embedded;
pub use logging::LogSink;
#[cfg(feature = "mutants")]
pub use mutant::Mutant;
pub use server::{RunningServer, Server};
