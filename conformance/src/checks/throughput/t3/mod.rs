//! T3: refusal at once, with a delay-seconds Retry-After that follows the p50 queue wait the
//! checker itself observed, at two clearly different levels, and a retry after the advertised
//! delay that is admitted.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, ErrorCode, MetricName, Pool};
use tokio::task::JoinHandle;

use crate::checks::ctx::{Ctx, ms, worst_and_median};
use crate::checks::pool::{
    Pending, TaskError, fail_many, give_up, hold_in, join_all, settle, sleep_until, spawn_in,
};
use crate::checks::registry::Check;
use crate::remote::{Reply, RequestError, Target};

mod export;
mod levels;
mod plan;
mod recipe;

use export::*;
use levels::*;
use plan::*;

/// T3's entry in the check registry: the evidence the docs print, and `t3`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::T3,
    "With every worker and queue place held, each further request gets {status:overloaded} \
     `overloaded` within the refusal tolerance (every one sent alone; the median of a crowd of \
     {refusals.overloaded.hint.window_samples} sent together, in waves that fit the connection cap beside the requests the \
     pools hold), with `{refusals.overloaded.hint.header}` as {refusals.overloaded.hint.format} between {refusals.overloaded.hint.min_seconds} and \
     the pool's timeout. The estimator is driven to two clearly different levels, each window of \
     {refusals.overloaded.hint.window_samples} samples mixing long and short waits (refusal sent to the first slot freed, \
     by the client's clock; a request admitted at once waits 0): first a p50 of about 2.4 s \
     with two fifths of the window admitted at once (so the mean, about 1.5 s, rounds lower), \
     then a p50 of about 0.5 s with nearly half the waits about 2.7 s (so the p90, the maximum \
     and the mean round higher). Where the pool's timeout caps {refusals.overloaded.hint.header} at 2 s (a \
     scaled deployment) the high level's p50 is about 1.25 s and its mean about 0.7 s. The \
     moments are timed on how long after its hold a held request's answer comes, measured \
     first; a high level whose holders answered so late that its mean would round like its \
     p50 is filled once more, before anything is read. A pool the checker sees full too late \
     for its own holds (a slow path, slow gauges) leaves no refusal to time: a skip says so. \
     The advertised delay must be the {refusals.overloaded.hint.estimator} of the waits the checker observed, \
     rounded up (within the jitter tolerance), so it moves with the load, no constant passes \
     and neither does another order statistic of the same window (when the values leave no \
     room to tell them apart, a skip says which). At each level a retry sent the advertised \
     seconds after the refusal is admitted (200); a retry that went out before the first of \
     the checker's own held requests was answered (their holds overran the time planned for \
     them, on a slow path or a crowded machine) is sent again once they all are, and that one \
     must be admitted. The export pool's estimator is driven the \
     same way when its timeout leaves room for the levels; else it is refused and its retry \
     admitted.",
    |t, c| Box::pin(t3(t, c)),
)
.covers(&["retry-after-estimator"])
.applies_when(applies);

/// T3 judges the reference pools' estimator, or any pool held by its slow recipe that refuses
/// when full.
fn applies(contract: &plimsoll_spec::Contract) -> Result<(), String> {
    let recipe_pool = contract.pools.iter().any(|(name, spec)| {
        matches!(
            crate::checks::pool::held(contract, name, spec),
            crate::checks::pool::Held::Request(_)
        ) && spec.refusal.is_some()
            && spec.queue.capacity.places().is_some()
    });
    if contract.is_reference() || recipe_pool {
        return Ok(());
    }
    Err(
        "no pool that refuses when full whose workers the checker can hold (a bounded queue, \
         a `refusal`, and a `hold` or the reference hook)"
            .into(),
    )
}

/// What a held request leaves before its deadline.
const DEADLINE_MARGIN: Duration = Duration::from_millis(250);
/// Time allowed to saturate the pool before the scripted refusals go out.
const FILL: Duration = Duration::from_millis(200);
/// What a probe must leave before the held slots free, beside its own round trip.
const PROBE_MARGIN: Duration = Duration::from_millis(50);
/// How long the checker waits, at most, for the gauges to show a saturation (pacing only: it
/// goes on as soon as they do).
const SETTLE: Duration = Duration::from_millis(1000);

