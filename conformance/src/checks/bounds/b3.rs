//! B3: a client that goes away frees its place within the bound, running or queued — proved by
//! the place itself: a request sent just after the bound is admitted where it would otherwise
//! be refused. The cancellation counter is a cross-check, never the evidence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, Contract, ErrorCode, MetricName, Pool, Stage};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{
    Pending, TaskError, capacity_recovered, counter, drained, hold, join_all, no_temp_files, rose,
    settle, sleep_until, spawn_in,
};
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::Target;

/// B3's entry in the check registry: the evidence the docs print, and `b3`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::B3,
    "Every worker and every queue place is taken by requests held far longer than the bound \
     (the running ones at a different stage each), and one more is refused: the pool is full. \
     The client drops some running requests \
     (one per trial) and one queued request, then, {pools.digitize.cancellation.stop_within_ms} ms later, sends as many new \
     requests as it dropped: each must be admitted, not refused, because only a stopped worker or \
     a request gone from the queue leaves a place free. A server that keeps the work going (or \
     its place) refuses them whatever its counters say. The holds outlast the drop by the bound \
     and a margin before any deadline could free a place; if the deadline is too short for that, \
     the check says it cannot judge. Cross-checks: the cancellation counter rose by exactly the \
     number dropped, no temp file remains, and afterwards every worker runs a held request at \
     once and every queue place admits one that waits (no place lost). For any contract, a \
     pool that holds by a dependency the checker plays and declares its `cancellation`: a \
     request held far past the bound, dropped once its call reached the dependency, and the \
     call must close within `stop_within_ms`, seen at the dependency; then another, dropped two \
     bounds after its call arrived, whose call must still be open and the request unanswered \
     when the client leaves (a call the service ends on its own stops nothing) and close within \
     the bound after. With `[temp_files]` and `--temp-dir`, no file of either request may be \
     left in the folder by the bound.",
    |t, c| Box::pin(b3(t, c)),
)
.applies_when(applies)
.covers(&[
    "disconnect",
    "slot-lifetime",
    "failure-cleanup",
    "metric-series",
]);

/// The longest the checker allows itself between sending the first holder and dropping.
const FILL_BUDGET: Duration = Duration::from_millis(800);
/// Held requests the checker sends beyond workers + queue, looking for the refusal that shows
/// the pool is full.
const MAX_BEYOND: usize = 8;

/// B3 judges the reference surface's pools, which the checker fills through their hook, and
/// any pool that holds by a dependency and declares its cancellation, whose calls it watches.
fn applies(contract: &Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        !super::disconnect::declared(contract).is_empty(),
        "no pool declares `cancellation` with a hold by a dependency the checker plays \
         (`hold.dependency`), and the contract no reference API (`[api]`)",
    )
}

/// B3 for the reference surface, then for the pools held by a dependency.
async fn b3(t: &Arc<Target>, c: &mut Ctx) {
    if t.expected.is_reference() {
        reference_b3(t, c).await;
    }
    if super::disconnect::declared(&t.expected).is_empty() {
        return;
    }
    let part = super::disconnect::judge(t, c).await;
    c.add_part(part);
}

/// B3 in phases: saturate the pool, drop some of its requests, probe for the places they
/// freed, judge.
async fn reference_b3(t: &Arc<Target>, c: &mut Ctx) {
    let Some(plan) = Plan::new(t, c) else {
        return;
    };
    // A cross-check only: a missing counter fails the clause, the client evidence still runs.
    let before = counter(t, c, MetricName::CancellationsTotal, plan.pool).await;
    let Some(saturated) = saturate(t, c, &plan).await else {
        return;
    };
    let Some((dropped, still_held)) = drop_some(c, &plan, saturated).await else {
        return;
    };
    let probed = probe(t, c, &plan, &dropped, still_held, before).await;
    judge(t, c, &plan, &dropped, before, probed).await;
}

