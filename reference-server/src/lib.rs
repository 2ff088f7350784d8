//! `plimsoll-server`: the reference implementation of the Plimsoll contract.
//!
//! The pipeline ([`pipeline`], [`export`]) is real work with cooperative checkpoints
//! ([`job`]); the HTTP layer ([`http`]) puts every clause of the contract around it:
//! admission ([`admission`], [`retry_after`]), deadlines and cancellation (`http::pipeline`),
//! error mapping (`http::problem`), logs ([`logging`]) and metrics ([`metrics`]).

pub mod admission;
pub mod config;
pub mod embedded;
pub mod error;
pub mod export;
pub mod http;
pub mod job;
pub mod logging;
pub mod metrics;
pub mod mutant;
pub mod pipeline;
pub mod relay;
pub mod retry_after;
pub mod server;
pub mod state;
pub mod temp;

pub use config::{Config, ConfigError, LogSink};
pub use embedded::Embedded;
pub use mutant::Mutant;
pub use server::{RunningServer, Server};