/// Whole seconds, rounded up.
fn ceil_s(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Waits (pacing only) until `pool` has no busy worker, so a saturation counts right.
async fn idle(t: &Target, c: &mut Ctx, pool: Pool) {
    let baseline = if pool == Pool::Digitize {
        c.baseline_busy
    } else {
        0.0
    };
    if let Err(e) = t
        .wait_metric(MetricName::WorkersBusy, pool, t.stop_within() * 2, |v| {
            v <= baseline
        })
        .await
    {
        c.evidence
            .push(format!("{pool} not idle before saturating: {e}"));
    }
}

/// Every worker and queue place of a pool, held.
struct Saturation {
    sent: Instant,
    /// When the pool was seen full (its gauges polled across the network: under a latency
    /// fault that takes a few round trips).
    ready: Instant,
    /// Whether the gauges showed it full by then (else the wait for them was given up).
    seen: bool,
    hold: Duration,
    holders: Vec<Pending>,
    queued: Vec<Pending>,
}

/// Holds every worker for `hold` (from sending) and fills the queue with requests that run
/// briefly once they get a slot.
async fn saturate(t: &Arc<Target>, pool: Pool, hold: Duration) -> Saturation {
    let (workers, queue) = (t.workers(pool), t.queue_capacity(pool));
    let sent = Instant::now();
    let holders = (0..workers)
        .map(|_| spawn_in(t, pool, Some(hold_in(t, pool, hold))))
        .collect();
    settle(t, pool, workers, 0, SETTLE).await;
    let queued = (0..queue)
        .map(|_| spawn_in(t, pool, Some(hold_in(t, pool, Duration::from_millis(1)))))
        .collect();
    let seen = settle(t, pool, workers, queue, SETTLE).await;
    Saturation {
        sent,
        ready: Instant::now(),
        seen,
        hold,
        holders,
        queued,
    }
}

/// When the first slot of a saturation freed, as the client can bracket it: no earlier than the
/// holders' hold after the first was sent, no later than the first holder's answer. (On a
/// quiet machine the two are milliseconds apart; on a crowded one an answer can reach the
/// client late, and the truth is somewhere between.)
#[derive(Clone, Copy)]
struct Freed {
    earliest: Instant,
    latest: Instant,
}

impl Freed {
    /// The bracket of the first slot's freeing: no earlier than the holds' end (`earliest`), no
    /// later than the first of the holders' successful answers; None without one.
    fn first<'a>(earliest: Instant, holders: impl Iterator<Item = &'a Reply>) -> Option<Freed> {
        let latest = holders.filter(|r| r.ok()).map(Reply::answered).min()?;
        Some(Freed {
            earliest: earliest.min(latest),
            latest,
        })
    }
}

/// Puts a saturation's replies on the timeline; returns when the first slot freed and the
/// queued replies.
async fn finish(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    s: Saturation,
) -> (Option<Freed>, Vec<Reply>) {
    let holders = join_all(s.holders).await;
    for (i, r) in holders.iter().enumerate() {
        match r {
            Ok(reply) => c.reply(t, format!("{label}-held-{i}"), reply),
            Err(e) => c.fail(format!("{label}-held-{i}: {e}")),
        }
    }
    let freed = Freed::first(
        s.sent + s.hold,
        holders.iter().filter_map(|r| r.as_ref().ok()),
    );
    let mut queued = Vec::new();
    for (i, r) in join_all(s.queued).await.into_iter().enumerate() {
        match r {
            Ok(reply) => {
                c.reply(t, format!("{label}-queued-{i}"), &reply);
                queued.push(reply);
            }
            Err(e) => c.fail(format!("{label}-queued-{i}: {e}")),
        }
    }
    (freed, queued)
}

impl Saturation {
    /// Why no refusal can be timed into this saturation, if so: the checker saw the pool full
    /// less than `PROBE_MARGIN` before the holds end (counted from sending: a holder and a
    /// refusal cross the same path), too late for a refusal to reach it still full. (The
    /// gauges answered too slowly: a fault on the path, a slow or wrong `/metrics`.) A
    /// refusal's 200 would then say nothing of the target.
    fn too_late(&self, pool: Pool) -> Option<String> {
        if self.ready + PROBE_MARGIN < self.sent + self.hold {
            return None;
        }
        let how = if self.seen {
            "seen full"
        } else {
            "not seen full by its gauges, given up on"
        };
        Some(format!(
            "the {pool} pool was {how} {:.0} ms after the checker's holders went out, too late for their {:.0} ms hold: no refusal could be timed to reach it full (a slow path, slow gauges)",
            ms(self.ready - self.sent),
            ms(self.hold)
        ))
    }
}

