//! Connection bounds (B4), the seam: how long a request head may take and how many connections
//! are served at once. The accept loop that enforces them is [`crate::accept`].

use std::fmt::Debug;
use std::time::Duration;

use plimsoll_spec::model::ConnectionBounds;

/// The connection bounds a server enforces.
pub trait ConnectionPolicy: Debug + Send + Sync {
    /// How long a request head may take (`None`: for ever).
    fn head_timeout(&self, contract: &ConnectionBounds) -> Option<Duration>;
    /// How many connections are served at once (`None`: no limit).
    fn max_connections(&self, contract: &ConnectionBounds) -> Option<usize>;
}

/// The contract's bounds.
#[derive(Debug)]
pub(crate) struct ContractConnections;

impl ConnectionPolicy for ContractConnections {
    // clause: B4 — a head within 10 s of opening or of the last response, at most 512 connections
    fn head_timeout(&self, contract: &ConnectionBounds) -> Option<Duration> {
        Some(Duration::from_millis(contract.head_timeout_ms))
    }

    fn max_connections(&self, contract: &ConnectionBounds) -> Option<usize> {
        Some(contract.max_connections as usize)
    }
}
