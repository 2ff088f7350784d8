//! B1: the contract's timeout status at the deadline (counted from admission, queue time
//! included), naming the stage, with the slot back and the temp files gone; and a stalled
//! upload answered by its own read timeout without ever holding a worker slot. For any
//! contract, each pool's declared deadline and its answer ([`super::deadline`]), and its
//! upload's read timeout ([`super::stalled_body`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use plimsoll_spec::{ClauseId, Contract, ErrorCode, MetricName, Pool, Stage};
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};

use crate::checks::ctx::{Ctx, ms, worst_and_median};
use crate::checks::pool::{
    Pending, TaskError, capacity_recovered, counter, hold, hold_in, join_all, rose, settle,
    spawn_in,
};
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::{Op, Reply, Target};

/// B1's entry in the check registry: the evidence the docs print, and `b1`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::B1,
    "Requests held at a middle stage past the digitize deadline, and an export held past its \
     own ({pools.digitize.deadline_ms} and {pools.export.deadline_ms} ms): each gets {status:timeout} \
     `timeout` no earlier than the deadline and no later than the tolerance after it, naming \
     the held stage as `failed_stage` and exactly the stages before it as `completed_stages`. \
     Queue time counts: with every worker held for half the deadline, a request that waits and \
     then holds a middle stage is answered {status:timeout} the deadline after it was sent, not \
     after it started. An upload that stalls halfway gets {status:upload_timeout} \
     `upload_timeout` within {upload.read_timeout_ms} ms plus the tolerance, and while it \
     stalls every worker admits a held request at once (it holds no slot). Timeouts are not \
     counted as cancellations; afterwards no temp file remains, every worker runs a held \
     request at once and every queue place admits one that waits (no place lost). Under a \
     fault that trickles the request's bytes (`--fault trickle`, a bandwidth limit), an upload \
     that cannot arrive within 1.5 times the upload read timeout must still get \
     {status:upload_timeout} at the bound: the timer is a total one, not restarted by every read. \
     For any contract, each pool with a `deadline_ms`, its `deadline_answer` and a hold that can \
     outlast it (its hook, or a dependency the checker plays): one request held half a second \
     past the deadline and its tolerance must get the declared answer no earlier than the \
     deadline and no later than the tolerance after it, and the pool's request must then be \
     served (and, for a pool held by a dependency, as many requests as it has workers, sent at \
     once, must all call the dependency together within two seconds and be served). Where its `[upload]` declares a read timeout, a body of its request that stops \
     after a prefix must be ended as declared (its `read_timeout_answer`, or the connection \
     closed unanswered) no earlier than the timeout and no later than the tolerance after it, \
     and the request sent whole must then be served.",
    |t, c| Box::pin(b1(t, c)),
)
.applies_when(applies)
.covers(&[
    "slot-lifetime",
    "hook-hold",
    "failure-cleanup",
    "upload-read",
    "deadline-stage",
]);

/// Where a timeout trial is held: at `stages[held]` of `pool`, past the pool's `deadline`. The
/// answer must then be the timeout on time, naming that stage and exactly the ones before it,
/// so the hold and the judgement are built from the same values.
struct HeldPastDeadline {
    pool: Pool,
    stages: Vec<Stage>,
    held: usize,
    deadline: Duration,
}

impl HeldPastDeadline {
    /// Held at `stages[held]` of `pool`.
    fn at(t: &Target, pool: Pool, held: usize) -> HeldPastDeadline {
        HeldPastDeadline {
            pool,
            stages: t.stages(pool).to_vec(),
            held,
            deadline: t.deadline(pool),
        }
    }

    /// Held at a stage in the middle of `pool`: some completed, some not.
    fn in_the_middle(t: &Target, pool: Pool) -> HeldPastDeadline {
        HeldPastDeadline::at(t, pool, t.stages(pool).len() / 2)
    }

    /// The hook holding the stage ten seconds past the deadline: only the deadline ends it.
    fn hook(&self) -> String {
        hold(
            self.stages[self.held],
            (self.deadline + Duration::from_secs(10)).as_millis() as u64,
        )
    }

