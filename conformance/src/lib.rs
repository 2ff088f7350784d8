//! `plimsoll-conformance`: checks any implementation against the contract, black-box.
//!
//! The checks ([`checks`], run by [`check`]), the target seen from outside ([`remote`]), what
//! every run sets up and tears down ([`session`]) and the verdict model every run produces
//! ([`verdict`]); [`discover`] measures one route of a service that has no contract yet, with
//! the checks' own pieces, for a draft. Load generation (`plimsoll-load`), the fault proxy (`plimsoll-fault`) and the
//! renderers (`plimsoll-report`) are crates of their own around it, and no command line is
//! parsed here: a run takes a plain plan and tells an [`observe::Observer`] what happens.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod baseline;
pub mod check;
pub mod checks;
pub mod discover;
pub mod docs;
pub mod observe;
pub mod remote;
pub mod session;
pub mod verdict;
pub mod waivers;
