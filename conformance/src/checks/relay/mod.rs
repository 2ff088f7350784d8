//! Relay (R1–R6): the relay bridge of seed 003, judged from outside. Each scenario opens one
//! WebSocket, wherever the target's sockets come from ([`client`], `remote::relay::RelaySocket`),
//! sends envelopes built from the contract and reassembles the frames that come back
//! ([`frames`]). Holding a relay worker and counting what runs is the target's local handler's
//! (`remote::local::LocalHandler`: the target's own API, held by its hooks and counted by its
//! gauges, or the checker's upstream): no check here asks which. Every wait is bounded in count
//! and time.

pub mod client;
pub mod frames;
pub mod refusals;

pub mod r1;
pub mod r2;
pub mod r3;
pub mod r4;
pub mod r5;
pub mod r6;
