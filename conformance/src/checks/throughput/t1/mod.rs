//! T1: the worker limit of each pool, seen by the client's own timings; the busy and limit
//! gauges and the server's Server-Timing are claims, cross-checked against them.

mod counts;
mod metrics;

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::{Counts, LimitKey, PoolSpec};

use plimsoll_spec::{ClauseId, Contract, MetricName, Pool};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{
    Burst, GaugeWatch, Held, HeldRequest, clear_burst, fail_many, held, recipe_burst, require_peak,
    send_held, send_held_elsewhere,
};
use crate::checks::refusal::refused_as;
use crate::checks::registry::Check;
use crate::remote::{ELSEWHERE, Reply, Target, series};

/// T1's entry in the check registry: the evidence the docs print, and `t1`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::T1,
    "For each pool, a burst of held requests, two more than workers and queue places together, \
     sent at once: by the client's own clock exactly {pools.digitize.workers} digitize requests \
     ({pools.export.workers} exports) answer after one hold (they ran at once), exactly the queue's \
     places answer after two (they waited), and the rest are refused. Claims are cross-checked: \
     the busy gauge, sampled throughout, peaks at the limit, the limit gauge says it, and every \
     200 carries a Server-Timing `queue` and `run` that agree with the client (no more than the \
     limit running at once, queued ones reporting queue time, running ones not). Another \
     service's pools get the same burst through their `hold`, and its `[server_timing]`, when \
     declared, the same cross-check.",
    |t, c| Box::pin(t1(t, c)),
)
.covers(&["slot-lifetime", "server-timing", "metric-series"])
.applies_when(applies);

/// T1 judges every pool whose workers the checker can hold: not applicable when none can be.
fn applies(contract: &Contract) -> Result<(), String> {
    let any = contract
        .pools
        .iter()
        .any(|(name, spec)| !matches!(held(contract, name, spec), Held::Not(_)));
    if any {
        return Ok(());
    }
    let mut why = String::from("no pool whose workers the checker can hold");
    for (name, spec) in &contract.pools {
        if let Held::Not(reason) = held(contract, name, spec) {
            why.push_str(&format!("; pool `{name}` {reason}"));
        }
    }
    Err(why)
}

/// The most requests whose run intervals overlap. Each interval is placed by the server's own
/// Server-Timing (`queue` after sending, lasting `run`), so response delivery delays on a busy
/// client do not stretch it; overlaps shorter than `slack` (hand-over jitter) are ignored.
fn max_overlap(replies: &[&Reply], slack: Duration) -> usize {
    let mut events: Vec<(Instant, i32)> = Vec::new();
    for r in replies {
        if let (Some(start), Some((_, run))) = (r.claimed_start(), r.timing) {
            let end = start + Duration::from_secs_f64(run / 1000.0).saturating_sub(slack);
            events.push((start, 1));
            events.push((end.max(start), -1));
        }
    }
    events.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut max) = (0i32, 0i32);
    for (_, delta) in events {
        now += delta;
        max = max.max(now);
    }
    max as usize
}

/// The hold of T1's burst: long beside scheduling jitter, and short enough that a queued
/// request (two holds after it arrived) stays well inside the pool's deadline.
fn burst_hold(t: &Target, pool: Pool) -> Duration {
    Duration::from_millis(400).min(longest_hold(t, pool))
}

/// The longest hold a burst of the pool may use: a queued request (two holds after it arrived)
/// well inside the deadline.
fn longest_hold(t: &Target, pool: Pool) -> Duration {
    let deadline = t.deadline(pool);
    if t.queue_capacity(pool) > 0 {
        deadline / 5
    } else {
        deadline * 2 / 5
    }
}