/// `s`, unless it is [`Saturation::too_late`]: then the check is skipped, saying why, and the
/// replies go on the timeline.
async fn full_in_time(
    t: &Target,
    c: &mut Ctx,
    (pool, label): (Pool, &str),
    s: Saturation,
) -> Option<Saturation> {
    let Some(why) = s.too_late(pool) else {
        return Some(s);
    };
    c.skip(why);
    finish(t, c, label, s).await;
    None
}

/// Checks one refusal; returns its Retry-After seconds when well-formed.
fn judge_refusal(t: &Target, c: &mut Ctx, pool: Pool, label: &str, reply: &Reply) -> Option<u64> {
    c.reply(t, label, reply);
    let t3 = t.expected.retry_after();
    let header = &t3.header;
    let max_s = t.max_retry_after_s(pool);
    if !c.require_error(t, label, reply, ErrorCode::Overloaded) {
        return None;
    }
    let Some(raw) = reply.header(header) else {
        c.fail(format!("{label}: no {header} header"));
        return None;
    };
    match t3.format.parse(raw) {
        Some(n) if (t3.min_seconds..=max_s).contains(&n) => Some(n),
        Some(n) => {
            c.fail(format!(
                "{label}: {header} {n} outside {}..={max_s}",
                t3.min_seconds
            ));
            None
        }
        None => {
            c.fail(format!("{label}: {header} `{raw}` is not {}", t3.format));
            None
        }
    }
}

/// Sends up to the trials' number of requests that should be refused, one at a time, and
/// judges each (the refusal latency is judged on these: one request at a time, nothing of the
/// checker's own crowding in the way). Each must reach the server while the pool is still
/// full, so one more is sent only while it fits before `frees` (the held slots' release), by
/// the slowest round trip so far and a margin: on a slow path (a latency fault) fewer fit, and
/// the evidence says how many. Returns when the first was sent and the delay it advertised,
/// and when each refused one was sent (each adds a wait to the window).
async fn probe(
    t: &Arc<Target>,
    c: &mut Ctx,
    (pool, frees): (Pool, Instant),
    label: &str,
    latencies: &mut Vec<f64>,
) -> (Option<(Instant, u64)>, Vec<Instant>) {
    let mut first = None;
    let mut refused = Vec::new();
    let mut slowest = Duration::ZERO;
    let trials = t.trials.max(1);
    for i in 0..trials {
        if i > 0 && Instant::now() + slowest + PROBE_MARGIN > frees {
            c.evidence.push(format!(
                "{label}: {i} of {trials} probes fit before the held slots free (the slowest took {:.0} ms)",
                ms(slowest)
            ));
            break;
        }
        let name = if i == 0 {
            label.to_owned()
        } else {
            format!("{label}-{i}")
        };
        match t.send_pool(pool, None, give_up(t, pool)).await {
            Ok(reply) => {
                slowest = slowest.max(reply.elapsed);
                latencies.push(ms(reply.elapsed));
                let n = judge_refusal(t, c, pool, &name, &reply);
                if t.is_error(&reply, ErrorCode::Overloaded) {
                    refused.push(reply.sent);
                }
                if i == 0 {
                    first = n.map(|n| (reply.sent, n));
                }
            }
            Err(e) => c.fail(format!("{name}: {e}")),
        }
    }
    (first, refused)
}

/// A retry sent `n` seconds after `refused_at` (the refusal that advertised `n`), on its own
/// task so the pool stays as it was meanwhile: the advertised delay is honest only if it is
/// admitted.
struct Retry {
    n: u64,
    task: Pending,
}

fn spawn_retry(t: &Arc<Target>, pool: Pool, refused_at: Instant, n: u64) -> Retry {
    let t = t.clone();
    let task = tokio::spawn(async move {
        sleep_until(refused_at + Duration::from_secs(n)).await;
        Ok(t.send_pool(pool, None, give_up(&t, pool)).await?)
    });
    Retry { n, task }
}

