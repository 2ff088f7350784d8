//! Driving a worker pool from outside: held requests on their own tasks, bursts judged by the
//! client's own clock, and the proof that capacity came back after a fault. Holds are test hooks
//! built with the contract's hook grammar, never spelled by hand.
//!
//! The client's timings are the evidence; `/metrics` only paces the checker (or is cross-checked
//! against what the client saw). A request held for `hold` that is admitted at once answers after
//! about `hold`; one that waited for a slot answers after about twice that; a refusal answers at
//! once with the contract's overloaded error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use plimsoll_spec::hooks::format_hooks;
use plimsoll_spec::{ErrorCode, HookDirective, MetricName, Pool};

use super::ctx::{Ctx, ms};
use crate::remote::{MetricError, Reply, RequestError, Target, WaitError, series};

/// How the checker keeps a pool's workers busy on purpose, if it can.
pub enum Held {
    /// By the reference hook, holding the pool's first stage; its gauges and Server-Timing
    /// are declared, and cross-checked.
    Hook(Pool),
    /// By the pool's declared `hold`: a request the service answers slowly, or one its hook
    /// holds.
    Request(Box<HeldRequest>),
    /// Not at all, and why.
    Not(&'static str),
}

/// A request that holds a worker of its pool for at least `hold`, as the contract declares.
#[derive(Debug, Clone)]
pub struct HeldRequest {
    /// What is sent: the pool's recipe, with the hook's header when it holds by a hook.
    pub request: plimsoll_spec::model::Recipe,
    /// The least time it holds its worker.
    pub hold: Duration,
    /// How it holds, for the evidence (`a slow request`, `X-Plimsoll-Hook`).
    pub by: String,
    /// The dependency the checker plays and holds the service's call on, when it holds by one.
    pub dependency: Option<plimsoll_spec::model::DependencyHold>,
}

/// How long a hook hold asks for: long beside scheduling jitter, short beside any deadline.
const HOOK_HOLD: Duration = Duration::from_millis(400);

impl HeldRequest {
    /// The same request with `header: value` added (a key of a keyed pool).
    pub fn with_header(&self, header: &str, value: &str) -> HeldRequest {
        let mut out = self.clone();
        out.request
            .headers
            .insert(header.to_owned(), value.to_owned());
        out
    }

    /// The request `hold` declares, holding its worker for `least` at least: by its hook, for
    /// that long; by its slow request, when it takes that long. None when it cannot, or when
    /// the pool's deadline would answer it first.
    pub fn at_least(
        hold: &plimsoll_spec::model::Hold,
        spec: &plimsoll_spec::model::PoolSpec,
        least: Duration,
    ) -> Option<Self> {
        if spec
            .deadline_ms
            .is_some_and(|d| Duration::from_millis(d) <= least)
        {
            return None;
        }
        match (&hold.hook, hold.at_least_ms) {
            (Some(hook), _) => Some(Self::by_hook(hold, hook, least)),
            (None, Some(ms)) if Duration::from_millis(ms) >= least => Some(Self::of(hold, spec)),
            (None, _) => hold
                .dependency
                .as_ref()
                .map(|d| Self::by_dependency(hold, d, least)),
        }
    }

    /// The request `hold` declares, held `beyond` past the pool's deadline: by its hook or its
    /// dependency (a slow request takes only its own time, which the deadline leaves room
    /// for). None without a deadline or such a hold.
    pub fn past_deadline(
        hold: &plimsoll_spec::model::Hold,
        spec: &plimsoll_spec::model::PoolSpec,
        beyond: Duration,
    ) -> Option<Self> {
        let least = Duration::from_millis(spec.deadline_ms?) + beyond;
        match (&hold.hook, &hold.dependency) {
            (Some(hook), _) => Some(Self::by_hook(hold, hook, least)),
            (None, Some(d)) => Some(Self::by_dependency(hold, d, least)),
            (None, None) => None,
        }
    }

    /// `hold`'s request, held for `least` by its hook's directive.
    fn by_hook(
        hold: &plimsoll_spec::model::Hold,
        hook: &plimsoll_spec::model::HookHold,
        least: Duration,
    ) -> Self {
        let mut request = hold.request.clone();
        request.headers.insert(
            hook.header.clone(),
            self::hold(&hook.stage, least.as_millis() as u64),
        );
        HeldRequest {
            request,
            hold: least,
            by: hook.header.clone(),
            dependency: None,
        }
    }