    /// Judges one trial's `answer`, recording its time in `elapsed` when there is one.
    fn judge(
        &self,
        t: &Target,
        c: &mut Ctx,
        label: &str,
        answer: Result<Reply, TaskError>,
        elapsed: &mut Vec<f64>,
    ) {
        match answer {
            Ok(reply) => {
                elapsed.push(ms(reply.elapsed));
                self.judge_reply(t, c, label, &reply);
            }
            Err(e) => c.fail(format!("{label}: no answer: {e}")),
        }
    }

    /// Requires `reply` to be the timeout answer the deadline after it was sent (within the
    /// tolerance), naming the held stage.
    fn judge_reply(&self, t: &Target, c: &mut Ctx, label: &str, reply: &Reply) {
        c.reply(t, label, reply);
        let late = t.bound(plimsoll_fault::Bound::TimeoutLate).as_millis() as u64;
        let elapsed = ms(reply.elapsed);
        let deadline_ms = ms(self.deadline);
        c.sample("504 lateness", elapsed - deadline_ms);
        c.require(t.is_error(reply, ErrorCode::Timeout), || {
            format!(
                "{label}: expected {} {} after {deadline_ms:.0} ms, got {} {} after {elapsed:.0} ms",
                t.status(ErrorCode::Timeout),
                ErrorCode::Timeout,
                reply.status,
                reply.json()["code"]
            )
        });
        c.require(elapsed >= deadline_ms, || {
            format!("{label}: answered {elapsed:.0} ms after it was sent, before the {deadline_ms:.0} ms deadline")
        });
        c.require(elapsed <= deadline_ms + late as f64, || {
            format!("{label}: answered {elapsed:.0} ms after it was sent, more than {late} ms after the {deadline_ms:.0} ms deadline")
        });
        c.require_stages(label, &reply.json(), &self.stages, self.held);
    }
}

/// The export trial, sent before the digitize batches and judged after them, so its long
/// deadline runs alongside theirs.
struct ExportTrial {
    held: HeldPastDeadline,
    task: Pending,
}

/// Sends the export trial, held at its second stage (or its only one), once there is a design
/// to export.
async fn export_trial(t: &Arc<Target>, c: &mut Ctx) -> Option<ExportTrial> {
    match t.design().await {
        Ok(_) => {
            let stage = 1.min(t.stages(Pool::Export).len() - 1);
            let held = HeldPastDeadline::at(t, Pool::Export, stage);
            let task = spawn_in(t, Pool::Export, Some(held.hook()));
            Some(ExportTrial { held, task })
        }
        Err(e) => {
            c.fail(format!("export deadline: {e}"));
            None
        }
    }
}

/// Requests held past the deadline of both pools, the digitize ones in batches of at most
/// the workers; each must time out on time, and the busy gauge must drop within the bound.
async fn past_the_deadline(t: &Arc<Target>, c: &mut Ctx, count: usize, elapsed: &mut Vec<f64>) {
    let stop = t.stop_within();
    let export = export_trial(t, c).await;
    let digitize = HeldPastDeadline::in_the_middle(t, Pool::Digitize);
    let pool = digitize.pool;
    let hook = digitize.hook();
    let mut remaining = count;
    let mut trial = 0;
    while remaining > 0 {
        let batch = remaining.min(t.workers(pool));
        let tasks: Vec<_> = (0..batch)
            .map(|_| spawn_in(t, pool, Some(hook.clone())))
            .collect();
        for r in join_all(tasks).await {
            digitize.judge(t, c, &format!("trial-{trial}"), r, elapsed);
            trial += 1;
        }
        remaining -= batch;
        released_after_timeouts(t, c, pool, stop).await;
        // The export trial, while still held, may keep its temp files: they are judged once
        // nothing is in flight (its deadline can outlast a batch's, or its upload arrive late).
        if export.as_ref().is_none_or(|e| e.task.is_finished()) {
            no_temp_left(t, c);
        }
    }
    if let Some(ExportTrial { held, task }) = export {
        let answer = task.await.unwrap_or_else(|e| Err(TaskError::Join(e)));
        held.judge(t, c, "export", answer, elapsed);
        no_temp_left(t, c);
    }
}

/// After a batch of timeouts: the busy gauge agrees the slots came back within `stop` (a
/// cross-check).
async fn released_after_timeouts(t: &Target, c: &mut Ctx, pool: Pool, stop: Duration) {
    match t
        .wait_metric(MetricName::WorkersBusy, pool, stop, |v| {
            v <= c.baseline_busy
        })
        .await
    {
        Ok(took) => c.evidence.push(format!(
            "busy gauge back {:.0} ms after the timeouts",
            ms(took)
        )),
        Err(e) => c.fail(format!(
            "slot not released within {} ms of the deadline: {e}",
            stop.as_millis()
        )),
    }
}