/// Waits for a retry and requires it to have been admitted (200). The advertised delay is honest
/// only if a slot is free by then; but the slots were the checker's own holders', and a retry sent
/// before the first of them was answered (`freed.latest`) and refused may have reached a pool they
/// still filled: their holds overran what the check planned for them (a slow path, a crowded
/// machine: once, under the slicer, 1.3 s against the 0.85 s planned). A refusal then says nothing
/// of the delay, so the retry goes again, once every holder has been answered, and that one must
/// be admitted; the evidence says so. A retry sent after that answer, when a slot had surely
/// freed, must be admitted itself.
async fn judge_retry(
    t: &Target,
    c: &mut Ctx,
    (pool, label): (Pool, &str),
    retry: Option<Retry>,
    freed: Option<Freed>,
) -> String {
    let Some(Retry { n, task }) = retry else {
        return "no retry".into();
    };
    let reply = match task.await.unwrap_or_else(|e| Err(TaskError::Join(e))) {
        Ok(reply) => reply,
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            return "retry failed".into();
        }
    };
    c.reply(t, label, &reply);
    // Only a refusal can be the full pool's doing: any other answer is judged as it is.
    let refused = t.is_error(&reply, ErrorCode::Overloaded);
    let early = freed.filter(|f| refused && reply.sent < f.latest);
    let Some(freed) = early else {
        require_admitted(t, c, label, &reply, || {
            format!("a retry {n} s after the refusal")
        });
        return format!("retry after {n} s: {}", reply.status);
    };
    let again_label = format!("{label}-again");
    match t.send_pool(pool, None, give_up(t, pool)).await {
        Ok(again) => {
            c.reply(t, &again_label, &again);
            c.evidence.push(format!(
                "{label}: the retry {n} s after the refusal went out {:.0} ms before the first \
                 of the checker's holders was answered (their holds overran), and was refused: \
                 sent again once they were, {}",
                ms(freed.latest - reply.sent),
                again.status
            ));
            require_admitted(t, c, &again_label, &again, || {
                format!(
                    "a retry sent again once the checker's holders were answered ({n} s advertised)"
                )
            });
            format!(
                "retry after {n} s: {}, again after the holders: {}",
                reply.status, again.status
            )
        }
        Err(e) => {
            c.fail(format!("{again_label}: {e}"));
            "retry failed".into()
        }
    }
}

/// Requires `reply` to a retry (`what`) to have been admitted.
fn require_admitted(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    reply: &Reply,
    what: impl FnOnce() -> String,
) {
    let header = &t.expected.retry_after().header;
    c.require(reply.ok(), || {
        format!(
            "{label}: {} (its {header}) answered {} {}",
            what(),
            reply.status,
            reply.code()
        )
    });
}

async fn t3(t: &Arc<Target>, c: &mut Ctx) {
    if !t.expected.is_reference() {
        recipe::t3_recipes(t, c).await;
        return;
    }
    c.expected = expected(t);
    let mut samples = Samples::default();
    // The export design comes from a digitize: fetched now, not in the middle of a saturation.
    let design = t.design().await.map_err(|e| c.fail(e.to_string())).is_ok();
    // The digitize pool is timed before the export pool's lone part starts beside its levels:
    // the export jobs' own work would slow the calibration's.
    let timing = if judgeable(t, Pool::Digitize) {
        Some(calibrate(t, c, Pool::Digitize).await)
    } else {
        None
    };
    let export = start_export(t, c, design);
    let mut levels = Vec::new();
    match timing {
        Some(timing) => {
            levels.push(drive_levels(t, c, (Pool::Digitize, timing), &mut samples).await);
        }
        None => refusal_only(t, c, &mut samples.latencies).await,
    }
    let export_note = match export {
        ExportPart::Levels => {
            let timing = calibrate(t, c, Pool::Export).await;
            levels.push(drive_levels(t, c, (Pool::Export, timing), &mut samples).await);
            "export: levels as above".to_owned()
        }
        ExportPart::Alone(task) => finish_export(t, c, task, &mut samples.latencies).await,
        ExportPart::NoDesign => "export: no design".into(),
    };
    // A saturation that freed no slot has recorded its failure, one not seen full in time its skip.
    let Some(levels) = levels.into_iter().collect::<Option<Vec<Levels>>>() else {
        return;
    };
    let figures = samples.judge(t, c);
    c.trials_ms = samples.latencies.clone();
    for &latency in &samples.latencies {
        c.sample("refusal latency", latency);
    }
    for level in &levels {
        level.judge(t, c);
    }
    c.observed = observed(t, &samples, &figures, &levels, &export_note);
}

