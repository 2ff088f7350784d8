//! After the load: wait for the pool to drain, read the temp files once it has, then prove
//! full capacity came back; and the verdicts every profile ends with.
//!
//! Temp files are read only after the drain. While requests are in flight each holds a temp
//! dir of its own, so no reading taken during the run can tell a leaked dir from one in use;
//! once every request has been answered (or abandoned by its client) and busy and queue depth
//! read 0, the count must be back where it was before the load, exactly.

use std::time::{Duration, Instant};

use plimsoll_conformance::verdict::CheckResult;

use super::profiles::Observed;
use super::verdicts::{self, CapacityProbe, Drained, TempCount};
use super::{Ctx, Node, fleet, scrape};

/// A server's temp files now: the `plimsoll_temp_files` gauge (the reference's), and its temp
/// folder if visible.
async fn temp_count(ctx: &Ctx<'_>, node: &Node) -> TempCount {
    let gauge = match &node.metrics_url {
        Some(url) => scrape::read_metrics(&ctx.client, url, &ctx.pool.gauges)
            .await
            .ok(),
        None => None,
    };
    TempCount {
        gauge: gauge.and_then(|v| v.temp_files),
        folder: scrape::temp_entries(node.temp_dir.as_deref()),
    }
}

/// The temp files of every watched server (the target, or each replica), before the load.
pub(super) async fn temp_counts(ctx: &Ctx<'_>) -> Vec<TempCount> {
    let reads = ctx.watched().into_iter().map(|node| temp_count(ctx, node));
    futures_util::future::join_all(reads).await
}

/// [`drain`] of every watched server at once; `before` is [`temp_counts`]' answer.
pub(super) async fn drain_all(
    ctx: &Ctx<'_>,
    before: &[TempCount],
    longest_hold_ms: u64,
    allowance: u64,
) -> Vec<Drained> {
    let drains = ctx
        .watched()
        .into_iter()
        .zip(before)
        .map(|(node, before)| drain(ctx, node, *before, longest_hold_ms, allowance));
    futures_util::future::join_all(drains).await
}

/// Once the load generator has stopped (every request it sent answered or abandoned): waits
/// until busy and queue depth read 0, then reads the temp files until they are back at
/// `temp_before` + `allowance`, for at most the cancellation bound (a server may remove a dir
/// just after giving its slot back; a leaked one never goes).
///
/// Every request still running ends within its hold, or within the cancellation bound of its
/// client leaving, so the drain is given `longest_hold_ms` + that bound + a margin for a slow
/// machine. A pool that never drains is read at that deadline. A target that declares no busy
/// series is given the cancellation bound (every request it was sent has been answered or
/// left) and its drain is reported unread.
async fn drain(
    ctx: &Ctx<'_>,
    node: &Node,
    temp_before: TempCount,
    longest_hold_ms: u64,
    allowance: u64,
) -> Drained {
    let poll = Duration::from_millis(ctx.section().scrape_interval_ms);
    let stop_within = ctx.pool.stop_within();
    let limit = Duration::from_millis(longest_hold_ms) + stop_within + Duration::from_secs(1);
    let started = Instant::now();
    let mut drained = Drained {
        temp_before,
        ..Drained::default()
    };
    let url = node
        .metrics_url
        .as_ref()
        .filter(|_| ctx.pool.gauges.busy.is_some());
    if url.is_none() {
        tokio::time::sleep(stop_within).await;
        drained.unread = true;
    }
    while let Some(url) = url
        && started.elapsed() < limit
    {
        if let Ok(v) = scrape::read_metrics(&ctx.client, url, &ctx.pool.gauges).await {
            drained.last_busy = v.busy;
            if v.busy.unwrap_or(0.0) == 0.0 && v.depth.unwrap_or(0.0) == 0.0 {
                drained.drained_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
                break;
            }
        }
        tokio::time::sleep(poll).await;
    }
    let grace = Instant::now();
    loop {
        drained.temp_after = temp_count(ctx, node).await;
        let back = drained
            .temp_after
            .left_behind(&temp_before, allowance)
            .is_empty();
        if back || grace.elapsed() >= stop_within {
            break;
        }
        tokio::time::sleep(poll).await;
    }
    drained.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    drained
}

/// Workers + queue held requests sent at once to `node`: all must be admitted (no slot was
/// lost to an abandoned request). In fleet mode each replica is probed directly: through a
/// random balancer even a fleet at full capacity would refuse some of R·(c + K) requests.
async fn probe(ctx: &Ctx<'_>, node: &Node) -> CapacityProbe {
    let started = Instant::now();
    let t = &ctx.pool.template;
    let n = ctx.expect.admissible();
    let hold = ctx.pool.fixed_hold_ms(ctx.section().burst.hold_ms);
    let sends = (0..n).map(|_| t.request(&ctx.client, &node.base, hold).send());
    let replies = futures_util::future::join_all(sends).await;
    let mut probe = CapacityProbe {
        sent: n,
        ..CapacityProbe::default()
    };
    for r in replies {
        match r {
            Ok(resp) if resp.status().as_u16() == t.ok_status => probe.admitted += 1,
            Ok(resp) => {
                let id = (t.request_id_header.as_deref())
                    .and_then(|h| resp.headers().get(h))
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("(no id)");
                probe
                    .problems
                    .push(format!("probe {id}: {}", resp.status().as_u16()));
            }
            Err(e) => probe.problems.push(format!("probe: {e}")),
        }
    }
    probe.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    probe
}

/// How a profile's run ended, for the verdicts every profile shares.
pub(super) struct Ending<'a> {
    pub observed: &'a Observed,
    /// One per watched server, in [`Ctx::watched`] order.
    pub drained: &'a [Drained],
    /// The profile saturates the pool: the busy gauge must reach the limit.
    pub must_reach: bool,
    pub temp_allowance: u64,
}

/// Verdicts every profile ends with: statuses (of every answer, through the balancer in fleet
/// mode), then for each watched server the busy gauge and recovery (which sends the capacity
/// probe) — named for the replica in fleet mode.
pub(super) async fn ending_verdicts(ctx: &Ctx<'_>, end: Ending<'_>) -> Vec<CheckResult> {
    let out = &end.observed.out;
    let mut statuses = verdicts::statuses(&ctx.expect, &out.attempts);
    statuses.duration_ms = out.elapsed_ms;
    ctx.print(&statuses);
    let mut results = vec![statuses];
    let name = |r: CheckResult, node: &Node| {
        if ctx.replicas.is_empty() {
            r
        } else {
            fleet::replica_result(r, &node.base)
        }
    };
    let watched = ctx.watched();
    let mut busy_results = Vec::new();
    for (node, seen) in watched.iter().zip(&end.observed.watched) {
        let mut busy = verdicts::busy_limit(
            &ctx.expect,
            &seen.samples,
            &seen.scrape_errors,
            end.must_reach,
        );
        busy.duration_ms = out.elapsed_ms;
        let busy = name(busy, node);
        ctx.print(&busy);
        busy_results.push(busy);
    }
    results.extend(busy_results);
    let probes = futures_util::future::join_all(watched.iter().map(|node| probe(ctx, node))).await;
    for ((node, drained), probe) in watched.iter().zip(end.drained).zip(&probes) {
        let recovery = verdicts::recovery(&ctx.expect, drained, probe, end.temp_allowance);
        let recovery = name(recovery, node);
        ctx.print(&recovery);
        results.push(recovery);
    }
    results
}