/// After timeouts, with nothing in flight: no temp file remains.
fn no_temp_left(t: &Target, c: &mut Ctx) {
    if let Some(entries) = c.temp_left(t) {
        c.require(entries.is_empty(), || {
            format!("temp files left after the timeout: {entries:?}")
        });
    }
}

/// A digitize request whose body stops halfway and stays stalled until `stall_for` passed.
fn stalled_upload(t: &Target, stall_for: Duration) -> reqwest::RequestBuilder {
    let api = &t.expected.api().digitize;
    let half = t.image[..t.image.len() / 2].to_vec();
    let body = futures_util::stream::iter([Ok::<_, std::io::Error>(half)]).chain(
        futures_util::stream::once(async move {
            tokio::time::sleep(stall_for).await;
            Err(std::io::Error::other(
                "the checker's stalled upload gave up",
            ))
        }),
    );
    t.client
        .post(t.url(&api.path))
        .header(CONTENT_TYPE, api.content_types[0].as_str())
        .header(CONTENT_LENGTH, t.image.len())
        .body(reqwest::Body::wrap_stream(body))
        .timeout(stall_for)
}

/// The queue-time and stalled-upload trial's durations, fixed before anything is sent.
struct StallPlan {
    /// The request sent behind the holders: it waits, then holds a middle digitize stage.
    queued: HeldPastDeadline,
    workers: usize,
    /// The timeout tolerance.
    late: Duration,
    /// The upload read timeout.
    upload: Duration,
    /// How long every worker is held while the upload stalls.
    hold_for: Duration,
}

impl StallPlan {
    fn new(t: &Target) -> StallPlan {
        let pool = Pool::Digitize;
        let late = t.bound(plimsoll_fault::Bound::TimeoutLate);
        let upload = Duration::from_millis(t.expected.upload().read_timeout_ms);
        let deadline = t.deadline(pool);
        StallPlan {
            queued: HeldPastDeadline::in_the_middle(t, pool),
            workers: t.workers(pool),
            late,
            upload,
            // Long enough that a server counting from the worker's start is late by far more
            // than the tolerance, and no longer than half the deadline.
            hold_for: (deadline / 2).min(upload.max(late * 2 + Duration::from_millis(100))),
        }
    }
}

/// What is in flight once the upload stalls and every worker is held.
struct InFlight {
    stall: Pending,
    holders_sent: Instant,
    holders: Vec<Pending>,
    /// The request waiting behind the holders; none without queue places.
    queued: Option<Pending>,
}

/// Stalls an upload, then holds every worker and sends one request to wait behind them.
async fn stall_and_hold(t: &Arc<Target>, plan: &StallPlan) -> InFlight {
    let pool = plan.queued.pool;
    let stall = {
        let t = t.clone();
        let request = stalled_upload(&t, plan.upload + plan.late + Duration::from_secs(2));
        tokio::spawn(async move { Ok(t.send(request, Op::Digitize).await?) })
    };
    // Let the server take the headers and the first half of the body.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let holders_sent = Instant::now();
    let holders: Vec<_> = (0..plan.workers)
        .map(|_| spawn_in(t, pool, Some(hold_in(t, pool, plan.hold_for))))
        .collect();
    settle(t, pool, plan.workers, 0, Duration::from_secs(1)).await;
    // Without queue places nothing waits, and there is no queue time to count.
    let queued = (t.queue_capacity(pool) > 0).then(|| spawn_in(t, pool, Some(plan.queued.hook())));
    InFlight {
        stall,
        holders_sent,
        holders,
        queued,
    }
}

/// How many holders ran at once: answered 200 well within one and a half holds.
async fn ran_at_once(t: &Target, c: &mut Ctx, holders: Vec<Pending>, hold_for: Duration) -> usize {
    let mut ran = 0;
    for (i, r) in join_all(holders).await.into_iter().enumerate() {
        match r {
            Ok(reply) => {
                c.reply(t, format!("holder-{i}"), &reply);
                if reply.ok() && reply.elapsed < hold_for * 3 / 2 {
                    ran += 1;
                }
            }
            Err(e) => c.fail(format!("holder-{i}: {e}")),
        }
    }
    ran
}

