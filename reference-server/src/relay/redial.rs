//! When a bridge that dials its relay dials again after losing it: the [`Redial`] seam, and R6's
//! backoff ([`ContractBackoff`]).

use std::fmt::Debug;
use std::time::Duration;

use plimsoll_spec::model::RelayReconnect;

pub(crate) use super::socket::Ending;

/// How long a dialling bridge waits before it dials again: the [`Redial`] seam.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after a drop, and after the first failed dial.
    pub initial: Duration,
    /// Each failed dial doubles the wait, up to this.
    pub max: Duration,
}

/// When a bridge that lost its relay dials again.
pub trait Redial: Debug + Send + Sync {
    /// The backoff from R6's values; `None`: never dial again.
    fn backoff(&self, r6: &RelayReconnect) -> Option<Backoff>;

    /// Whether to dial again after a socket ended this way: R6 makes no difference between a
    /// relay that closed the socket and one that reset it, so by default both.
    fn after(&self, _ending: Ending) -> bool {
        true
    }
}

/// R6's backoff, as written.
#[derive(Debug)]
pub(crate) struct ContractBackoff;

impl Redial for ContractBackoff {
    // clause: R6 — dialled again after backoff_initial_ms, doubling to backoff_max_ms
    fn backoff(&self, r6: &RelayReconnect) -> Option<Backoff> {
        Some(Backoff {
            initial: Duration::from_millis(r6.backoff_initial_ms),
            max: Duration::from_millis(r6.backoff_max_ms),
        })
    }
}
