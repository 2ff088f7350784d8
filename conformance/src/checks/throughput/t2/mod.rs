//! T2: queued requests start in the order the pool's queue declares (`fifo`: arrival order,
//! `lifo`: the newest waiter first), trial after trial, judged by the client's clock; a queue
//! that promises no order (`unordered`) has nothing to judge.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::QueueOrder;
use plimsoll_spec::{ClauseId, Pool};
use tokio::sync::mpsc;

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{Pending, TaskError, fail_many, hold_in, join_all, settle, spawn_in};
use crate::checks::registry::Check;
use crate::remote::{Reply, Target};

/// T2's entry in the check registry: the evidence the docs print, and `t2`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::T2,
    "For each pool with a queue (the contract's holds {pools.digitize.queue.capacity} digitize and \
     {pools.export.queue.capacity} export places; a pool without one has nothing to order, and with no \
     queue anywhere the check does not apply and T3 covers the refusal), in each trial: all but one worker are held, the last one cycles, \
     and two more requests than the queue holds pass through it, each sent as soon as a place \
     frees. Every queued request holds its slot for the same time, so the order in which the \
     client receives their answers is the order they started: it must be the order the pool's \
     queue declares ({pools.digitize.queue.order}: arrival order; `lifo`: the newest waiter \
     first, each time a place frees), in every trial. The starts the server claims (sent plus \
     its Server-Timing `queue`) must agree.",
    |t, c| Box::pin(t2(t, c)),
)
.covers(&["server-timing"])
.applies_when(applies);

pub(crate) mod held;

/// T2 judges the reference pools' queues, or the queue of any pool held by its declared `hold`
/// that has two places or more and promises an order.
fn applies(contract: &plimsoll_spec::Contract) -> Result<(), String> {
    let any = contract.pools.iter().any(|(name, spec)| {
        matches!(
            crate::checks::pool::held(contract, name, spec),
            crate::checks::pool::Held::Request(_)
        ) && spec.queue.capacity.places().is_some_and(|p| p >= 2)
            && spec.queue.order != QueueOrder::Unordered
    });
    if contract.is_reference() || any {
        return Ok(());
    }
    Err(
        "no pool whose queue has an order to judge (two places or more, `fifo` or `lifo`) \
         and whose workers the checker can hold"
            .into(),
    )
}

/// Spacing between requests whose arrival order matters.
const SPACING: Duration = Duration::from_millis(25);
/// How long each queued request holds its slot: its start is its answer minus this.
const GAP: Duration = Duration::from_millis(80);
/// A generous bound on the real work of a request beside its hold.
const WORK: Duration = Duration::from_millis(30);

/// A queued request of a trial: sent on its own task, reporting its completion.
fn spawn_queued(
    t: &Arc<Target>,
    pool: Pool,
    index: usize,
    done: &mpsc::UnboundedSender<usize>,
) -> Pending {
    let inner = spawn_in(t, pool, Some(hold_in(t, pool, GAP)));
    let done = done.clone();
    tokio::spawn(async move {
        let r = inner.await.unwrap_or_else(|e| Err(TaskError::Failed(e)));
        let _ = done.send(index);
        r
    })
}

/// One trial; the order the queued requests started in (by the client), or None when the
/// trial cannot order them (a failure is recorded).
async fn trial(
    t: &Arc<Target>,
    c: &mut Ctx,
    pool: Pool,
    trial: u32,
    missing: &mut Vec<String>,
) -> Option<Vec<usize>> {
    let plan = Plan::new(t, pool, trial);
    let held = Held::hold(t, &plan).await;
    let cycled = Cycled::cycle(t, c, &plan, held.gate).await;
    let released = Released::collect(t, c, &plan, cycled.gate, held.blockers).await;
    let answered = Answered::collect(t, c, &plan, cycled.queued).await;
    if !released.fine || answered.replies.len() < plan.n {
        return None;
    }
    if !answered.waited(c, &plan, released.gate_freed) {
        return None;
    }
    Some(answered.start_order(t, c, &plan, missing))
}

/// One trial's shape: its pool and number, and the holds that make the queue's order the
/// order its requests start in.
struct Plan {
    pool: Pool,
    trial: u32,
    workers: usize,
    queue: usize,
    /// The requests that pass through the queue: two more than it holds.
    n: usize,
    /// How long the gate holds the last worker while the queue fills.
    gate_hold: Duration,
    /// How long the other workers are held: the whole trial.
    blocker_hold: Duration,
}

