//! `plimsoll-server`: the reference implementation of the Plimsoll contract.

pub mod export;
pub mod job;
pub mod pipeline;