/// B3's durations and sizes, fixed before anything is sent: every phase times itself by them.
struct Plan {
    pool: Pool,
    /// The clause's bound: a dropped request's place must be free this long after the drop.
    stop: Duration,
    /// How much later than the probes a place freed by anything but the disconnect must come.
    margin: Duration,
    /// How long each request is held: past the bound and the margin, ending (just) before the
    /// deadline would.
    hold_for: Duration,
    stages: Vec<Stage>,
    workers: usize,
    queue: usize,
    /// How many running requests are dropped: one per trial, at most the workers.
    running_drops: usize,
}

impl Plan {
    /// The plan, or `None` (a skip, saying why) when the deadline is too short to tell a place
    /// freed by the disconnect from one freed by the deadline.
    fn new(t: &Target, c: &mut Ctx) -> Option<Plan> {
        let pool = Pool::Digitize;
        let stop = t.stop_within();
        let deadline = t.deadline(pool);
        // A place freed by anything but the disconnect must come later than this after the
        // probes.
        let margin = Duration::from_millis(2 * t.expected.tolerances.refusal_latency_ms);
        c.expected = format!(
            "a place frees within {} ms of a disconnect (running or queued): new requests sent then are admitted; counted once each, temp files gone",
            stop.as_millis()
        );
        let hold_for = deadline
            .saturating_sub(Duration::from_millis(100))
            .min(FILL_BUDGET + stop + margin);
        let min_fill = Duration::from_millis(200);
        if hold_for < min_fill + stop + margin {
            c.skip(format!(
                "cannot judge: the {} ms deadline would free a place before the {} ms bound plus a {} ms margin could be told from it",
                deadline.as_millis(),
                stop.as_millis(),
                margin.as_millis()
            ));
            return None;
        }
        let workers = t.workers(pool);
        Some(Plan {
            pool,
            stop,
            margin,
            hold_for,
            stages: t.stages(pool).to_vec(),
            workers,
            queue: t.queue_capacity(pool),
            running_drops: (t.trials.max(1) as usize).min(workers),
        })
    }

    /// The stage the queued requests are held at once they run.
    fn middle(&self) -> Stage {
        self.stages[self.stages.len() / 2]
    }
}

/// Where a held request was admitted: it decides its lane's label, and only the running ones
/// name the stage they were dropped at.
#[derive(Clone, Copy)]
enum Place {
    /// On a worker.
    Running,
    /// In one of the contract's queue places.
    Queued,
    /// Admitted past workers + queue, by a pool larger than the contract's.
    Beyond,
}

/// One request held to saturate the pool: the stage its hook holds, where it was admitted, when
/// it was sent and its pending answer.
struct Held {
    stage: Stage,
    place: Place,
    sent: Instant,
    task: Pending,
}

impl Held {
    /// Sends a request held at `stage` for the plan's hold.
    fn send(t: &Arc<Target>, plan: &Plan, stage: Stage, place: Place) -> Held {
        Held {
            stage,
            place,
            sent: Instant::now(),
            task: spawn_in(
                t,
                plan.pool,
                Some(hold(stage, plan.hold_for.as_millis() as u64)),
            ),
        }
    }

    /// Its lane's label on the timeline.
    fn label(&self) -> String {
        match self.place {
            Place::Running => format!("running (held at {})", self.stage),
            Place::Queued => "queued".to_owned(),
            Place::Beyond => "queued (beyond the contract)".to_owned(),
        }
    }
}

/// The pool taken to its limit: every place held, one more refused.
struct Saturated {
    first_sent: Instant,
    /// The running requests first, in the order sent, then the queued ones.
    held: Vec<Held>,
}