    /// `hold`'s request, held for `least` by the checker answering the service's call to `d`
    /// that late.
    pub fn by_dependency(
        hold: &plimsoll_spec::model::Hold,
        d: &plimsoll_spec::model::DependencyHold,
        least: Duration,
    ) -> Self {
        HeldRequest {
            request: hold.request.clone(),
            hold: least,
            by: format!("its dependency {} played at {}", d.env, d.listen),
            dependency: Some(d.clone()),
        }
    }

    /// The request `hold` declares, holding for its own `at_least_ms` or, by its hook or its
    /// dependency, for [`HOOK_HOLD`] (a fifth of the pool's deadline when that is shorter).
    pub fn of(hold: &plimsoll_spec::model::Hold, spec: &plimsoll_spec::model::PoolSpec) -> Self {
        let chosen = spec
            .deadline_ms
            .map_or(HOOK_HOLD, |d| HOOK_HOLD.min(Duration::from_millis(d / 5)));
        match (&hold.hook, hold.at_least_ms, &hold.dependency) {
            (Some(hook), _, _) => Self::by_hook(hold, hook, chosen),
            (None, None, Some(d)) => Self::by_dependency(hold, d, chosen),
            (None, at_least, _) => HeldRequest {
                request: hold.request.clone(),
                hold: Duration::from_millis(at_least.unwrap_or_default()),
                by: "a slow request".into(),
                dependency: None,
            },
        }
    }

    /// The dependency the checker plays for this request, listening (None when it holds
    /// otherwise), with its hold open until the ticket is dropped.
    async fn open_hold(
        &self,
        t: &Target,
    ) -> Result<Option<crate::remote::dependency::HoldTicket>, RequestError> {
        match &self.dependency {
            Some(d) => Ok(Some(t.dependencies.get(d).await?.hold(self.hold))),
            None => Ok(None),
        }
    }
}

/// Sends a held request, giving up after `limit`: with its dependency's hold open throughout,
/// when it holds by one.
pub async fn send_held(
    t: &Target,
    held: &HeldRequest,
    limit: Duration,
) -> Result<Reply, RequestError> {
    let _open = held.open_hold(t).await?;
    t.send_recipe(&held.request, limit).await
}

/// [`send_held`] from another loopback address ([`Target::send_recipe_elsewhere`]).
pub async fn send_held_elsewhere(
    t: &Target,
    held: &HeldRequest,
    limit: Duration,
) -> Result<Reply, RequestError> {
    let _open = held.open_hold(t).await?;
    t.send_recipe_elsewhere(&held.request, limit).await
}

/// How `name`'s workers can be held under `contract`.
pub fn held(
    contract: &plimsoll_spec::Contract,
    name: &str,
    spec: &plimsoll_spec::model::PoolSpec,
) -> Held {
    let reference = Pool::ALL.into_iter().find(|p| p.as_str() == name);
    match (reference, &spec.hold) {
        _ if spec.routes.is_empty() => Held::Not("fed by no route (R1 judges a relay's pool)"),
        (Some(pool), _) if contract.is_reference() => Held::Hook(pool),
        (_, Some(hold)) => Held::Request(Box::new(HeldRequest::of(hold, spec))),
        (_, None) => Held::Not(
            "declares no `hold` (a slow request or a hook) and the contract no reference hook",
        ),
    }
}

/// A request sent on its own task: its reply, or why there is none.
pub type Pending = tokio::task::JoinHandle<Result<Reply, TaskError>>;

/// Why a request sent on its own task has no reply. A task that panicked or was cancelled reads
/// `task failed: …` where it was collected with others ([`join_all`]) or passed on by another
/// task, and in the runtime's own words where a check awaited it alone.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The request itself failed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The task panicked or was cancelled, said as `task failed: …`.
    #[error("task failed: {0}")]
    Failed(tokio::task::JoinError),
    /// The task panicked or was cancelled, in the runtime's words.
    #[error(transparent)]
    Join(tokio::task::JoinError),
}

/// Why a [`GaugeWatch`] has no largest value.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The gauge could not be read.
    #[error(transparent)]
    Metric(#[from] MetricError),
    /// The task polling it panicked or was cancelled.
    #[error("gauge watch failed: {0}")]
    Join(tokio::task::JoinError),
}