/// What T3 expects, in words.
fn expected(t: &Target) -> String {
    let tol = &t.expected.tolerances;
    let t3 = t.expected.retry_after();
    let header = &t3.header;
    format!(
        "{} {} within {}, {header}: {} in range, the ceiling of the observed {} queue wait (±{} ms) at two levels, apart from the window's mean, p90 and max; a retry after it is admitted",
        t.status(ErrorCode::Overloaded),
        ErrorCode::Overloaded,
        t.adjustments
            .words(plimsoll_fault::Bound::RefusalLatency, &t.expected),
        t3.format,
        t3.estimator,
        tol.retry_after_jitter_ms,
    )
}

/// The refusal latencies, ms: one at a time (judged on the worst) and in the scripted crowds
/// of a window's worth sent at once (judged on the median: the last of a crowd also waits
/// behind the checker's own requests).
#[derive(Default)]
struct Samples {
    latencies: Vec<f64>,
    crowded: Vec<f64>,
}

/// The samples summed up: worst and median one at a time, and in crowds.
struct Figures {
    worst: f64,
    median: f64,
    crowd_worst: f64,
    crowd_median: f64,
}

impl Samples {
    /// Requires the slowest refusal sent alone, and the median one in a crowd, within the
    /// refusal tolerance.
    fn judge(&self, t: &Target, c: &mut Ctx) -> Figures {
        let bound = t.bound(plimsoll_fault::Bound::RefusalLatency).as_millis() as u64;
        let (worst, median) = worst_and_median(&self.latencies);
        c.require(worst <= bound as f64, || {
            format!("slowest refusal took {worst:.1} ms > {bound} ms")
        });
        let (crowd_worst, crowd_median) = worst_and_median(&self.crowded);
        if !self.crowded.is_empty() {
            c.require(crowd_median <= bound as f64, || {
                format!(
                    "refusals sent {} at once took {crowd_median:.1} ms at the median > {bound} ms",
                    t.expected.retry_after().window_samples
                )
            });
        }
        Figures {
            worst,
            median,
            crowd_worst,
            crowd_median,
        }
    }
}

/// The export pool's part: its own levels after the digitize pool's, when its values let them
/// be shown; else a refusal and its retry on a task of their own beside the digitize levels.
enum ExportPart {
    Levels,
    Alone(JoinHandle<ExportRun>),
    NoDesign,
}

/// Starts the export pool's part once the design is fetched (`design`: a failure is recorded
/// without one).
fn start_export(t: &Arc<Target>, c: &mut Ctx, design: bool) -> ExportPart {
    if !design {
        return ExportPart::NoDesign;
    }
    if judgeable(t, Pool::Export) {
        return ExportPart::Levels;
    }
    let header = &t.expected.retry_after().header;
    let (max_s, min_s) = (
        t.max_retry_after_s(Pool::Export),
        t.expected.retry_after().min_seconds,
    );
    let deadline = t.deadline(Pool::Export).as_millis();
    if max_s <= min_s {
        c.evidence.push(format!(
            "export estimator not applicable: the {deadline} ms export timeout caps {header} at {max_s} s, what every order statistic of the window rounds to"
        ));
    } else {
        c.skip(format!(
            "cannot judge the export estimator: the {deadline} ms export timeout leaves no room for the {} s level",
            Plan::Two.high_wait(Duration::ZERO).as_secs_f64()
        ));
    }
    ExportPart::Alone(tokio::spawn(export_run(t.clone())))
}

/// Waits for the export pool's lone refusal and judges it; its note for the observation.
async fn finish_export(
    t: &Target,
    c: &mut Ctx,
    task: JoinHandle<ExportRun>,
    latencies: &mut Vec<f64>,
) -> String {
    match task.await {
        Ok(run) => judge_export(t, c, run, latencies).await,
        Err(e) => {
            c.fail(format!("export: {e}"));
            "export: failed".into()
        }
    }
}

/// Whether the two levels can be shown in `pool` (see [`Plan::for_pool`]).
fn judgeable(t: &Target, pool: Pool) -> bool {
    Plan::for_pool(t, pool).is_some()
}

