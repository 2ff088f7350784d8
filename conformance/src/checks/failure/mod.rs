//! Failure semantics (F1–F4): what a failing stage answers, one code per kind of bad input,
//! one log line per error, and a request id on everything.

mod body_size;
mod declared;
pub mod f1;
pub mod f2;
pub mod f3;
pub mod f4;
mod failed_call;
pub mod input;
pub mod routes;
pub mod server_log;

pub use crate::remote::Seen;
