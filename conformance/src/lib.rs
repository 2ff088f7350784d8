//! `plimsoll-conformance`: checks any implementation against the contract, black-box.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod baseline;
pub mod check;
pub mod checks;
pub mod docs;
pub mod observe;
pub mod remote;
pub mod session;
pub mod verdict;
pub mod waivers;
