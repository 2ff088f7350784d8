//! R1's seam for an envelope's hook header (rule `relay-hooks`): authorised like an HTTP
//! request's before the envelope takes a relay worker, and how long `hold=relay:MS` holds it.

use std::fmt::Debug;
use std::time::Duration;

use plimsoll_spec::Contract;

use super::envelope::relay_hold;
use crate::error::ErrorKind;

/// Reads an envelope's hook header.
pub trait RelayHooks: Debug + Send + Sync {
    /// How long the relay worker holds the envelope, or why the header is refused.
    fn hold(
        &self,
        contract: &Contract,
        hooks_enabled: bool,
        hook: Option<&str>,
    ) -> Result<Duration, ErrorKind>;
}

/// The contract's way: refused as the HTTP API refuses it (hooks off, or a malformed value).
#[derive(Debug)]
pub(crate) struct Authorised;

// clause: R1 — an envelope's hook header is authorised before it takes a relay worker
impl RelayHooks for Authorised {
    fn hold(
        &self,
        contract: &Contract,
        hooks_enabled: bool,
        hook: Option<&str>,
    ) -> Result<Duration, ErrorKind> {
        relay_hold(contract, hooks_enabled, hook)
    }
}