impl Plan {
    /// The gate holds until the queue is full plus one gap; the blockers outlast every
    /// request passing through the cycling slot.
    fn new(t: &Target, pool: Pool, trial: u32) -> Plan {
        let workers = t.workers(pool);
        let queue = t.queue_capacity(pool);
        let n = queue + 2;
        let gate_hold = Duration::from_millis(60) + SPACING * queue as u32 + GAP;
        let blocker_hold = gate_hold + (GAP + WORK) * n as u32 + Duration::from_millis(60);
        Plan {
            pool,
            trial,
            workers,
            queue,
            n,
            gate_hold,
            blocker_hold,
        }
    }

    /// A request's label on the timeline: `{pool}-{trial}-{what}`.
    fn label(&self, what: &str) -> String {
        let Plan { pool, trial, .. } = self;
        format!("{pool}-{trial}-{what}")
    }
}

/// Every worker taken: all but one held for the whole trial (the blockers), the last by the
/// gate for a little.
struct Held {
    blockers: Vec<Pending>,
    gate: Pending,
}

impl Held {
    /// Sends the blockers and the gate and waits (pacing only) until every worker is busy.
    async fn hold(t: &Arc<Target>, plan: &Plan) -> Held {
        let pool = plan.pool;
        // All workers but one held for the whole trial; the gate holds the last one a little.
        let blockers: Vec<_> = (1..plan.workers)
            .map(|_| spawn_in(t, pool, Some(hold_in(t, pool, plan.blocker_hold))))
            .collect();
        let gate = spawn_in(t, pool, Some(hold_in(t, pool, plan.gate_hold)));
        settle(t, pool, plan.workers, 0, Duration::from_millis(100)).await;
        Held { blockers, gate }
    }
}

/// The requests sent through the queue, in send order, and the gate, now reporting when it
/// freed its slot.
struct Cycled {
    gate: Pending,
    queued: Vec<Pending>,
}

impl Cycled {
    /// Fills the queue one at a time (so the arrival order is the send order), then sends the
    /// next request each time the cycling slot frees a place.
    async fn cycle(t: &Arc<Target>, c: &mut Ctx, plan: &Plan, gate: Pending) -> Cycled {
        let (pool, queue, n) = (plan.pool, plan.queue, plan.n);
        // Fill the queue, one at a time, so the arrival order is the send order.
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let mut queued = Vec::new();
        for i in 0..queue {
            queued.push(spawn_queued(t, pool, i, &done_tx));
            tokio::time::sleep(SPACING).await;
        }
        // Each time the cycling slot frees (the gate, then each queued request in turn), the
        // head of the queue starts and a place frees: fill it with the next request.
        let gate = tokio::spawn({
            let done = done_tx.clone();
            async move {
                let r = gate.await.unwrap_or_else(|e| Err(TaskError::Failed(e)));
                let _ = done.send(usize::MAX);
                r
            }
        });
        let cycle = (GAP + WORK) * 4 + plan.gate_hold;
        for i in queue..n {
            if tokio::time::timeout(cycle, done_rx.recv()).await.is_err() {
                c.fail(format!(
                    "{}: no request finished within {} ms, so no queue place freed",
                    plan.label("cycle"),
                    cycle.as_millis()
                ));
                break;
            }
            queued.push(spawn_queued(t, pool, i, &done_tx));
        }
        drop(done_tx);
        Cycled { gate, queued }
    }
}

/// The holders' answers: whether the gate and every blocker answered fine, and when the gate
/// gave its slot up (by the client).
struct Released {
    fine: bool,
    gate_freed: Option<Instant>,
}

impl Released {
    /// Waits for the gate, then the blockers; puts each on the timeline and requires it fine.
    async fn collect(
        t: &Target,
        c: &mut Ctx,
        plan: &Plan,
        gate: Pending,
        blockers: Vec<Pending>,
    ) -> Released {
        let mut fine = true;
        let mut gate_freed = None;
        for (what, r) in [(
            "gate",
            gate.await.unwrap_or_else(|e| Err(TaskError::Join(e))),
        )]
        .into_iter()
        .chain(join_all(blockers).await.into_iter().map(|r| ("blocker", r)))
        {
            match r {
                Ok(reply) => {
                    c.reply(t, plan.label(what), &reply);
                    if what == "gate" {
                        gate_freed = Some(reply.answered());
                    }
                    fine &= c.require(reply.ok(), || {
                        format!(
                            "{}: answered {} {}",
                            plan.label(what),
                            reply.status,
                            reply.code()
                        )
                    });
                }
                Err(e) => {
                    c.fail(format!("{}: {e}", plan.label(what)));
                    fine = false;
                }
            }
        }
        Released { fine, gate_freed }
    }
}