/// One directive as a hook header value.
pub fn hook(directive: HookDirective) -> String {
    format_hooks(&[directive])
}

/// A hook holding `stage` (the reference pipeline's, or a service's own name) open for `ms`.
pub fn hold<S: std::fmt::Display>(stage: S, ms: u64) -> String {
    format_hooks(&[HookDirective::Hold { stage, ms }])
}

/// A hook holding the first digitize stage for `ms`: the request occupies a slot, does no work.
pub fn hold_first(t: &Target, ms: u64) -> String {
    hold(t.expected.pool(Pool::Digitize).stages[0], ms)
}

/// A hook holding the first stage of `pool` for `hold`.
pub fn hold_in(t: &Target, pool: Pool, hold_for: Duration) -> String {
    hold(t.stages(pool)[0], hold_for.as_millis() as u64)
}

/// How long the checker waits for a reply before it gives up on a request to `pool`: the
/// pool's deadline, its tolerance, and a few seconds (a server that ignores its deadline is
/// not waited on for ever).
pub fn give_up(t: &Target, pool: Pool) -> Duration {
    t.deadline(pool) + Duration::from_millis(t.expected.tolerances.timeout_late_ms + 3000)
}

/// Sends a digitize request on its own task (so it can be held open or abandoned).
pub fn spawn_digitize(t: &Arc<Target>, hook: Option<String>) -> Pending {
    spawn_in(t, Pool::Digitize, hook)
}

/// Sends a request to `pool`'s endpoint on its own task.
pub fn spawn_in(t: &Arc<Target>, pool: Pool, hook: Option<String>) -> Pending {
    let t = t.clone();
    let limit = give_up(&t, pool);
    tokio::spawn(async move { Ok(t.send_pool(pool, hook.as_deref(), limit).await?) })
}

/// Waits for every task and collects the replies (or why each has none).
pub async fn join_all(tasks: Vec<Pending>) -> Vec<Result<Reply, TaskError>> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.unwrap_or_else(|e| Err(TaskError::Failed(e))));
    }
    out
}

/// Disconnects every request still in flight (drops its connection) and waits for the tasks.
pub async fn abandon(tasks: Vec<Pending>) {
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
}

/// Sleeps until `at` (at once if it has passed).
pub async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}

/// Requires a plain digitize request (no hook) to succeed, e.g. after a fault or a delay.
pub async fn plain_request_succeeds(t: &Target, c: &mut Ctx, label: &str, what: &str) {
    match t.digitize(None).await {
        Ok(reply) => {
            c.reply(t, label, &reply);
            c.require(reply.ok(), || format!("{what} answered {}", reply.status));
        }
        Err(e) => c.fail(format!("{what}: {e}")),
    }
}

/// Waits until no more digitize workers are busy than when the check started, allowing a
/// worker twice the cancellation bound to stop. Pacing only: it reads the busy gauge.
pub async fn drained(t: &Target, c: &Ctx) -> Result<Duration, WaitError> {
    let baseline = c.baseline_busy;
    t.wait_metric(
        MetricName::WorkersBusy,
        Pool::Digitize,
        t.stop_within() * 2,
        |v| v <= baseline,
    )
    .await
}

/// Waits (pacing only) until `pool`'s busy gauge reaches `busy` and its queue gauge `queued`,
/// for at most `limit`; the checker goes on either way, its verdicts rest on its own timings.
/// Whether the gauges were seen there (false also when there is none to read).
pub async fn settle(t: &Target, pool: Pool, busy: usize, queued: usize, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms);
    while Instant::now() < until {
        let b = t.metric(MetricName::WorkersBusy, pool).await;
        let q = t.metric(MetricName::QueueDepth, pool).await;
        match (b, q) {
            (Ok(b), Ok(q)) if b >= busy as f64 && q >= queued as f64 => return true,
            (Err(_), _) | (_, Err(_)) => {
                // No gauge to pace by: give the requests a moment instead.
                tokio::time::sleep(limit.min(Duration::from_millis(100))).await;
                return false;
            }
            _ => tokio::time::sleep(poll).await,
        }
    }
    false
}

