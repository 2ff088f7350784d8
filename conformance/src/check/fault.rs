//! `check --fault SPEC`: the checks' traffic goes through the fault proxy. The target's base
//! URL becomes the proxy's, so every request of every check (the raw connections of B4 and B5
//! too, which connect to the base URL's address, and the relay socket the checker dials to the
//! target) crosses the fault; the opening read of the target's claimed contract does not, so
//! what the checks judge by is read on a clean line. Where the target's bridge dials the
//! checker instead, its sockets cross the same fault in the relay listener
//! ([`super::bridge::BridgePlan::relay`], or the embedded server's), bound before the subject
//! starts.

use plimsoll_fault::{Adjustments, Fault, FaultProxy, ProxyOptions};
use plimsoll_spec::Contract;

use super::CheckPlan;
use crate::remote::relay::RelayListener;
use crate::session::Fatal;
use crate::verdict::Manifest;

/// Connections the proxy forwards at once, above the contract's connection cap: B4 opens one
/// past the cap, and the checker's other requests run beside it.
const PROXY_HEADROOM: usize = 64;
/// The connections the proxy forwards at once for a contract that promises no cap: far more
/// than any check opens.
const UNCAPPED: usize = 1024;

/// The proxy a faulted run goes through, the base URL that reaches the target through it, and
/// what the fault adds to the checks' bounds.
pub(super) struct Faulted {
    /// Kept for the run: dropped, it closes every connection through it.
    pub(super) proxy: FaultProxy,
    /// `base`, with the proxy's address in place of the target's.
    pub(super) base: String,
    /// The bounds the fault lengthens, shown in the header and the manifest.
    pub(super) adjustments: Adjustments,
}

/// With `--fault`: the proxy the run goes through, its fault and seed noted in `manifest`.
pub(super) async fn begin(
    plan: &CheckPlan,
    base: &str,
    expected: &Contract,
    manifest: &mut Manifest,
) -> Result<Option<Faulted>, Fatal> {
    let Some(fault) = &plan.fault else {
        return Ok(None);
    };
    let faulted = through(base, fault, plan.seed, expected).await?;
    note(plan, &faulted.adjustments, manifest);
    Ok(Some(faulted))
}

/// The fault and its seed in `manifest`, with every bound it lengthens.
pub(super) fn note(plan: &CheckPlan, adjustments: &Adjustments, manifest: &mut Manifest) {
    manifest.fault = Some(adjustments.clone());
    manifest.seed = plan.seed;
}

/// After the last check: the proxy closes, and the counts show the traffic went through the
/// fault (the proxy's connections; the bridge's relay sockets, when it dials the checker).
pub(super) fn end(faulted: Option<Faulted>, relay: Option<&RelayListener>) {
    if let Some(faulted) = faulted {
        println!(
            "{} connection(s) went through the fault proxy",
            faulted.proxy.accepted()
        );
    }
    if let Some((fault, sockets)) = relay.and_then(RelayListener::through) {
        println!("{sockets} relay socket(s) the bridge dialled went through {fault}");
    }
}

/// Starts a proxy to `base`'s address under `fault`, drawing from `seed`.
async fn through(
    base: &str,
    fault: &Fault,
    seed: u64,
    expected: &Contract,
) -> Result<Faulted, Fatal> {
    let usage = |why: String| Fatal::Usage(format!("--fault needs a plain http:// target: {why}"));
    let mut url = reqwest::Url::parse(base).map_err(|e| usage(e.to_string()))?;
    if url.scheme() != "http" {
        return Err(usage(format!("{base} is not http://")));
    }
    let upstream = url
        .socket_addrs(|| Some(80))
        .ok()
        .and_then(|addrs| addrs.into_iter().next())
        .ok_or_else(|| usage(format!("{base} has no address")))?;
    let options = ProxyOptions {
        seed,
        max_connections: expected
            .connections
            .as_ref()
            .and_then(|c| c.max_connections)
            .map_or(UNCAPPED, |cap| cap as usize)
            + PROXY_HEADROOM,
    };
    let proxy = FaultProxy::start(upstream, *fault, options)
        .await
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    let addr = proxy.addr();
    // A host name would resolve to the target again: the proxy is reached by its address.
    let _ = url.set_ip_host(addr.ip());
    let _ = url.set_port(Some(addr.port()));
    Ok(Faulted {
        proxy,
        base: url.as_str().trim_end_matches('/').to_owned(),
        adjustments: Adjustments::new(fault, expected),
    })
}