/// Holds every worker (at a different stage each), then every queue place, then one more at a
/// time until one is refused: the pool is full, so an admission after the drop can only come
/// from a place the drop freed. `None` when no refusal came: everything let go, and said why.
async fn saturate(t: &Arc<Target>, c: &mut Ctx, plan: &Plan) -> Option<Saturated> {
    let (pool, workers, queue) = (plan.pool, plan.workers, plan.queue);
    let first_sent = Instant::now();
    let mut held: Vec<Held> = (0..workers)
        .map(|i| Held::send(t, plan, plan.stages[i % plan.stages.len()], Place::Running))
        .collect();
    settle(t, pool, workers, 0, Duration::from_millis(300)).await;
    held.extend((0..queue).map(|_| Held::send(t, plan, plan.middle(), Place::Queued)));
    settle(t, pool, workers, queue, Duration::from_millis(300)).await;
    let beyond = match find_the_limit(t, c, plan, &mut held).await {
        Limit::Full { beyond } => beyond,
        limit => {
            join_all(held.into_iter().map(|h| h.task).collect()).await;
            if let Limit::NeverRefused { beyond } = limit {
                c.skip(format!(
                    "cannot judge: the pool admitted {} held requests and refused none, so no place can be seen to free (T1 judges the limit)",
                    workers + queue + beyond
                ));
            }
            return None;
        }
    };
    if beyond > 0 {
        c.evidence.push(format!(
            "the pool admitted {beyond} more held requests than workers + queue (T1 judges that); judged against the places it has"
        ));
    }
    // Let the running ones reach their held stage.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Some(Saturated { first_sent, held })
}

/// How the pool met held requests sent past its places.
enum Limit {
    /// One was refused after `beyond` more were admitted: the pool is full.
    Full { beyond: usize },
    /// `beyond` more were admitted (more than [`MAX_BEYOND`]) and none refused.
    NeverRefused { beyond: usize },
    /// One was answered otherwise: a failure, already recorded.
    Failed,
}

/// Sends held requests one at a time past the places taken, keeping those admitted in `held`,
/// until one is refused.
async fn find_the_limit(t: &Arc<Target>, c: &mut Ctx, plan: &Plan, held: &mut Vec<Held>) -> Limit {
    let mut beyond = 0;
    loop {
        match knock(t, c, plan).await {
            Knock::Refused => return Limit::Full { beyond },
            Knock::Failed => return Limit::Failed,
            Knock::Admitted(h) => held.push(h),
        }
        beyond += 1;
        if beyond > MAX_BEYOND {
            return Limit::NeverRefused { beyond };
        }
    }
}

/// What one more held request, sent to a pool that may be full, met.
enum Knock {
    /// Refused with the overloaded error at once: the pool is full.
    Refused,
    /// Not answered at once: it waits or runs.
    Admitted(Held),
    /// Answered otherwise, or not at all: a failure, already recorded.
    Failed,
}

/// Sends one more held request and waits the margin for a refusal.
async fn knock(t: &Arc<Target>, c: &mut Ctx, plan: &Plan) -> Knock {
    let mut held = Held::send(t, plan, plan.middle(), Place::Beyond);
    match tokio::time::timeout(plan.margin, &mut held.task).await {
        Ok(answered) => match answered.unwrap_or_else(|e| Err(TaskError::Join(e))) {
            Ok(reply) if t.is_error(&reply, ErrorCode::Overloaded) => {
                c.reply(t, "full", &reply);
                Knock::Refused
            }
            Ok(reply) => {
                c.reply(t, "full", &reply);
                c.fail(format!(
                    "a held request sent to a full pool answered {} {} at once",
                    reply.status,
                    reply.code()
                ));
                Knock::Failed
            }
            Err(e) => {
                c.fail(format!("a held request sent to a full pool: {e}"));
                Knock::Failed
            }
        },
        // Not answered at once: admitted (it waits or runs).
        Err(_) => Knock::Admitted(held),
    }
}

/// The requests the client went away from, and when.
struct Dropped {
    /// The stages the dropped running requests were held at, one per trial.
    running: Vec<Stage>,
    /// How many queued requests were dropped: one, or none when nothing waited.
    queued: usize,
    at: Instant,
    first_sent: Instant,
    /// When the first hold ends by itself, freeing a place without any disconnect.
    natural: Instant,
}

impl Dropped {
    /// How many places the drop must free.
    fn count(&self) -> usize {
        self.running.len() + self.queued
    }

    /// The dropped running requests' stages, as the messages list them.
    fn stages(&self) -> String {
        let stages: Vec<String> = self.running.iter().map(Stage::to_string).collect();
        stages.join(", ")
    }
}