/// A request's label in `pool`: the digitize pool's bare, the export pool's prefixed.
fn tag(pool: Pool, name: &str) -> String {
    match pool {
        Pool::Digitize => name.to_owned(),
        _ => format!("{pool}-{name}"),
    }
}

/// The two levels the estimator of a pool was driven to, each with the delay it advertised
/// there.
struct Levels {
    pool: Pool,
    lo: Expectation,
    hi: Expectation,
}

impl Levels {
    /// The advertised delay must move between two levels whose accepted delays differ; when
    /// this load made them round alike the estimator cannot be judged (a skip).
    fn judge(&self, t: &Target, c: &mut Ctx) {
        let t3 = t.expected.retry_after();
        let header = &t3.header;
        let Levels { pool, lo, hi } = self;
        let untold = untold(&[lo, hi]);
        if lo.accepted.end() >= hi.accepted.start() {
            c.skip(format!(
                "cannot judge the {pool} estimator: the two levels' waits ({}, {}) round alike under this load",
                lo.p50_text(),
                hi.p50_text()
            ));
        } else if !untold.is_empty() {
            c.skip(format!(
                "cannot tell the {pool} pool's {} from the {} of the same window under this load (low level: {}; high level: {})",
                t3.estimator,
                untold.join(", "),
                lo.alternatives_text(),
                hi.alternatives_text()
            ));
        }
        if let (Some(x), Some(y)) = (lo.advertised, hi.advertised) {
            c.require(x != y, || {
                format!(
                    "{pool}: {header} stayed {x} s while the queue wait moved from {} to {}",
                    lo.p50_text(),
                    hi.p50_text()
                )
            });
        }
    }
}

/// Drives `pool`'s estimator to the high level, reads it while filling the window for the low
/// level, then reads the low level; each reading is retried after its advertised delay. Every
/// moment is timed on the pool's `timing`, calibrated first. None when a saturation freed no
/// slot (a failure is recorded) or was not seen full in time (a skip).
///
/// The high level is where the mean is told from the p50, and how far apart they sit depends
/// on the overhead of the very saturation that fills it (the mean is read on the late clock):
/// one that overran the calibrated overhead can leave the mean rounding like the p50 (once in
/// CI: 350 ms against 140 calibrated, mean 0.86 s → 1..=2 s). Nothing has been read yet, so the
/// window is filled once more, timed on that overhead; the second filling replaces the first
/// in the window (it adds a window's worth and more).
async fn drive_levels(
    t: &Arc<Target>,
    c: &mut Ctx,
    (pool, mut timing): (Pool, Timing),
    samples: &mut Samples,
) -> Option<Levels> {
    let plan = Plan::for_pool(t, pool)?;
    let mut hi = fill_high(t, c, (pool, plan), &mut timing, &mut samples.crowded).await?;
    if !hi.tells_apart(Other::Mean) {
        c.evidence.push(format!(
            "{pool} high level filled again: the first filling's window would leave its mean ({}) rounding like its p50 ({}), the holders answered {:.0} ms after their hold",
            hi.alternative_text(Other::Mean),
            hi.p50_text(),
            ms(timing.overhead)
        ));
        hi = fill_high(t, c, (pool, plan), &mut timing, &mut samples.crowded).await?;
    }
    let w = timing.overhead;
    let mut lo = read_high_fill_low(t, c, (pool, samples), w, &mut hi).await?;
    read_low(t, c, (pool, w), &mut samples.latencies, &mut lo).await?;
    Some(Levels { pool, lo, hi })
}