/// The stalled upload's answer: a note for the observation, and when it came (if it did).
struct StallAnswer {
    note: String,
    until: Option<Instant>,
}

/// Requires the stalled upload to be answered with the upload timeout, on time.
async fn judge_stall(t: &Target, c: &mut Ctx, plan: &StallPlan, stall: Pending) -> StallAnswer {
    let (upload, late) = (plan.upload, plan.late);
    let code = ErrorCode::UploadTimeout;
    match stall.await.unwrap_or_else(|e| Err(TaskError::Join(e))) {
        Ok(reply) => {
            c.reply(t, "stalled upload", &reply);
            let took = reply.elapsed;
            c.require(t.is_error(&reply, code), || {
                format!(
                    "stalled upload: expected {} {code}, got {} {} after {:.0} ms",
                    t.status(code),
                    reply.status,
                    reply.code(),
                    ms(took)
                )
            });
            c.require(took >= upload, || {
                format!(
                    "stalled upload: answered after {:.0} ms, before the {} ms read timeout",
                    ms(took),
                    upload.as_millis()
                )
            });
            c.require(took <= upload + late, || {
                format!(
                    "stalled upload: answered after {:.0} ms, more than {} ms after the {} ms read timeout",
                    ms(took),
                    late.as_millis(),
                    upload.as_millis()
                )
            });
            StallAnswer {
                note: format!(
                    "stalled upload answered {} after {:.0} ms",
                    reply.status,
                    ms(took)
                ),
                until: Some(reply.answered()),
            }
        }
        Err(e) => {
            c.fail(format!(
                "stalled upload: no {} {code} within {} ms: {e}",
                t.status(code),
                (upload + late).as_millis()
            ));
            StallAnswer {
                note: "stalled upload not answered".into(),
                until: None,
            }
        }
    }
}

/// Requires every holder to have run at once while the upload stalled (it holds no slot),
/// when the stall lasted long enough to tell.
fn judge_no_slot_held(
    c: &mut Ctx,
    plan: &StallPlan,
    ran: usize,
    until: Option<Instant>,
    holders_sent: Instant,
) {
    let (workers, hold_for) = (plan.workers, plan.hold_for);
    // A holder kept waiting by a slot the upload holds answers at least half a hold late; that
    // shows only while the upload still stalls at least half a hold after the holders went out.
    let judged = until.is_some_and(|until| until >= holders_sent + hold_for / 2);
    if judged {
        c.require(ran == workers, || {
            format!(
                "while an upload stalled, only {ran} of {workers} held requests ran at once: the stalled upload holds a worker slot"
            )
        });
    } else {
        c.evidence.push(format!(
            "whether a stalled upload holds a slot was not judged: its read timeout ({} ms) is short beside the {} ms hold",
            plan.upload.as_millis(),
            hold_for.as_millis()
        ));
    }
}

/// Queue time counts, and a stalled upload holds no slot: an upload stalls; meanwhile every
/// worker is held for `hold` (they must all run at once), and a request sent behind them waits,
/// then holds a middle stage: it must time out the deadline after it was sent.
async fn queue_time_and_stall(t: &Arc<Target>, c: &mut Ctx, elapsed: &mut Vec<f64>) -> String {
    let plan = StallPlan::new(t);
    let flight = stall_and_hold(t, &plan).await;
    let ran = ran_at_once(t, c, flight.holders, plan.hold_for).await;
    match flight.queued {
        Some(task) => {
            let answer = task.await.unwrap_or_else(|e| Err(TaskError::Join(e)));
            plan.queued.judge(t, c, "queued", answer, elapsed);
        }
        None => c.evidence.push(
            "queue time: not applicable, the digitize pool has no queue places (nothing waits)"
                .into(),
        ),
    }
    let stalled = judge_stall(t, c, &plan, flight.stall).await;
    judge_no_slot_held(c, &plan, ran, stalled.until, flight.holders_sent);
    format!(
        "{}; meanwhile {ran} of {} held requests ran at once",
        stalled.note, plan.workers
    )
}

