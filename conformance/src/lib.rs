//! `plimsoll-conformance`: checks any implementation against the contract, black-box.

pub mod cli;
pub mod docs;
pub mod serve;