/// Cross-checks the server's Server-Timing claims against the client's view of the burst:
/// every 200 carries them, a request that ran at once reports little queue time, a queued
/// one at least half a hold, `run` covers the hold, `queue + run` fits in what the client
/// waited, and no more than `workers` run intervals overlap. Returns that overlap, or None
/// when the claims are missing.
fn judge_server_timing(
    t: &Target,
    c: &mut Ctx,
    (pool, header): (&str, &str),
    b: &Burst,
    workers: usize,
) -> Option<usize> {
    let half = ms(b.hold) / 2.0;
    // The server measures inside the request; the client's wait includes the network.
    let slack_ms = 20.0;
    let mut missing = Vec::new();
    for (queued, r) in b
        .ran
        .iter()
        .map(|r| (false, r))
        .chain(b.queued.iter().map(|r| (true, r)))
    {
        let id = r
            .request_id(t.request_id_header())
            .unwrap_or_else(|| "(no id)".into());
        let (q, run) = match r.server_timing(header) {
            Ok(v) => v,
            Err(e) => {
                missing.push(format!("{id}: {e}"));
                continue;
            }
        };
        let waited = ms(r.elapsed);
        let problem = if queued && q < half {
            Some(format!(
                "claims {q:.0} ms in the queue, but the client saw it wait (answered after {waited:.0} ms)"
            ))
        } else if !queued && q >= half {
            Some(format!(
                "claims {q:.0} ms in the queue, but the client saw it run at once (answered after {waited:.0} ms)"
            ))
        } else if run + 1.0 < ms(b.hold) {
            Some(format!(
                "claims a run of {run:.0} ms, shorter than its {} ms hold",
                b.hold.as_millis()
            ))
        } else if q + run > waited + slack_ms {
            Some(format!(
                "claims queue {q:.0} + run {run:.0} ms, more than the {waited:.0} ms the client waited"
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            c.fail(format!("{pool} {id}: {header} {p}"));
        }
    }
    let admitted: Vec<&Reply> = b.admitted().collect();
    fail_many(
        c,
        &format!(
            "{pool}: {} of {} admitted replies carry no {header} queue and run",
            missing.len(),
            admitted.len()
        ),
        &missing,
    );
    if !missing.is_empty() {
        return None;
    }
    // Hand-over jitter between one request ending and the next starting is a few ms, tens under
    // load; a request that really runs alongside overlaps for its whole hold.
    let overlap = max_overlap(&admitted, b.hold / 4);
    c.require(overlap <= workers, || {
        format!("{pool}: {header} places {overlap} requests running at once, limit {workers}")
    });
    Some(overlap)
}

async fn t1_pool(t: &Arc<Target>, c: &mut Ctx, pool: Pool) -> String {
    let workers = t.workers(pool);
    let queue = t.queue_capacity(pool);
    match t.metric(MetricName::WorkersLimit, pool).await {
        Ok(limit) => {
            c.require(limit == workers as f64, || {
                format!(
                    "{} is {limit}, the contract says {workers}",
                    series(MetricName::WorkersLimit, pool)
                )
            });
        }
        Err(e) => c.fail(e.to_string()),
    }
    if pool == Pool::Export
        && let Err(e) = t.design().await
    {
        c.fail(e.to_string());
        return format!("{pool}: no design to export");
    }
    let n = workers + queue + 2;
    let watch = GaugeWatch::start(t, MetricName::WorkersBusy, pool);
    let holds = (burst_hold(t, pool), longest_hold(t, pool));
    let b = clear_burst(t, c, (pool, pool.as_str()), n, holds).await;
    let gauge = watch.finish().await;
    let hold = b.hold;
    b.require_capacity(c, &format!("{pool} burst"), workers, queue);
    let header = t.server_timing_header();
    let overlap = judge_server_timing(t, c, (pool.as_str(), header), &b, workers);
    let busy = series(MetricName::WorkersBusy, pool);
    let gauge_note = match gauge {
        Ok((max, samples)) => {
            let part = format!("{busy}'s peak");
            require_peak(t, c, (max, workers), (hold, &part), || {
                format!(
                    "{busy} peaked at {max} over {samples} samples while {} ran at once by the client's clock (limit {workers})",
                    b.ran.len()
                )
            });
            format!("busy gauge max {max}")
        }
        Err(e) => {
            c.fail(e.to_string());
            "busy gauge missing".to_owned()
        }
    };
    c.evidence.push(format!(
        "{pool}: {n} requests held {} ms: {}",
        hold.as_millis(),
        b.summary()
    ));
    format!(
        "{pool}: {} (client timings); {gauge_note}; {}",
        b.summary(),
        match overlap {
            Some(n) => format!("at most {n} running at once ({})", t.server_timing_header()),
            None => format!("{} missing", t.server_timing_header()),
        }
    )
}

/// What T1 sends a pool held by its declared `hold`, decided before anything is sent.
struct HeldPlan<'a> {
    /// The pool's workers, and the queue places the burst fills (two for an unbounded queue).
    workers: usize,
    queue: usize,
    /// Requests in the burst: workers + places + 2 (two more than an unbounded queue's two).
    n: usize,
    /// How long a request of the burst is waited on.
    limit: Duration,
    /// The pool's refusal, if it has one.
    refusal: Option<&'a plimsoll_spec::model::Refusal>,
    /// The held request, under the burst's key.
    burst: HeldRequest,
    /// The request as declared, without a hook, under the burst's key: what a client sends on
    /// the connections it keeps.
    plain: Option<plimsoll_spec::model::Recipe>,
}

impl<'a> HeldPlan<'a> {
    fn of(t: &'a Target, spec: &PoolSpec, held: &HeldRequest) -> HeldPlan<'a> {
        let workers = spec.workers as usize;
        let (queue, n) = match spec.queue.capacity.places() {
            Some(places) => (places as usize, workers + places as usize + 2),
            None => (2, workers + 2),
        };
        // The last queued request starts after every wave before it: give it those holds, its
        // own, and the tolerance.
        let waves = (n.div_ceil(workers.max(1)) + 1) as u32;
        let limit =
            held.hold * waves + Duration::from_millis(t.expected.tolerances.timeout_late_ms + 3000);
        let key = match &spec.key {
            LimitKey::Header(h) => Some(h.as_str()),
            LimitKey::All | LimitKey::ClientAddress => None,
        };
        let plain = spec.hold.as_ref().map(|h| {
            let mut request = h.request.clone();
            if let Some(name) = key {
                request.headers.insert(name.to_owned(), KEY_A.to_owned());
            }
            request
        });
        HeldPlan {
            workers,
            queue,
            n,
            limit,
            refusal: (spec.refusal.as_ref()).and_then(|r| t.expected.refusals.get(r)),
            burst: key.map_or_else(|| held.clone(), |h| held.with_header(h, KEY_A)),
            plain,
        }
    }
}

/// A pool held by its declared `hold`: a burst of workers + queue places + 2 copies at once
/// must split, by the client's clock alone, into exactly the workers answering after one hold,
/// the queue's places later, and the rest refused with the pool's refusal. An unbounded queue
/// takes the two more, and refuses none. No claim of the target is read: none is declared.
/// Beside it: idle connections (what the limit counts), another key's request (a limit per
/// key), the dependency's calls (a hold by dependency) and the pool's own series.
async fn t1_held(
    t: &Arc<Target>,
    c: &mut Ctx,
    (name, spec): (&str, &PoolSpec),
    held: &HeldRequest,
) -> String {
    let plan = HeldPlan::of(t, spec, held);
    // The dependency listens before the first request the service may call it for.
    if let Some(d) = &held.dependency
        && let Err(e) = t.dependencies.get(d).await
    {
        c.fail(format!("{name}: {e}"));
        return format!("{name}: its dependency cannot be played");
    }
    let idle = counts::beside_burst(
        t,
        c,
        name,
        (spec.counts, plan.plain.as_ref()),
        plan.workers,
        plan.limit,
    )
    .await;
    // The series are read before the burst's clock starts: another key's request is timed
    // from it.
    let watch = match &spec.metrics {
        Some(m) => Some(metrics::Watch::start(t, c, name, (m, plan.workers)).await),
        None => None,
    };
    let started = Instant::now();
    let other_key = spawn_other_key(t, c, (name, spec), held, (started, plan.limit));
    // Another key's request runs beside the burst: one more busy, wherever it is counted.
    let others = usize::from(other_key.is_some());
    let b = recipe_burst(t, c, &plan.burst, name, (plan.n, plan.limit), |reply| {
        refused_as(t, plan.refusal, reply)
    })
    .await;
    if let Some(watch) = watch {
        let counted = (&b, plan.workers + others, plan.queue);
        let seen = watch.finish(t, c, name, counted).await;
        if !seen.is_empty() {
            c.evidence.push(format!("{name}: its own series: {seen}"));
        }
    }
    let label = match idle.len() {
        0 => format!("{name} burst"),
        k => format!("{name} burst, beside {k} idle keep-alive connections"),
    };
    drop(idle);
    b.require_capacity(c, &label, plan.workers, plan.queue);
    if let (Counts::Connections, Some(plain)) = (spec.counts, &plan.plain) {
        let requests = (&plan.burst, plain);
        counts::judge_connections_counted(t, c, (name, spec), requests, plan.limit).await;
    }
    if let Some((label, task)) = other_key {
        judge_other_key(c, &format!("{name}: {label}"), held, task.await);
    }
    if let Some(d) = &held.dependency {
        judge_dependency_calls(t, c, name, d, (started, plan.workers + others)).await;
    }
    if let Some(declared) = &t.expected.server_timing {
        let claims = (name, declared.header.as_str());
        if let Some(n) = judge_server_timing(t, c, claims, &b, plan.workers) {
            c.evidence.push(format!(
                "{name}: {}: at most {n} running at once",
                declared.header
            ));
        }
    }
    c.evidence.push(format!(
        "{name}: {} copies of `{} {}` held {} ms by {}: {}",
        plan.n,
        held.request.method,
        held.request.path,
        held.hold.as_millis(),
        held.by,
        b.summary()
    ));
    format!("{name}: {} (client timings)", b.summary())
}

/// Another key's request, for a limit per key: named, and sent on its own task a quarter of a
/// hold after `started` (while the burst's key fills the pool), under another header value or
/// from another loopback address. None for a limit of one key, or a client-address key the
/// checker cannot vary (a target not on loopback: said in the evidence).
fn spawn_other_key(
    t: &Arc<Target>,
    c: &mut Ctx,
    (name, spec): (&str, &PoolSpec),
    held: &HeldRequest,
    (started, limit): (Instant, Duration),
) -> Option<(
    String,
    tokio::task::JoinHandle<Result<crate::remote::Reply, crate::remote::RequestError>>,
)> {
    let (label, other, elsewhere) = match &spec.key {
        LimitKey::Header(h) => (
            format!("`{h}: {KEY_B}` sent while `{KEY_A}` filled the pool"),
            held.with_header(h, KEY_B),
            false,
        ),
        LimitKey::ClientAddress if t.on_loopback() => (
            format!("a request from {ELSEWHERE} sent while 127.0.0.1 filled the pool"),
            held.clone(),
            true,
        ),
        LimitKey::ClientAddress => {
            c.evidence.push(format!(
                "{name}: another client address not judged: the target is not on loopback"
            ));
            return None;
        }
        LimitKey::All => return None,
    };
    let (t, at) = (t.clone(), started + held.hold / 4);
    let task = tokio::spawn(async move {
        tokio::time::sleep_until(at.into()).await;
        if elsewhere {
            send_held_elsewhere(&t, &other, limit).await
        } else {
            send_held(&t, &other, limit).await
        }
    });
    Some((label, task))
}

/// What the checker saw as the pool's dependency during the burst, from the other end: the
/// service called it (else no worker was held: most likely the service was not started with
/// the dependency's URL), and never more calls at once than `at_most` (the workers, and another
/// key's one) — each held request holds its worker while its call is held.
async fn judge_dependency_calls(
    t: &Target,
    c: &mut Ctx,
    name: &str,
    declared: &plimsoll_spec::model::DependencyHold,
    (since, at_most): (Instant, usize),
) {
    let d = match t.dependencies.get(declared).await {
        Ok(d) => d,
        Err(e) => return c.fail(format!("{name}: {e}")),
    };
    let calls = d.calls_since(since);
    let (at_once, _) = crate::remote::upstream::max_overlap(&calls);
    if !c.require(!calls.is_empty(), || {
        format!(
            "{name}: the service never called its dependency {} (was it started with {}={}?): \
             no request was held",
            d.name(),
            declared.env,
            declared.url()
        )
    }) {
        return;
    }
    c.require(at_once <= at_most, || {
        format!(
            "{name}: the dependency {} saw {at_once} calls at once, more than the {at_most} \
             requests the pool may run",
            d.name()
        )
    });
    c.evidence.push(format!(
        "{name}: the dependency {} saw {} calls, at most {at_once} at once",
        d.name(),
        calls.len()
    ));
}

/// The header values of the two keys a keyed pool's isolation is judged with.
const KEY_A: &str = "plimsoll-key-a";
const KEY_B: &str = "plimsoll-key-b";

/// Another key's request (`what` says which), sent while one key filled the pool: served,
/// within about one hold of being sent (it ran at once), or the keys share the limit the
/// contract says they do not.
fn judge_other_key(
    c: &mut Ctx,
    what: &str,
    held: &HeldRequest,
    reply: Result<
        Result<crate::remote::Reply, crate::remote::RequestError>,
        tokio::task::JoinError,
    >,
) {
    match reply {
        Ok(Ok(reply)) => {
            let at_once = reply.elapsed < held.hold + held.hold / 2;
            c.require(reply.status == held.request.status && at_once, || {
                format!(
                    "{what} answered {} after {:.0} ms: the keys share the limit (isolation)",
                    reply.status,
                    ms(reply.elapsed)
                )
            });
            c.evidence.push(format!(
                "{what}: {} after {:.0} ms",
                reply.status,
                ms(reply.elapsed)
            ));
        }
        Ok(Err(e)) => c.fail(format!("{what}: {e}")),
        Err(e) => c.fail(format!("{what}: task failed: {e}")),
    }
}

async fn t1(t: &Arc<Target>, c: &mut Ctx) {
    let contract = &t.expected;
    let (mut expected, mut observed) = (Vec::new(), Vec::new());
    for (name, spec) in &contract.pools {
        let queued = spec
            .queue
            .capacity
            .places()
            .map_or("every other one queued".to_owned(), |q| {
                format!("{q} queued, the rest refused")
            });
        let line = format!("{name}: {} at once, {queued}", spec.workers);
        let summary = match held(contract, name, spec) {
            Held::Hook(pool) => t1_pool(t, c, pool).await,
            Held::Request(held) => t1_held(t, c, (name, spec), &held).await,
            Held::Not(why) => {
                if !spec.routes.is_empty() {
                    c.evidence
                        .push(format!("pool `{name}` not judged: it {why}"));
                }
                continue;
            }
        };
        expected.push(line);
        observed.push(summary);
    }
    c.expected = expected.join("; ");
    c.observed = observed.join("; ");
}