/// Drops some running requests (the first sent, one per trial) and the last admitted one
/// (waiting in the queue); returns them with the requests still held, or `None` (a skip) when
/// saturating took so long that the holds would end too soon after the bound.
async fn drop_some(
    c: &mut Ctx,
    plan: &Plan,
    saturated: Saturated,
) -> Option<(Dropped, Vec<Pending>)> {
    let Saturated {
        first_sent,
        mut held,
    } = saturated;
    let k = plan.running_drops;
    let m = usize::from(held.len() > plan.workers);
    let last = held.len() - m;
    let dropped_queued: Vec<Held> = held.drain(last..).collect();
    let dropped_running: Vec<Held> = held.drain(..k).collect();
    let at = Instant::now();
    let running = dropped_running.iter().map(|h| h.stage).collect();
    for h in dropped_running.into_iter().chain(dropped_queued) {
        h.task.abort();
        c.cancelled_lane(h.label(), h.sent, at);
    }
    let rest: Vec<_> = held.into_iter().map(|h| h.task).collect();

    // No hold or deadline may free a place before the probes have been answered.
    let natural = first_sent + plan.hold_for;
    if at + plan.stop + plan.margin > natural {
        join_all(rest).await;
        c.skip(format!(
            "cannot judge: saturating took {:.0} ms, so the holds would end too soon after the bound to tell a stop from the deadline",
            ms(at - first_sent)
        ));
        return None;
    }
    let dropped = Dropped {
        running,
        queued: m,
        at,
        first_sent,
        natural,
    };
    Some((dropped, rest))
}

/// What the probes found: how many were admitted, and the cancellation counter after them.
struct Probed {
    admitted: usize,
    after: Option<f64>,
}

/// At the bound after the drop, sends as many requests as were dropped; reads the counter a
/// margin later, lets the held requests end by themselves, then counts the probes admitted.
async fn probe(
    t: &Arc<Target>,
    c: &mut Ctx,
    plan: &Plan,
    dropped: &Dropped,
    still_held: Vec<Pending>,
    before: Option<f64>,
) -> Probed {
    sleep_until(dropped.at + plan.stop).await;
    let probes: Vec<_> = (0..dropped.count())
        .map(|_| spawn_in(t, plan.pool, Some(hold(plan.stages[0], 1))))
        .collect();
    tokio::time::sleep(plan.margin).await;
    let after = match before {
        Some(_) => counter(t, c, MetricName::CancellationsTotal, plan.pool).await,
        None => None,
    };
    // Done: the held requests end by themselves (a disconnect would count, or leak, more
    // cancellations than the clause's), then the probes run.
    for (i, r) in join_all(still_held).await.into_iter().enumerate() {
        if let Ok(reply) = r {
            c.reply(t, format!("held-{i}"), &reply);
        }
    }
    let admitted = admitted(t, c, probes).await;
    Probed { admitted, after }
}

/// How many probes were admitted; any answer but 200 or the overloaded error fails.
async fn admitted(t: &Target, c: &mut Ctx, probes: Vec<Pending>) -> usize {
    let mut admitted = 0;
    for (i, r) in join_all(probes).await.into_iter().enumerate() {
        let label = format!("probe-{i}");
        match r {
            Ok(reply) => {
                c.reply(t, &label, &reply);
                if reply.ok() {
                    admitted += 1;
                } else if !t.is_error(&reply, ErrorCode::Overloaded) {
                    c.fail(format!(
                        "{label}: answered {} {} (expected 200)",
                        reply.status,
                        reply.code()
                    ));
                }
            }
            Err(e) => c.fail(format!("{label}: {e}")),
        }
    }
    admitted
}

/// Which dropped requests kept their places, when the probes admitted tell: `k` running and
/// `m` queued were dropped.
fn kept(admitted: usize, k: usize, m: usize) -> &'static str {
    if admitted == k + m {
        ""
    } else if admitted == m && k != m {
        " — the dropped running requests kept their slots"
    } else if admitted == k && k != m {
        " — the dropped queued request kept its place"
    } else {
        ""
    }
}

