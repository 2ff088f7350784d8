//! B3: a client that goes away frees its place within the bound, running or queued — proved by
//! the place itself: a request sent just after the bound is admitted where it would otherwise
//! be refused. The cancellation counter is a cross-check, never the evidence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, ErrorCode, MetricName, Pool};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{
    abandon, capacity_recovered, counter, drained, hold, join_all, no_temp_files, rose, settle,
    sleep_until, spawn_in,
};
use crate::checks::registry::Check;
use crate::target::Target;

pub const CHECK: Check = Check::clause(
    ClauseId::B3,
    "Every worker and every queue place is taken by requests held far longer than the bound \
     (the running ones at a different stage each). The client drops some running requests \
     (one per trial) and one queued request, then, {stop_within_ms} ms later, sends as many new \
     requests as it dropped: each must be admitted, not refused, because only a stopped worker or \
     a request gone from the queue leaves a place free. A server that keeps the work going (or \
     its place) refuses them whatever its counters say. The holds outlast the drop by the bound \
     and a margin before any deadline could free a place; if the deadline is too short for that, \
     the check says it cannot judge. Cross-checks: the cancellation counter rose by exactly the \
     number dropped, no temp file remains, and afterwards exactly the workers run at once, the \
     queue places wait and one more is refused.",
    |t, c| Box::pin(b3(t, c)),
);

/// The longest the checker allows itself between sending the first holder and dropping.
const FILL_BUDGET: Duration = Duration::from_millis(800);

async fn b3(t: &Arc<Target>, c: &mut Ctx) {
    let pool = Pool::Digitize;
    let stop = t.stop_within();
    let deadline = t.deadline(pool);
    let (workers, queue) = (t.workers(pool), t.queue_capacity(pool));
    let stages = t.stages(pool).to_vec();
    // A place freed by anything but the disconnect must come later than this after the probes.
    let margin = Duration::from_millis(2 * t.expected.tolerances.refusal_latency_ms);
    c.expected = format!(
        "a place frees within {} ms of a disconnect (running or queued): new requests sent then are admitted; counted once each, temp files gone",
        stop.as_millis()
    );
    let hold_for = deadline.min(FILL_BUDGET + stop + margin);
    let min_fill = Duration::from_millis(200);
    if hold_for < min_fill + stop + margin {
        c.skip(format!(
            "cannot judge: the {} ms deadline would free a place before the {} ms bound plus a {} ms margin could be told from it",
            deadline.as_millis(),
            stop.as_millis(),
            margin.as_millis()
        ));
        return;
    }
    let k = (t.trials.max(1) as usize).min(workers);
    let m = usize::from(queue > 0);
    // A cross-check only: a missing counter fails the clause, the client evidence still runs.
    let before = counter(t, c, MetricName::CancellationsTotal, pool).await;

    // Every worker held (at a different stage each), then every queue place.
    let first_sent = Instant::now();
    let mut running: Vec<_> = (0..workers)
        .map(|i| {
            let stage = stages[i % stages.len()];
            (
                stage,
                Instant::now(),
                spawn_in(t, pool, Some(hold(stage, hold_for.as_millis() as u64))),
            )
        })
        .collect();
    settle(t, pool, workers, 0, Duration::from_millis(300)).await;
    let middle = stages[stages.len() / 2];
    let mut queued: Vec<_> = (0..queue)
        .map(|_| {
            (
                Instant::now(),
                spawn_in(t, pool, Some(hold(middle, hold_for.as_millis() as u64))),
            )
        })
        .collect();
    settle(t, pool, workers, queue, Duration::from_millis(300)).await;
    // Let the running ones reach their held stage.
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Drop k running requests and one queued one.
    let dropped_running: Vec<_> = running.drain(..k).collect();
    let dropped_queued: Vec<_> = queued.drain(queued.len() - m..).collect();
    let dropped = Instant::now();
    let mut at_stages = Vec::new();
    for (stage, sent, task) in dropped_running {
        task.abort();
        at_stages.push(stage.as_str());
        c.cancelled_lane(format!("running (held at {stage})"), sent, dropped);
    }
    for (sent, task) in dropped_queued {
        task.abort();
        c.cancelled_lane("queued", sent, dropped);
    }
    let rest: Vec<_> = running
        .into_iter()
        .map(|(_, _, task)| task)
        .chain(queued.into_iter().map(|(_, task)| task))
        .collect();

    // No hold or deadline may free a place before the probes have been answered.
    let natural = first_sent + hold_for;
    if dropped + stop + margin > natural {
        abandon(rest).await;
        c.skip(format!(
            "cannot judge: saturating took {:.0} ms, so the holds would end too soon after the bound to tell a stop from the deadline",
            ms(dropped - first_sent)
        ));
        return;
    }

    sleep_until(dropped + stop).await;
    let n = k + m;
    let probes: Vec<_> = (0..n)
        .map(|_| spawn_in(t, pool, Some(hold(stages[0], 1))))
        .collect();
    tokio::time::sleep(margin).await;
    let after = match before {
        Some(_) => counter(t, c, MetricName::CancellationsTotal, pool).await,
        None => None,
    };
    // Done: let every held request go and collect the probes.
    abandon(rest).await;
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
    let which = if admitted == n {
        String::new()
    } else if admitted == m && k != m {
        " — the dropped running requests kept their slots".to_owned()
    } else if admitted == k && k != m {
        " — the dropped queued request kept its place".to_owned()
    } else {
        String::new()
    };
    c.require(admitted == n, || {
        format!(
            "{admitted} of {n} requests sent {} ms after dropping {k} running (at {}) and {m} queued were admitted, the rest refused{which}",
            stop.as_millis(),
            at_stages.join(", ")
        )
    });
    let name = MetricName::CancellationsTotal;
    if let (Some(before), Some(after)) = (before, after) {
        c.require(after - before == n as f64, || {
            format!("{} for {n} disconnects", rose(name, pool, after - before))
        });
    }
    if let Err(e) = drained(t, c).await {
        c.evidence
            .push(format!("busy gauge after letting every request go: {e}"));
    }
    no_temp_files(t, c, "after the disconnects").await;
    c.observed = format!(
        "{admitted} of {n} places free {} ms after dropping {k} running (at {}) and {m} queued; the counter rose by {}",
        stop.as_millis(),
        at_stages.join(", "),
        before
            .zip(after)
            .map_or("?".to_owned(), |(b, a)| (a - b).to_string())
    );
    c.evidence.push(format!(
        "saturated in {:.0} ms; holds end {:.0} ms after the probes at the earliest",
        ms(dropped - first_sent),
        ms(natural.saturating_duration_since(dropped + stop))
    ));
    capacity_recovered(t, c).await;
}