/// The queued requests answered fine, by their send index.
struct Answered {
    replies: Vec<(usize, Reply)>,
}

impl Answered {
    /// Waits for the queued requests; puts each on the timeline and keeps those answered fine.
    async fn collect(t: &Target, c: &mut Ctx, plan: &Plan, queued: Vec<Pending>) -> Answered {
        let mut replies: Vec<(usize, Reply)> = Vec::new();
        for (i, r) in join_all(queued).await.into_iter().enumerate() {
            match r {
                Ok(reply) => {
                    c.reply(t, plan.label(&format!("queued-{i}")), &reply);
                    if c.require(reply.ok(), || {
                        format!(
                            "{}: answered {} {} (a place should have been free)",
                            plan.label(&format!("queued-{i}")),
                            reply.status,
                            reply.code()
                        )
                    }) {
                        replies.push((i, reply));
                    }
                }
                Err(e) => c.fail(format!("{}: {e}", plan.label(&format!("queued-{i}")))),
            }
        }
        Answered { replies }
    }

    /// Every one of them had to wait for the cycling slot: none can have run its hold before
    /// the gate gave that slot up. One that did was never queued (the queue is the clause's
    /// too). False, with the failure recorded, when one did not wait.
    fn waited(&self, c: &mut Ctx, plan: &Plan, gate_freed: Option<Instant>) -> bool {
        let n = plan.n;
        let waited_from = gate_freed.map(|at| at + GAP / 2);
        let early: Vec<String> = self
            .replies
            .iter()
            .filter(|(_, r)| waited_from.is_some_and(|from| r.answered() < from))
            .map(|(i, r)| {
                format!(
                    "{} answered {:.0} ms after sending, before the slot it should have waited for was free",
                    plan.label(&format!("queued-{i}")),
                    ms(r.elapsed)
                )
            })
            .collect();
        if early.is_empty() {
            return true;
        }
        fail_many(
            c,
            &format!(
                "{}: {} of {n} requests sent into a full queue did not wait",
                plan.label("trial"),
                early.len()
            ),
            &early,
        );
        false
    }

    /// The send indices, ordered by `key`.
    fn by(&self, key: impl Fn(&Reply) -> Instant) -> Vec<usize> {
        let mut v: Vec<(Instant, usize)> = self.replies.iter().map(|(i, r)| (key(r), *i)).collect();
        v.sort();
        v.into_iter().map(|(_, i)| i).collect::<Vec<usize>>()
    }

    /// The order they started in, as arrival positions ([0, 1, 2, 3] is FIFO); requires the
    /// starts the server claims (Server-Timing) to agree, and notes in `missing` each reply
    /// without them.
    fn start_order(
        &self,
        t: &Target,
        c: &mut Ctx,
        plan: &Plan,
        missing: &mut Vec<String>,
    ) -> Vec<usize> {
        // Arrival = when the client sent it; start = answered minus the equal hold, so the
        // answer order is the start order.
        let arrival = self.by(|r| r.sent);
        let started = self.by(|r| r.answered());
        let header = t.server_timing_header().to_owned();
        let before = missing.len();
        for (i, r) in &self.replies {
            if let Err(e) = r.server_timing(&header) {
                missing.push(format!("{}: {e}", plan.label(&format!("queued-{i}"))));
            }
        }
        if missing.len() == before {
            let claimed = self.by(|r| r.claimed_start().unwrap_or(r.sent));
            c.require(claimed == started, || {
                format!(
                    "{}: {header} places the starts in order {claimed:?}, the client saw {started:?}",
                    plan.label("trial")
                )
            });
        }
        // Report in arrival positions: [0, 1, 2, 3] is FIFO.
        let position = |i: usize| arrival.iter().position(|&a| a == i).unwrap_or(i);
        started.into_iter().map(position).collect()
    }
}

/// The start order a queue of `order` gives a trial's requests, as arrival positions: the queue
/// filled with `queue` requests, then, each time a place frees, the next one started by the
/// queue's order and one more sent, until `n` were sent. `None`: the queue promises no order.
fn expected_order(order: QueueOrder, queue: usize, n: usize) -> Option<Vec<usize>> {
    let mut waiting: Vec<usize> = (0..queue).collect();
    let mut started = Vec::with_capacity(n);
    let mut next = queue;
    while !waiting.is_empty() {
        let at = match order {
            QueueOrder::Fifo => 0,
            QueueOrder::Lifo => waiting.len() - 1,
            QueueOrder::Unordered => return None,
        };
        started.push(waiting.remove(at));
        if next < n {
            waiting.push(next);
            next += 1;
        }
    }
    Some(started)
}

