//! `plimsoll check` in bridge mode: the checker plays both ends of a relay bridge — the relay it
//! dials and the local handler it relays to — and runs the relay clauses (R1–R6) against it,
//! judging everything at those two ends: the bridge has no HTTP API the checker reads, and
//! needs no test hooks. The bridge is started by the checker (`--bridge-command`, stopped at
//! the end) or by hand (`--upstream-listen`, with both URLs printed): a [`BridgePlan`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use plimsoll_fault::Adjustments;
use plimsoll_spec::model::Category;
use plimsoll_spec::{CheckId, Reconciliation};

use super::{Judging, Suite, run_checks};
use crate::checks::selected;
use crate::remote::Target;
use crate::remote::bridge::{BridgeProcess, RELAY_URL, UPSTREAM_URL};
use crate::remote::relay::{RelayEnd, RelayListener};
use crate::remote::upstream::Upstream;
use crate::session::{self, ContractSource, Fatal, Subject};
use crate::verdict::RunReport;

/// How long a bridge the checker started has to dial the relay for the first time.
const FIRST_DIAL_STARTED: Duration = Duration::from_secs(30);
/// How long a bridge started by hand has (someone is typing its command).
const FIRST_DIAL_BY_HAND: Duration = Duration::from_secs(120);
/// Lines of the bridge's own output shown when something went wrong.
const TAIL_LINES: usize = 20;

/// Where the two ends listen when no address is given: free loopback ports.
const ON_LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Where a bridge run's two ends are and which bridge dials them (the binary makes it from the
/// command line's `Bridge` options).
#[derive(Debug, Clone)]
pub struct BridgePlan {
    /// Where the checker plays the relay the bridge dials, through the run's fault if any.
    pub relay: RelayEnd,
    /// Where the checker serves the bridge's local handler; `None`: a free loopback port.
    pub upstream_listen: Option<SocketAddr>,
    /// The bridge's command (`sh -c`, `{relay_url}` and `{upstream_url}` filled in); `None`: a
    /// bridge started by hand, told both URLs.
    pub command: Option<String>,
}

/// The subject of a bridge run: both ends listening and, with a command, the bridge started
/// against them.
pub async fn subject(plan: BridgePlan) -> Result<Subject, Fatal> {
    let relay_at = plan.relay.addr;
    let relay = plan
        .relay
        .listen()
        .await
        .map_err(|e| Fatal::Usage(format!("cannot listen as the relay on {relay_at}: {e}")))?;
    let upstream_at = plan.upstream_listen.unwrap_or(ON_LOOPBACK);
    let upstream = Upstream::bind(upstream_at).await.map_err(|e| {
        Fatal::Usage(format!(
            "cannot serve the bridge's local handler on {upstream_at}: {e}"
        ))
    })?;
    let bridge = match &plan.command {
        Some(template) => Some(Arc::new(
            BridgeProcess::spawn(template, relay.url(), upstream.url())
                .map_err(|e| Fatal::Usage(e.to_string()))?,
        )),
        None => {
            println!(
                "Bridge: start the bridge under test with {RELAY_URL} = {} and {UPSTREAM_URL} = {}",
                relay.url(),
                upstream.url()
            );
            None
        }
    };
    Ok(Subject::bridge(Arc::new(relay), Arc::new(upstream), bridge))
}

/// The relay clauses against the bridge, by the contract's own values (a bridge makes no claim
/// the checker could read).
pub(super) async fn run_suite(
    run: &Suite<'_>,
    judging: &Judging,
    source: &ContractSource,
    subject: &Subject,
) -> Result<RunReport, Fatal> {
    let (plan, partial) = (run.plan, run.partial);
    let (Some(relay), Some(upstream)) = (&subject.relay, &subject.upstream) else {
        return Err(Fatal::Usage("bridge mode without its two ends".into()));
    };
    let expected = source.contract.clone();
    let reconciliation = Reconciliation {
        effective: expected.clone(),
        adopted: Vec::new(),
        refused: Vec::new(),
        unreadable: None,
    };
    let mut manifest = session::manifest("plimsoll".into(), source, subject, &reconciliation);
    manifest.trials = plan.trials.unwrap_or(expected.tolerances.trials);
    manifest.strict = plan.strict;
    // Only the relay's sockets cross a fault here (the listener was bound through it): the
    // bridge's local handler is its own node's, on a clean line.
    let adjustments = plan
        .fault
        .map(|fault| Adjustments::new(&fault, &expected))
        .unwrap_or_default();
    if plan.fault.is_some() {
        super::fault::note(plan, &adjustments, &mut manifest);
    }
    partial.begin(&manifest);
    run.observer.header(&manifest);
    first_dial(relay, subject.bridge.as_deref()).await?;
    let target = Arc::new(
        Target::new(
            upstream.url().to_owned(),
            expected,
            None,
            None,
            manifest.trials,
        )
        .with_bridge_ends(relay.clone(), upstream.clone(), subject.bridge.clone())
        .with_adjustments(adjustments),
    );
    let checks: Vec<_> = selected(&plan.only, &plan.skip)
        .filter(|check| match check.id {
            CheckId::Clause(id) => target.expected.clause(id).category == Category::Relay,
            _ => false,
        })
        .collect();
    let (results, series) = run_checks(run, judging, &checks, &target, |_| {
        unreachable!("bridge mode runs only the relay clauses")
    })
    .await;
    let report = RunReport {
        manifest,
        results,
        series: Some(series),
    };
    run.observer.summary(&report);
    super::fault::end(None, Some(relay));
    if let Some(bridge) = &subject.bridge
        && report.failed() > 0
    {
        println!(
            "The bridge's output (last {TAIL_LINES} lines):\n{}",
            bridge.tail(TAIL_LINES)
        );
    }
    Ok(report)
}

/// Waits for the bridge's first socket (kept for the first check); a bridge that exits or never
/// dials stops the run, saying why.
async fn first_dial(relay: &RelayListener, bridge: Option<&BridgeProcess>) -> Result<(), Fatal> {
    let Some(bridge) = bridge else {
        return relay
            .dialled(FIRST_DIAL_BY_HAND)
            .await
            .map(drop)
            .map_err(|e| Fatal::Unreachable(e.to_string()));
    };
    let dialled = tokio::select! {
        dialled = relay.dialled(FIRST_DIAL_STARTED) => dialled.map(drop).map_err(|e| e.to_string()),
        Some(status) = bridge.wait(FIRST_DIAL_STARTED) => Err(format!(
            "the bridge `{}` exited ({status}) before it dialled the relay",
            bridge.command()
        )),
    };
    dialled.map_err(|why| {
        Fatal::Unreachable(format!(
            "{why}; the bridge's output (last {TAIL_LINES} lines):\n{}",
            bridge.tail(TAIL_LINES)
        ))
    })
}