/// How a burst of held requests to one pool was answered, by the client's own clock.
pub struct Burst {
    /// How long each request asked to be held: the unit its answers are sorted by.
    pub hold: Duration,
    /// 200 within half a hold of the first answer: admitted at once, ran alongside the others.
    pub ran: Vec<Reply>,
    /// 200 later (a hold or more after the first): waited in the queue for a slot.
    pub queued: Vec<Reply>,
    /// The contract's overloaded answer.
    pub refused: Vec<Reply>,
    /// Anything else, in words.
    pub other: Vec<String>,
}

impl Burst {
    /// Every 200 of the burst.
    pub fn admitted(&self) -> impl Iterator<Item = &Reply> {
        self.ran.iter().chain(&self.queued)
    }

    /// Whether an admitted answer came where neither one that ran at once nor one that waited
    /// a hold should: between a quarter and three quarters of a hold after the first. The
    /// split between them (half a hold) is then a guess, for a correct target as for a wrong
    /// one; a clean run's first wave spreads over a few tens of ms.
    pub fn ambiguous(&self) -> bool {
        let (early, late) = (self.hold / 4, self.hold * 3 / 4);
        self.after_first()
            .any(|after| after >= early && after < late)
    }

    /// Each admitted answer's time after the first, in words: `+0, +149, +185, +227 ms`.
    pub fn spread(&self) -> String {
        let mut after: Vec<Duration> = self.after_first().collect();
        after.sort();
        let ms: Vec<String> = after
            .iter()
            .map(|d| format!("+{}", d.as_millis()))
            .collect();
        format!("{} ms after the first", ms.join(", "))
    }

    /// Each admitted answer's time after the first one's, by the client's clock.
    fn after_first(&self) -> impl Iterator<Item = Duration> + '_ {
        let first = self.admitted().map(Reply::answered).min();
        self.admitted()
            .filter_map(move |r| first.map(|f| r.answered().saturating_duration_since(f)))
    }

    /// `4 ran at once, 2 queued, 2 refused`.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} ran at once, {} queued, {} refused",
            self.ran.len(),
            self.queued.len(),
            self.refused.len()
        );
        if !self.other.is_empty() {
            s.push_str(&format!(", {} otherwise answered", self.other.len()));
        }
        s
    }

    /// Requires exactly `workers` requests to have run at once, `queue` to have waited for a
    /// slot, and every other one to have been refused: the pool's capacity, seen by the client.
    pub fn require_capacity(&self, c: &mut Ctx, label: &str, workers: usize, queue: usize) -> bool {
        let n = self.ran.len() + self.queued.len() + self.refused.len() + self.other.len();
        let refused = n.saturating_sub(workers + queue);
        let ok = self.ran.len() == workers
            && self.queued.len() == queue
            && self.refused.len() == refused
            && self.other.is_empty();
        c.require(ok, || {
            let mut m = format!(
                "{label}: of {n} requests held {} ms, {}; expected {workers} at once, {queue} queued, {refused} refused",
                self.hold.as_millis(),
                self.summary()
            );
            if !self.other.is_empty() {
                m.push_str(&format!(" ({})", self.other.join("; ")));
            }
            m
        })
    }

    /// Requires no place to have been lost: at least `workers` requests ran at once and at
    /// least `workers + queue` were admitted. (More is T1's business, judged there: a fault
    /// check fails only for the capacity it could have lost.)
    pub fn require_no_loss(&self, c: &mut Ctx, label: &str, workers: usize, queue: usize) -> bool {
        let admitted = self.ran.len() + self.queued.len();
        let ok = self.ran.len() >= workers && admitted >= workers + queue && self.other.is_empty();
        c.require(ok, || {
            let mut m = format!(
                "{label}: of {} requests held {} ms, {}; expected at least {workers} at once and {} admitted",
                admitted + self.refused.len() + self.other.len(),
                self.hold.as_millis(),
                self.summary(),
                workers + queue
            );
            if !self.other.is_empty() {
                m.push_str(&format!(" ({})", self.other.join("; ")));
            }
            m
        })
    }
}