/// High level: saturate; once the pool is full the long waits of the window go out, timed to
/// wait the plan's high wait until the holds end; once the pool is idle again, requests
/// admitted at once add waits of 0: fewer than half the window, so the p50 is long and the mean
/// short. Updates the overhead with this saturation's.
async fn fill_high(
    t: &Arc<Target>,
    c: &mut Ctx,
    (pool, plan): (Pool, Plan),
    timing: &mut Timing,
    crowded: &mut Vec<f64>,
) -> Option<Expectation> {
    let window = t.expected.retry_after().window_samples as usize;
    let (workers, queue) = (t.workers(pool), t.queue_capacity(pool));
    let long = plan.long(window);
    // The reading saturation's holders are admitted at once too.
    let at_once = window.saturating_sub(long + workers);
    idle(t, c, pool).await;
    let s = saturate(t, pool, fill_hold(t, pool, plan, *timing)).await;
    let s = full_in_time(t, c, (pool, &tag(pool, "high-fill")), s).await?;
    let refusals = (long + SPARE).saturating_sub(queue).max(1);
    let label = tag(pool, "high-long");
    let at = (s.sent + s.hold)
        .checked_sub(plan.high_wait(timing.overhead))
        .map_or(s.ready, |at| at.max(s.ready));
    let refused = fire(t, c, (pool, refusals), (&label, at), crowded).await;
    let (freed, queued) = finish(t, c, &tag(pool, "high-fill"), s).await;
    let Some(freed) = freed else {
        c.fail(format!("{pool} high level: no held request finished"));
        return None;
    };
    // The overhead of this saturation, the latest like the ones to come, times them.
    timing.overhead = (freed.latest - freed.earliest).min(MAX_OVERHEAD);
    admit_at_once(t, c, pool, at_once).await;
    let zeros = at_once + workers;
    Some(expectation(t, pool, (&refused, &queued), freed, zeros))
}

/// Sends `count` requests into the idle `pool`, a worker's worth at a time, each wave once the
/// last one is answered: every worker is free, so each is admitted at once and adds a wait of 0
/// to the window.
async fn admit_at_once(t: &Arc<Target>, c: &mut Ctx, pool: Pool, count: usize) {
    let label = tag(pool, "at-once");
    let mut i = 0;
    for wave in waves(count, t.workers(pool)) {
        let tasks: Vec<_> = (0..wave).map(|_| spawn_in(t, pool, None)).collect();
        for r in join_all(tasks).await {
            let name = format!("{label}-{i}");
            i += 1;
            match r {
                Ok(reply) => {
                    c.reply(t, &name, &reply);
                    c.require(reply.ok(), || {
                        format!(
                            "{name}: sent to the {pool} pool with every worker free, answered {} {}",
                            reply.status,
                            reply.code()
                        )
                    });
                }
                Err(e) => c.fail(format!("{name}: {e}")),
            }
        }
    }
}

/// Reads the high level with the pool saturated again and retries after it; meanwhile fills
/// the window for the low level: long waits at once, then, `LOW_WAIT` before those holders free
/// their slots, just over half of the window short. Returns the low level's expectation.
async fn read_high_fill_low(
    t: &Arc<Target>,
    c: &mut Ctx,
    (pool, samples): (Pool, &mut Samples),
    w: Duration,
    hi: &mut Expectation,
) -> Option<Expectation> {
    let window = t.expected.retry_after().window_samples as usize;
    let queue = t.queue_capacity(pool);
    idle(t, c, pool).await;
    let s = saturate(t, pool, read_hold(t, pool, *hi.accepted.start(), w)).await;
    let s = full_in_time(t, c, (pool, &tag(pool, "high-read")), s).await?;
    // When the first slot frees, by the calibrated overhead.
    let frees = s.sent + s.hold + w;
    // Admitted at once after these refusals: the holders of the low level's reading, and the
    // high retry when there is one (a probe is refused).
    let zeros = t.workers(pool) + 1;
    let short = (window.div_ceil(2) + RANK_MARGIN).saturating_sub(zeros);
    let long = window.saturating_sub(short + zeros + queue) + SPARE;
    // The long waits first, as long as they can be: their waits wait for a slot to free, so the
    // window the probes read is still the high level's.
    let at = (&*tag(pool, "low-long"), Instant::now());
    let mut refused = fire(t, c, (pool, long), at, &mut samples.crowded).await;
    let label = tag(pool, "high-probe");
    let (probe_hi, probed) = probe(
        t,
        c,
        (pool, s.sent + s.hold),
        &label,
        &mut samples.latencies,
    )
    .await;
    refused.extend(probed);
    let at = (
        &*tag(pool, "low-short"),
        (frees - LOW_WAIT).max(Instant::now()),
    );
    refused.extend(fire(t, c, (pool, short), at, &mut samples.crowded).await);
    refused.sort();
    let zeros = t.workers(pool) + usize::from(probe_hi.is_some());
    let retry_hi = probe_hi.map(|(at, n)| spawn_retry(t, pool, at, n));
    let (freed, queued) = finish(t, c, &tag(pool, "high-read"), s).await;
    judge_level(t, c, &label, hi, probe_hi);
    let retried = judge_retry(t, c, (pool, &tag(pool, "high-retry")), retry_hi, freed).await;
    c.evidence.push(level_evidence(pool, "high", hi, &retried));
    let Some(freed) = freed else {
        c.fail(format!("{pool} low level: no held request finished"));
        return None;
    };
    Some(expectation(t, pool, (&refused, &queued), freed, zeros))
}

