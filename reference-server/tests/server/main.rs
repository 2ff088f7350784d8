//! Every clause of the contract, shown against the reference server over real loopback HTTP.

#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{TestServer, png, problem};
use plimsoll_spec::Contract;

mod bounds;
mod failures;
mod surface;
mod throughput;

fn stages() -> Vec<String> {
    Contract::embedded()
        .stages
        .digitize
        .iter()
        .map(|s| s.to_string())
        .collect()
}
