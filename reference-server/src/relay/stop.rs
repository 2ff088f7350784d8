//! How long relay work may run on once the server is told to stop: the [`RelayStop`] seam, and
//! R6's answer ([`CutAtOnce`]): none — the relay already treats a stopping bridge's requests as
//! orphans, so waiting for them only delays the stop.

use std::fmt::Debug;
use std::time::Duration;

/// The grace relay workers get after the first stop signal, before they are cut.
pub trait RelayStop: Debug + Send + Sync {
    /// `drain` is how long the server lets HTTP requests in flight finish.
    fn grace(&self, drain: Duration) -> Duration;
}

/// Relay work is cut at the first signal.
#[derive(Debug)]
pub(crate) struct CutAtOnce;

impl RelayStop for CutAtOnce {
    // clause: R6 — told to stop, the bridge exits without waiting for its workers
    fn grace(&self, _drain: Duration) -> Duration {
        Duration::ZERO
    }
}