/// Sends `n` requests to `pool` at once, each holding the pool's first stage for `hold`, and
/// sorts the answers by the client's clock: answered within half a hold of the first answer =
/// ran at once, later = queued (it started when a slot freed), the overloaded error = refused.
/// Every reply goes on the timeline.
pub async fn burst(
    t: &Arc<Target>,
    c: &mut Ctx,
    pool: Pool,
    label: &str,
    n: usize,
    hold: Duration,
) -> Burst {
    let tasks: Vec<_> = (0..n)
        .map(|_| spawn_in(t, pool, Some(hold_in(t, pool, hold))))
        .collect();
    let refused = |reply: &Reply| {
        if t.is_error(reply, ErrorCode::Overloaded) {
            Ok(())
        } else {
            Err(answered(reply))
        }
    };
    sort_burst(t, c, label, tasks, hold, Reply::ok, refused).await
}

/// [`burst`], sent once more with twice the hold (at most `longest`) when its answers are
/// ambiguous ([`Burst::ambiguous`]: the first wave spread over more than a quarter of the hold,
/// on a crowded machine or by a service whose requests' own work is done one at a time), and
/// that one returned: the split between ran and waited is at half a hold, so the longer hold
/// leaves room for the same spread. Every request of the first burst has been answered before
/// the second is sent; the evidence says why it was.
pub async fn clear_burst(
    t: &Arc<Target>,
    c: &mut Ctx,
    (pool, label): (Pool, &str),
    n: usize,
    (hold, longest): (Duration, Duration),
) -> Burst {
    let b = burst(t, c, pool, label, n, hold).await;
    let longer = (hold * 2).min(longest);
    if !b.ambiguous() || longer <= hold {
        return b;
    }
    c.evidence.push(format!(
        "{label}: a burst held {} ms answered ambiguously ({}): sent again held {} ms",
        hold.as_millis(),
        b.spread(),
        longer.as_millis()
    ));
    burst(t, c, pool, label, n, longer).await
}

/// Sends `n` copies of a pool's held request at once, each holding a worker for at least
/// its hold by the contract's word, and sorts the answers as [`burst`] does: the recipe's status
/// within half a hold of the first = ran at once, later = queued, what `refused` accepts =
/// refused (its `Err` is the words for any other answer).
pub async fn recipe_burst(
    t: &Arc<Target>,
    c: &mut Ctx,
    held: &HeldRequest,
    label: &str,
    (n, limit): (usize, Duration),
    refused: impl Fn(&Reply) -> Result<(), String>,
) -> Burst {
    let tasks: Vec<Pending> = (0..n).map(|_| spawn_held(t, held, limit)).collect();
    let status = held.request.status;
    sort_burst(
        t,
        c,
        label,
        tasks,
        held.hold,
        |r| r.status == status,
        refused,
    )
    .await
}

/// A reply that is not the refusal looked for, in words: `answered 200 ` or `answered 503
/// timeout` (its problem code, if any).
pub fn answered(reply: &Reply) -> String {
    format!("answered {} {}", reply.status, reply.code())
}

/// Sends a held request on its own task, giving up after `limit`.
pub fn spawn_held(t: &Arc<Target>, held: &HeldRequest, limit: Duration) -> Pending {
    let (t, held) = (t.clone(), held.clone());
    tokio::spawn(async move { Ok(send_held(&t, &held, limit).await?) })
}

/// Waits for a burst's requests and sorts their answers by the client's clock: `served`
/// answers within half a hold of the first one ran at once, later ones waited; those `refused`
/// accepts were refused; a served answer before its hold ended, and anything else, is `other`,
/// in the words `refused` gave for it (what it answered, and what a refusal is). Every reply
/// goes on the timeline.
pub(crate) async fn sort_burst(
    t: &Arc<Target>,
    c: &mut Ctx,
    label: &str,
    tasks: Vec<Pending>,
    hold: Duration,
    served: impl Fn(&Reply) -> bool,
    refused: impl Fn(&Reply) -> Result<(), String>,
) -> Burst {
    let mut out = Burst {
        hold,
        ran: Vec::new(),
        queued: Vec::new(),
        refused: Vec::new(),
        other: Vec::new(),
    };
    let mut admitted = Vec::new();
    for (i, r) in join_all(tasks).await.into_iter().enumerate() {
        let name = format!("{label}-{i}");
        match r {
            Ok(reply) => {
                c.reply(t, &name, &reply);
                if served(&reply) && reply.elapsed < hold {
                    out.other.push(format!(
                        "{name} answered {} after {:.0} ms, before its {} ms hold ended",
                        reply.status,
                        ms(reply.elapsed),
                        hold.as_millis()
                    ));
                } else if served(&reply) {
                    admitted.push(reply);
                } else {
                    match refused(&reply) {
                        Ok(()) => out.refused.push(reply),
                        Err(why) => out.other.push(format!("{name} {why}")),
                    }
                }
            }
            Err(e) => out.other.push(format!("{name}: {e}")),
        }
    }
    // Ran at once or waited, by the client's clock and relative to the first answer (so a
    // machine that is slow for everyone does not turn runners into waiters): a request that
    // waited started only when a slot freed, so it answers at least about a hold after the
    // first one did.
    if let Some(first) = admitted.iter().map(Reply::answered).min() {
        for reply in admitted {
            if reply.answered() < first + hold / 2 {
                out.ran.push(reply);
            } else {
                out.queued.push(reply);
            }
        }
    }
    out
}