/// B1 judges the reference surface's deadlines and stalled uploads, and any pool's declared
/// deadline the checker can hold a request past.
fn applies(contract: &Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        !super::deadline::deadlined(contract, plimsoll_fault::Bound::TimeoutLate.base(contract))
            .is_empty()
            || super::stalled_body::applies(contract),
        "the contract declares no deadline the checker can hold a request past \
         (`pools.NAME.deadline_ms` with its `deadline_answer`, for a pool held by a hook or a \
         dependency), no upload read timeout (`[upload]`) and no reference API (`[api]`)",
    )
}

async fn b1(t: &Arc<Target>, c: &mut Ctx) {
    if t.expected.is_reference() {
        reference_deadlines(t, c).await;
    }
    if !super::deadline::deadlined(&t.expected, t.bound(plimsoll_fault::Bound::TimeoutLate))
        .is_empty()
    {
        let part = super::deadline::judge(t, c).await;
        c.add_part(part);
    }
    if super::stalled_body::applies(&t.expected) {
        let part = super::stalled_body::judge(t, c).await;
        c.add_part(part);
    }
}

/// The reference surface: held stages past both pools' deadlines, queue time included, and a
/// stalled upload.
async fn reference_deadlines(t: &Arc<Target>, c: &mut Ctx) {
    let late = t.bound(plimsoll_fault::Bound::TimeoutLate).as_millis() as u64;
    let stop = t.stop_within();
    c.expected = format!(
        "{} {} between {} and {} ms after sending, queue time included (export {} ms), failed_stage = the held stage, slot back within {} ms, no temp files; {} {} within {} ms of a stalled upload, no slot held",
        t.status(ErrorCode::Timeout),
        ErrorCode::Timeout,
        t.deadline(Pool::Digitize).as_millis(),
        t.deadline(Pool::Digitize).as_millis() as u64 + late,
        t.deadline(Pool::Export).as_millis(),
        stop.as_millis(),
        t.status(ErrorCode::UploadTimeout),
        ErrorCode::UploadTimeout,
        t.expected.upload().read_timeout_ms + late,
    );
    if let Some(why) = trials_out_of_reach(t) {
        c.fault_removes(t, Some("the deadline and stalled-upload trials"), why);
        c.observed = super::trickle::upload(t, c).await.unwrap_or_default();
        return;
    }
    let pools = [Pool::Digitize, Pool::Export];
    let mut before = Vec::new();
    for pool in pools {
        before.push(counter(t, c, MetricName::CancellationsTotal, pool).await);
    }

    let mut elapsed = Vec::new();
    // The export and the queued request below are trials too.
    let count = (t.trials.max(1) as usize).saturating_sub(2).max(1);
    past_the_deadline(t, c, count, &mut elapsed).await;
    let stall_note = queue_time_and_stall(t, c, &mut elapsed).await;

    // Nobody went away: a cancellation counter that rose counts timeouts as cancellations.
    for (pool, before) in pools.into_iter().zip(before) {
        let name = MetricName::CancellationsTotal;
        let Some(before) = before else {
            continue; // already failed: the series is missing
        };
        if let Some(after) = counter(t, c, name, pool).await {
            c.require(after == before, || {
                format!(
                    "{} during timeouts, though no client went away: timeouts counted as cancellations",
                    rose(name, pool, after - before)
                )
            });
        }
    }

    let (worst, median) = worst_and_median(&elapsed);
    c.trials_ms = elapsed;
    c.observed = format!(
        "{} timeouts: worst answered at {worst:.0} ms, median {median:.0} ms; {stall_note}",
        c.trials_ms.len()
    );
    if let Some(note) = super::trickle::upload(t, c).await {
        c.observed = format!("{}; {note}", c.observed);
    }
    capacity_recovered(t, c).await;
}

/// Why the deadline trials cannot be judged under the run's fault: the sample image the held
/// requests carry may take longer to cross than half the tolerance their answers are judged by
/// (a trickle), so a conforming answer could look late. `None` without such a fault.
fn trials_out_of_reach(t: &Target) -> Option<String> {
    let (slowest, _) = t.adjustments.byte_rates(plimsoll_fault::Stream::Upstream)?;
    let takes = Duration::from_secs_f64(t.image.len() as f64 / slowest);
    let late = t.bound(plimsoll_fault::Bound::TimeoutLate);
    (takes > late / 2).then(|| {
        format!(
            "the {}-byte sample image the held requests carry may take {:.0} ms to cross, more than half the {} ms tolerance their answers are judged by",
            t.image.len(),
            ms(takes),
            late.as_millis()
        )
    })
}
