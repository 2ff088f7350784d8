//! `plimsoll-conformance`: checks any implementation against the contract, black-box.

pub mod check;
pub mod checks;
pub mod cli;
pub mod docs;
pub mod load;
pub mod report;
pub mod serve;
pub mod session;
pub mod target;
pub mod verdict;
