//! `plimsoll-server`: the reference implementation of the Plimsoll contract.
//!
//! The pipeline ([`pipeline`](plimsoll_engine::pipeline), [`export`](plimsoll_engine::export))
//! is real work with cooperative checkpoints ([`job`](plimsoll_engine::job)), in
//! `plimsoll-engine`; the HTTP layer (`http`) and the relay bridge (`bridge`, speaking `relay`)
//! put every clause of the contract around it: admission ([`admission`], `retry_after`), the
//! per-request bounds (`bounds`), the worker and its teardown (`worker`), error answers
//! (`problem`), logs ([`logging`]), metrics ([`metrics`]) and what the server claims about itself
//! (`claims`).
//!
//! Each piece a broken variant may replace is a seam: a trait with the contract's implementation
//! next to it, gathered in `components::Components`. The broken variants themselves (`mutant`)
//! exist only in builds with the `mutants` feature.
//!
//! Public are only the modules other crates reach: [`server`] and [`embedded`] start it,
//! [`config`] and [`logging`] configure it, [`state`] lets tests watch it from inside, along with
//! what it holds ([`admission`]'s pools, [`metrics`], [`upload_budget`]), and `mutant` breaks one
//! piece of it. The rest is private to the crate.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod accept;
pub mod admission;
mod bounds;
mod bridge;
mod claims;
mod components;
pub mod config;
mod connections;
pub mod embedded;
mod error;
mod hooks;
mod http;
mod json_text;
pub mod logging;
mod media;
pub mod metrics;
#[cfg(feature = "mutants")]
pub mod mutant;
mod poll_again;
mod problem;
mod relay;
mod retry_after;
pub mod server;
pub mod state;
mod upload;
pub mod upload_budget;
mod worker;

pub use config::{Config, ConfigError};
pub use embedded::Embedded;
pub use logging::LogSink;
#[cfg(feature = "mutants")]
pub use mutant::Mutant;
pub use server::{RunningServer, Server};