/// The hold of a capacity proof, and the longest it may be: long beside scheduling jitter,
/// short beside the deadline (a queued request runs two holds after it arrived).
fn proof_hold(t: &Target, pool: Pool) -> (Duration, Duration) {
    let longest = t.deadline(pool) / 5;
    (Duration::from_millis(400).min(longest), longest)
}

/// After a fault: every slot admits work again, and the queue is whole — proved by the
/// client, not the gauge. A burst of workers + queue + 1 held requests: all the workers run at
/// once (a leaked slot would make one wait) and all the queue places admit a waiting request (a
/// place held by a request that is gone cannot hide there); the one more is refused by a pool
/// of the contract's size (a larger pool is T1's failure, not the fault's). The busy gauge is
/// cross-checked: a gauge still busy while the client proves every slot free is a lying gauge.
pub async fn capacity_recovered(t: &Arc<Target>, c: &mut Ctx) {
    let pool = Pool::Digitize;
    let baseline = c.baseline_busy.max(0.0) as usize;
    let drain = drained(t, c).await;
    let workers = t.workers(pool).saturating_sub(baseline);
    let queue = t.queue_capacity(pool);
    let n = workers + queue + 1;
    let b = clear_burst(t, c, (pool, "capacity"), n, proof_hold(t, pool)).await;
    let ok = b.require_no_loss(c, "capacity after the fault", workers, queue);
    match drain {
        Err(e) if ok => c.fail(format!(
            "every slot admitted work, but the busy gauge did not drain before: {e}"
        )),
        Err(e) => c.evidence.push(format!("busy gauge before the proof: {e}")),
        Ok(_) => {}
    }
    let mut note = format!("capacity after the fault: {}", b.summary());
    if baseline > 0 {
        note.push_str(&format!(" ({baseline} busy before the check)"));
    }
    c.evidence.push(note);
}

/// Requires a gauge polled through a burst to have peaked at `expected`, the state the server
/// held `held` long by the client's clock. A peak above it is always a failure (the gauge shows
/// more than can be); one below it too, unless the run's fault spaces the polls too far apart
/// to be sure one landed inside `held`: each poll is a round trip, and when the fault's slowest
/// ones, with the poll interval, take more than half of it, `part` is named as not applicable
/// (`why` words the failure otherwise).
pub fn require_peak(
    t: &Target,
    c: &mut Ctx,
    (max, expected): (f64, usize),
    (held, part): (Duration, &str),
    why: impl FnOnce() -> String,
) {
    let (_, most) = t.adjustments.round_trip();
    let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms);
    if max < expected as f64 && !most.is_zero() && (most + poll) * 2 > held {
        c.fault_removes(
            t,
            Some(part),
            format!(
                "each poll of the gauge is a round trip of up to {} ms through it, so its samples may be further apart than half the {} ms the state was held",
                most.as_millis(),
                held.as_millis()
            ),
        );
        return;
    }
    c.require(max == expected as f64, why);
}

/// Polls a pool's gauge on its own task until finished, keeping the largest value it saw.
pub struct GaugeWatch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(f64, usize, Option<MetricError>)>,
}

impl GaugeWatch {
    /// Starts polling `pool`'s `name` gauge, at the contract's metrics poll interval.
    pub fn start(t: &Arc<Target>, name: MetricName, pool: Pool) -> GaugeWatch {
        GaugeWatch::polling(t, move |t| async move { t.metric(name, pool).await })
    }