async fn t2(t: &Arc<Target>, c: &mut Ctx) {
    if !t.expected.is_reference() {
        held::t2_held(t, c).await;
        return;
    }
    c.expected =
        "queued requests start in the order each pool's queue declares, in every trial".into();
    let mut observed = Vec::new();
    for pool in [Pool::Digitize, Pool::Export] {
        if let Some(line) = judge_pool(t, c, pool).await {
            observed.push(line);
        }
    }
    if [Pool::Digitize, Pool::Export]
        .iter()
        .all(|&p| t.queue_capacity(p) == 0)
    {
        // Nothing can wait: not applicable, with why (T3 covers the refusal), not a skip.
        c.not_applicable(
            "queue capacity is 0 in every pool: nothing waits, so there is no order to check (T3 covers the refusal)",
        );
    } else if [Pool::Digitize, Pool::Export].iter().all(|&p| {
        t.queue_capacity(p) == 0 || t.expected.pool_spec(p).queue.order == QueueOrder::Unordered
    }) {
        c.not_applicable(
            "no pool's queue promises an order (each is `unordered` or holds nothing)",
        );
    }
    c.observed = observed.join("; ");
}

/// Judges `pool`'s queue over the run's trials; the observed line, `None` when the pool cannot
/// be judged (a skip or a failure is recorded).
async fn judge_pool(t: &Arc<Target>, c: &mut Ctx, pool: Pool) -> Option<String> {
    let queue = t.queue_capacity(pool);
    if queue == 0 {
        return Some(format!(
            "{pool}: not applicable (queue capacity 0: nothing waits, T3 covers the refusal)"
        ));
    }
    let order = t.expected.pool_spec(pool).queue.order;
    let Some(expected) = expected_order(order, queue, queue + 2) else {
        return Some(format!(
            "{pool}: not applicable (its queue is `unordered`: no order is promised)"
        ));
    };
    if pool == Pool::Export
        && let Err(e) = t.design().await
    {
        c.fail(e.to_string());
        return None;
    }
    let deadline = t.deadline(pool);
    let longest = Duration::from_millis(160)
        + SPACING * queue as u32
        + GAP
        + (GAP + WORK) * (queue as u32 + 2);
    if longest * 5 / 4 > deadline {
        c.skip(format!(
            "cannot judge {pool}: a trial holds workers {} ms, too close to the {} ms deadline",
            longest.as_millis(),
            deadline.as_millis()
        ));
        return None;
    }
    let trials = t.trials.max(1);
    let mut kept = 0;
    let mut missing = Vec::new();
    for k in 0..trials {
        let Some(started) = trial(t, c, pool, k, &mut missing).await else {
            continue;
        };
        c.evidence
            .push(format!("{pool} trial {k}: start order {started:?}"));
        if c.require(started == expected, || {
            format!(
                "{pool} trial {k}: queued requests started in order {started:?}; a `{}` queue starts them in {expected:?}",
                order.as_str()
            )
        }) {
            kept += 1;
        }
    }
    fail_many(
        c,
        &format!(
            "{pool}: {} queued replies carry no {} queue and run",
            missing.len(),
            t.server_timing_header()
        ),
        &missing,
    );
    Some(format!(
        "{pool}: {kept} of {trials} trials {} ({} requests through {queue} queue place(s) each)",
        order.as_str().to_uppercase(),
        queue + 2
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIFO starts the requests in arrival order; LIFO the newest waiter each time a place frees
    /// (the last of the queue's fill, then each request sent since, then the rest of the fill,
    /// newest first); an unordered queue has no expected order.
    #[test]
    fn each_declared_order_has_its_start_order() {
        assert_eq!(
            expected_order(QueueOrder::Fifo, 2, 4),
            Some(vec![0, 1, 2, 3])
        );
        assert_eq!(
            expected_order(QueueOrder::Lifo, 2, 4),
            Some(vec![1, 2, 3, 0])
        );
        assert_eq!(
            expected_order(QueueOrder::Lifo, 3, 5),
            Some(vec![2, 3, 4, 1, 0])
        );
        assert_eq!(expected_order(QueueOrder::Unordered, 2, 4), None);
    }
}
