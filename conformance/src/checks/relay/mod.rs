//! Relay (R1–R6): the relay bridge of seed 003, judged from outside. Each scenario opens one
//! WebSocket to `{api.relay.path}` ([`client`]), sends envelopes built from the contract and
//! reassembles the frames that come back ([`frames`]), while the relay pool's gauges in
//! `/metrics` are sampled ([`sampler`]). Holds are `hold=relay:MS` in an envelope's hook header,
//! applied by the relay worker while it holds its slot. Every wait is bounded in count and time.

pub mod client;
pub mod frames;
pub mod refusals;
pub mod sampler;

pub mod r1;
pub mod r2;
pub mod r3;
pub mod r4;
pub mod r5;
pub mod r6;
