//! `plimsoll-fault`: the fault proxy inside the checker: userspace TCP on loopback between the
//! checker's clients and the target, injecting one fault named as Toxiproxy names it (latency
//! with jitter, bandwidth, slicer, reset_peer, timeout/blackhole, slow_close), deterministic by
//! `--seed`.
//!
//! Its own crate because it is the lowest of the checker's: it needs only the contract (for the
//! bounds a fault lengthens) and sockets, while the checks, the load profiles and the reports
//! all name its faults and adjusted bounds; a change to the checks does not rebuild it. The
//! seeded generator every random draw of the checker uses ([`rng`]) lives here for the same
//! reason: the fault's draws are the lowest that need it.
//!
//! Why our own and not a crate: the Rust ports of Toxiproxy are a client for its Go server
//! (`toxiproxy_rust`) or unmaintained since 2021 (`noxious`, on tokio-util 0.6 and rand 0.8,
//! whose draws no seed of ours reproduces), and neither resets a connection with an RST. A
//! forwarder is small: [`spec`] (the `--fault` grammar), [`adjust`] (what a fault adds to
//! each bound the checks judge by), `shape` (one direction's numbers),
//! `pump` (one direction's bytes), [`proxy`] (the listener and its connections) and [`standard`]
//! (the named faults of the matrix).

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod pump;
mod shape;

pub mod adjust;
pub mod proxy;
pub mod rng;
pub mod spec;
pub mod standard;

#[cfg(test)]
mod tests;

pub use adjust::{Adjustment, Adjustments, Bound};
pub use proxy::{FaultLine, FaultProxy, ProxyError, ProxyOptions};
pub use spec::{Fault, SpecError, Stream, Toxic};
pub use standard::NamedFault;