/// Requires the cancellation counter, read a margin after the probes, to have risen by exactly
/// the drops. When it has not, reads it again now that every request has ended, so the failure
/// says whether the counter is late (it caught up) or wrong.
async fn judge_counter(
    t: &Target,
    c: &mut Ctx,
    (plan, dropped): (&Plan, &Dropped),
    before: Option<f64>,
    after: Option<f64>,
) {
    let (Some(before), Some(after)) = (before, after) else {
        return;
    };
    let n = dropped.count();
    if after - before == n as f64 {
        return;
    }
    let name = MetricName::CancellationsTotal;
    let later = counter(t, c, name, plan.pool).await;
    let rose_later = later.map(|v| (v - before, dropped.at.elapsed()));
    c.fail(counter_failure(
        rose(name, plan.pool, after - before),
        (n, plan.stop + plan.margin),
        rose_later,
    ));
}

/// The counter's failure: `rose` (by the margin after the bound) for `n` disconnects, and, when
/// read again `since` the drop, whether it caught up (late) or not (wrong).
fn counter_failure(
    rose: String,
    (n, by): (usize, Duration),
    later: Option<(f64, Duration)>,
) -> String {
    let first = format!(
        "{rose} for {n} disconnects {} ms after them",
        by.as_millis()
    );
    match later {
        Some((v, since)) if v == n as f64 => format!(
            "{first}, and reached {n} only {} ms after them: late, not wrong (B3: a cancellation is counted as its job stops, and the places show the same delay)",
            since.as_millis()
        ),
        Some((v, since)) => format!(
            "{first}, and by {v} {} ms after them, once every request had ended: it does not count one cancellation per disconnect",
            since.as_millis()
        ),
        None => first,
    }
}

/// Requires a place freed per disconnect and the counter risen by exactly the drops, with no
/// temp file left; then that every place came back.
async fn judge(
    t: &Arc<Target>,
    c: &mut Ctx,
    plan: &Plan,
    dropped: &Dropped,
    before: Option<f64>,
    probed: Probed,
) {
    let stop = plan.stop;
    let (k, m, n) = (dropped.running.len(), dropped.queued, dropped.count());
    let Probed { admitted, after } = probed;
    c.require(admitted == n, || {
        format!(
            "{admitted} of {n} requests sent {} ms after dropping {k} running (at {}) and {m} queued were admitted, the rest refused{}",
            stop.as_millis(),
            dropped.stages(),
            kept(admitted, k, m)
        )
    });
    if let Err(e) = drained(t, c).await {
        c.evidence
            .push(format!("busy gauge after letting every request go: {e}"));
    }
    judge_counter(t, c, (plan, dropped), before, after).await;
    no_temp_files(t, c, "after the disconnects").await;
    c.observed = format!(
        "{admitted} of {n} places free {} ms after dropping {k} running (at {}) and {m} queued; the counter rose by {}",
        stop.as_millis(),
        dropped.stages(),
        before
            .zip(after)
            .map_or("?".to_owned(), |(b, a)| (a - b).to_string())
    );
    c.evidence.push(format!(
        "saturated in {:.0} ms; holds end {:.0} ms after the probes at the earliest",
        ms(dropped.at - dropped.first_sent),
        ms(dropped.natural.saturating_duration_since(dropped.at + stop))
    ));
    capacity_recovered(t, c).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_that_catches_up_is_called_late_and_one_that_does_not_wrong() {
        let ms = Duration::from_millis;
        let rose = || "plimsoll_cancellations_total{pool=\"digitize\"} rose by 1".to_owned();
        let late = counter_failure(rose(), (5, ms(700)), Some((5.0, ms(2100))));
        assert!(
            late.contains("reached 5 only 2100 ms after them: late, not wrong"),
            "{late}"
        );
        let wrong = counter_failure(rose(), (5, ms(700)), Some((1.0, ms(2100))));
        assert!(wrong.contains("does not count one cancellation"), "{wrong}");
        assert_eq!(
            counter_failure(rose(), (5, ms(700)), None),
            format!("{} for 5 disconnects 700 ms after them", rose())
        );
    }
}