/// Reads the low level and retries after it; None when the pool was not seen full in time.
async fn read_low(
    t: &Arc<Target>,
    c: &mut Ctx,
    (pool, w): (Pool, Duration),
    latencies: &mut Vec<f64>,
    lo: &mut Expectation,
) -> Option<()> {
    idle(t, c, pool).await;
    let s = saturate(t, pool, read_hold(t, pool, *lo.accepted.start(), w)).await;
    let s = full_in_time(t, c, (pool, &tag(pool, "low-read")), s).await?;
    let label = tag(pool, "low-probe");
    let (probe_lo, _) = probe(t, c, (pool, s.sent + s.hold), &label, latencies).await;
    judge_level(t, c, &label, lo, probe_lo);
    let retry_lo = probe_lo.map(|(at, n)| spawn_retry(t, pool, at, n));
    let (freed, _) = finish(t, c, &tag(pool, "low-read"), s).await;
    let retried = judge_retry(t, c, (pool, &tag(pool, "low-retry")), retry_lo, freed).await;
    c.evidence.push(level_evidence(pool, "low", lo, &retried));
    Some(())
}

/// A level's evidence: its refusals, the wait the checker observed and the delays it accepts,
/// what was advertised, and how the retry fared.
fn level_evidence(pool: Pool, name: &str, e: &Expectation, retried: &str) -> String {
    format!(
        "{pool} {name} level: {} refusals, observed p50 {} → accepts {}..={} s (the same window's {}); advertised {}; {retried}",
        e.refusals,
        e.p50_text(),
        e.accepted.start(),
        e.accepted.end(),
        e.alternatives_text(),
        e.advertised
            .map_or("nothing valid".into(), |n| format!("{n} s"))
    )
}

/// When the estimator cannot be judged (the timeout caps Retry-After or the holds below the
/// high level), the refusal itself still is.
async fn refusal_only(t: &Arc<Target>, c: &mut Ctx, latencies: &mut Vec<f64>) {
    let pool = Pool::Digitize;
    let header = &t.expected.retry_after().header;
    c.skip(format!(
        "cannot judge the estimator: the {} ms digitize timeout caps {header} below 2 s or the holds below the {} s level",
        t.deadline(pool).as_millis(),
        Plan::Two.high_wait(Duration::ZERO).as_secs_f64()
    ));
    // Still judge the refusal itself.
    idle(t, c, pool).await;
    let s = saturate(t, pool, Duration::from_millis(300)).await;
    probe(t, c, (pool, s.sent + s.hold), "probe", latencies).await;
    finish(t, c, "probe", s).await;
}

/// T3's observation in one line: the refusal latencies, the delays advertised at each level,
/// and the export pool's note.
fn observed(
    t: &Target,
    samples: &Samples,
    figures: &Figures,
    levels: &[Levels],
    export_note: &str,
) -> String {
    let header = &t.expected.retry_after().header;
    let Figures {
        worst,
        median,
        crowd_worst,
        crowd_median,
    } = figures;
    let shown: Vec<String> = levels
        .iter()
        .flat_map(|l| [(l.pool, &l.lo), (l.pool, &l.hi)])
        .map(|(pool, l)| {
            format!(
                "{pool} {} s at p50 {}",
                l.advertised.map_or("–".to_owned(), |n| n.to_string()),
                l.p50_text()
            )
        })
        .collect();
    format!(
        "{} refusals one at a time: worst {worst:.1} ms, median {median:.1} ms; {} in crowds: median {crowd_median:.1} ms, worst {crowd_worst:.1} ms; {header} {}; {export_note}",
        samples.latencies.len(),
        samples.crowded.len(),
        shown.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_round_up_to_whole_seconds() {
        let ms = Duration::from_millis;
        assert_eq!(ceil_s(ms(1000)), 1);
        assert_eq!(ceil_s(ms(1001)), 2);
        assert_eq!(ceil_s(Duration::ZERO), 0);
    }
}
