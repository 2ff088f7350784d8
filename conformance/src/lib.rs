//! `plimsoll-conformance`: checks any implementation against the contract, black-box.

pub mod check;
pub mod checks;
pub mod docs;
pub mod load;
pub mod remote;
pub mod report;
pub mod rng;
pub mod session;
pub mod verdict;