    /// Starts polling the gauge `read` reads, at the contract's metrics poll interval.
    pub fn polling<F, Fut>(t: &Arc<Target>, read: F) -> GaugeWatch
    where
        F: Fn(Arc<Target>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<f64, MetricError>> + Send,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms);
        let task = tokio::spawn({
            let (t, stop) = (t.clone(), stop.clone());
            async move {
                let (mut max, mut samples) = (f64::NEG_INFINITY, 0);
                while !stop.load(Ordering::SeqCst) {
                    match read(t.clone()).await {
                        Ok(v) => {
                            max = max.max(v);
                            samples += 1;
                        }
                        Err(e) => return (max, samples, Some(e)),
                    }
                    tokio::time::sleep(poll).await;
                }
                (max, samples, None)
            }
        });
        GaugeWatch { stop, task }
    }

    /// The largest value seen and the number of samples; an error if the series was missing.
    pub async fn finish(self) -> Result<(f64, usize), WatchError> {
        self.stop.store(true, Ordering::SeqCst);
        match self.task.await {
            Ok((_, _, Some(e))) => Err(WatchError::Metric(e)),
            Ok((max, samples, None)) => Ok((max, samples)),
            Err(e) => Err(WatchError::Join(e)),
        }
    }
}

/// Reads a pool's counter, recording a failure of the clause that needed it when missing.
pub async fn counter(t: &Target, c: &mut Ctx, name: MetricName, pool: Pool) -> Option<f64> {
    match t.metric(name, pool).await {
        Ok(v) => Some(v),
        Err(e) => {
            c.fail(e.to_string());
            None
        }
    }
}

/// Requires the implementation's temp folder to hold nothing the check's requests left
/// ([`Ctx::temp_left`]), or, when the checker cannot see it, the temp-files gauge to be 0 (a
/// missing gauge fails).
pub async fn no_temp_files(t: &Target, c: &mut Ctx, label: &str) {
    match c.temp_left(t) {
        Some(entries) => {
            c.require(entries.is_empty(), || {
                format!("{label}: temp files left: {entries:?}")
            });
        }
        None => match t.metric_total(MetricName::TempFiles).await {
            Ok(n) => {
                c.require(n == 0.0, || {
                    format!("{label}: {} is {n}", MetricName::TempFiles)
                });
            }
            Err(e) => c.fail(format!("{label}: {e}")),
        },
    }
}

/// For another service that declares `[temp_files]`: its temp folder (`--temp-dir`) holds
/// nothing the check's requests left once `label` ended; in words, for the observation. None
/// when the contract declares no temp files. Without `--temp-dir` nothing is judged of them, and
/// the words say so.
pub fn declared_temp_left(t: &Target, c: &mut Ctx, label: &str) -> Option<String> {
    let declared = t.expected.temp_files.as_ref()?;
    Some(match c.temp_left(t) {
        Some(entries) if entries.is_empty() => "temp folder empty".to_owned(),
        Some(entries) => {
            c.fail(format!("{label}: temp files left: {entries:?}"));
            format!("{} temp file(s) left", entries.len())
        }
        None => format!(
            "temp folder not read (give --temp-dir, the folder the service was given in {})",
            declared.env
        ),
    })
}

/// `recipe` sent once more after a trial (a failure, a cut, a stalled body), giving up after
/// `limit`: it must be answered its own status. Returns the status, or "no answer".
pub async fn served_again(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    recipe: &plimsoll_spec::model::Recipe,
    limit: Duration,
) -> String {
    match t.send_recipe(recipe, limit).await {
        Ok(reply) => {
            c.reply(t, label, &reply);
            c.require(reply.status == recipe.status, || {
                format!("{label} answered {}, not {}", reply.status, recipe.status)
            });
            reply.status.to_string()
        }
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            "no answer".to_owned()
        }
    }
}

/// How long each of [`every_worker_calls`]' requests is held: long enough for all of them to
/// reach the dependency together, short enough to be a fraction of any check.
const EVERY_WORKER_HOLD: Duration = Duration::from_millis(600);

/// Every worker of a pool held by a dependency the checker plays takes a request again (after a
/// failed call, a cut deadline): as many requests as the pool has workers, sent at once and held
/// at the dependency, must all be calling it together within two seconds, then each be served.
/// A failure path that lost a worker (a permit never given back) leaves a call short, the last
/// request waiting. None for a pool held otherwise, whose running requests the checker cannot
/// count from its own end.
pub async fn every_worker_calls(
    t: &Arc<Target>,
    c: &mut Ctx,
    label: &str,
    spec: &plimsoll_spec::model::PoolSpec,
) -> Option<String> {
    let hold = spec.hold.as_ref()?;
    let declared = hold.dependency.as_ref()?;
    let dependency = match t.dependencies.get(declared).await {
        Ok(d) => d,
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            return Some("every worker: not judged".into());
        }
    };
    let workers = spec.workers as usize;
    let held = HeldRequest::by_dependency(hold, declared, EVERY_WORKER_HOLD);
    let tasks: Vec<_> = (0..workers)
        .map(|_| spawn_held(t, &held, Duration::from_secs(10)))
        .collect();
    let together = dependency
        .wait_calls(Duration::from_secs(2), |n| n >= workers)
        .await;
    let mut served = 0;
    for answer in join_all(tasks).await {
        match answer {
            Ok(reply) if reply.status == held.request.status => served += 1,
            Ok(reply) => c.fail(format!(
                "{label}: one of {workers} requests at once answered {}, not {}",
                reply.status, held.request.status
            )),
            Err(e) => c.fail(format!("{label}: one of {workers} requests at once: {e}")),
        }
    }
    if together.is_err() {
        c.fail(format!(
            "{label}: {workers} requests sent at once did not all call {} together within 2000 \
             ms: a worker did not come back",
            dependency.name()
        ));
    }
    let at_once = if together.is_ok() { "all" } else { "not all" };
    Some(format!(
        "{workers} at once, {at_once} calling together, {served} served"
    ))
}

/// [`declared_temp_left`] once the folder has had until `by` to empty: a file removed as its
/// work stops (a dropped handler's) races the checker's look by microseconds, and what the
/// contract promises is the bound, not the first look. Polled every 10 ms, so a folder that
/// empties in time costs no more than that.
pub async fn declared_temp_left_by(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    by: Instant,
) -> Option<String> {
    t.expected.temp_files.as_ref()?;
    while Instant::now() < by && !c.temp_left(t).is_none_or(|left| left.is_empty()) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    declared_temp_left(t, c, label)
}

/// Records one failure for many alike findings: the first two, and how many more.
pub fn fail_many(c: &mut Ctx, what: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let mut m = format!("{what}: {}", items[..items.len().min(2)].join("; "));
    if items.len() > 2 {
        m.push_str(&format!(" (and {} more)", items.len() - 2));
    }
    c.fail(m);
}

/// `plimsoll_x{pool="digitize"} rose by 2`, for messages.
pub fn rose(name: MetricName, pool: Pool, by: f64) -> String {
    format!("{} rose by {by}", series(name, pool))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst held 400 ms whose 200s were answered `after_ms` after the first send.
    fn burst_answered(after_ms: &[u64]) -> Burst {
        let sent = Instant::now();
        let ran = after_ms
            .iter()
            .map(|&ms| Reply {
                status: 200,
                headers: reqwest::header::HeaderMap::new(),
                body: Vec::new(),
                sent,
                elapsed: Duration::from_millis(400 + ms),
                timing: None,
                violations: Vec::new(),
                pool: None,
            })
            .collect();
        Burst {
            hold: Duration::from_millis(400),
            ran,
            queued: Vec::new(),
            refused: Vec::new(),
            other: Vec::new(),
        }
    }

    /// A first wave within a quarter of a hold, and a second a hold later, is clear; an answer
    /// between them (the Python service's exports on a crowded CI machine: +149, +185, +227 ms)
    /// makes the split at half a hold a guess.
    #[test]
    fn a_burst_is_ambiguous_when_an_answer_falls_between_the_waves() {
        assert!(!burst_answered(&[0, 20, 60, 99]).ambiguous());
        assert!(!burst_answered(&[0, 30, 400, 430]).ambiguous());
        assert!(!burst_answered(&[0, 300]).ambiguous());
        let crowded = burst_answered(&[0, 149, 185, 227]);
        assert!(crowded.ambiguous());
        assert_eq!(crowded.spread(), "+0, +149, +185, +227 ms after the first");
        assert!(burst_answered(&[0, 299]).ambiguous());
        assert!(burst_answered(&[0, 100]).ambiguous());
        assert!(!burst_answered(&[]).ambiguous());
    }
}
