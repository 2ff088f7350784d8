//! B3: a client that goes away frees its place within the bound, running or queued — proved by
//! the place itself: a request sent just after the bound is admitted where it would otherwise
//! be refused. The cancellation counter is a cross-check, never the evidence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, ErrorCode, MetricName, Pool};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{
    Pending, capacity_recovered, counter, drained, hold, join_all, no_temp_files, rose, settle,
    sleep_until, spawn_in,
};
use crate::checks::registry::Check;
use crate::remote::Target;

pub const CHECK: Check = Check::clause(
    ClauseId::B3,
    "Every worker and every queue place is taken by requests held far longer than the bound \
     (the running ones at a different stage each), and one more is refused: the pool is full. \
     The client drops some running requests \
     (one per trial) and one queued request, then, {stop_within_ms} ms later, sends as many new \
     requests as it dropped: each must be admitted, not refused, because only a stopped worker or \
     a request gone from the queue leaves a place free. A server that keeps the work going (or \
     its place) refuses them whatever its counters say. The holds outlast the drop by the bound \
     and a margin before any deadline could free a place; if the deadline is too short for that, \
     the check says it cannot judge. Cross-checks: the cancellation counter rose by exactly the \
     number dropped, no temp file remains, and afterwards every worker runs a held request at \
     once and every queue place admits one that waits (no place lost).",
    |t, c| Box::pin(b3(t, c)),
);

/// The longest the checker allows itself between sending the first holder and dropping.
const FILL_BUDGET: Duration = Duration::from_millis(800);
/// Held requests the checker sends beyond workers + queue, looking for the refusal that shows
/// the pool is full.
const MAX_BEYOND: usize = 8;

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
    // Held past the bound and the margin, but ending (just) before the deadline would.
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
        return;
    }
    let long = hold_for.as_millis() as u64;
    // A cross-check only: a missing counter fails the clause, the client evidence still runs.
    let before = counter(t, c, MetricName::CancellationsTotal, pool).await;

    // Every worker held (at a different stage each), then every queue place, then one more at
    // a time until one is refused: the pool is full, so an admission after the drop can only
    // come from a place the drop freed.
    let first_sent = Instant::now();
    let mut held: Vec<(String, Instant, Pending)> = (0..workers)
        .map(|i| {
            let stage = stages[i % stages.len()];
            (
                format!("running (held at {stage})"),
                Instant::now(),
                spawn_in(t, pool, Some(hold(stage, long))),
            )
        })
        .collect();
    settle(t, pool, workers, 0, Duration::from_millis(300)).await;
    let middle = stages[stages.len() / 2];
    held.extend((0..queue).map(|_| {
        (
            "queued".to_owned(),
            Instant::now(),
            spawn_in(t, pool, Some(hold(middle, long))),
        )
    }));
    settle(t, pool, workers, queue, Duration::from_millis(300)).await;
    let mut beyond = 0;
    let full = loop {
        let sent = Instant::now();
        let mut task = spawn_in(t, pool, Some(hold(middle, long)));
        match tokio::time::timeout(margin, &mut task).await {
            Ok(answered) => match answered.unwrap_or_else(|e| Err(e.to_string())) {
                Ok(reply) if t.is_error(&reply, ErrorCode::Overloaded) => {
                    c.reply(t, "full", &reply);
                    break true;
                }
                Ok(reply) => {
                    c.reply(t, "full", &reply);
                    c.fail(format!(
                        "a held request sent to a full pool answered {} {} at once",
                        reply.status,
                        reply.code()
                    ));
                    break false;
                }
                Err(e) => {
                    c.fail(format!("a held request sent to a full pool: {e}"));
                    break false;
                }
            },
            // Not answered at once: admitted (it waits or runs).
            Err(_) => held.push(("queued (beyond the contract)".to_owned(), sent, task)),
        }
        beyond += 1;
        if beyond > MAX_BEYOND {
            break false;
        }
    };
    if !full {
        join_all(held.into_iter().map(|(_, _, task)| task).collect()).await;
        if beyond > MAX_BEYOND {
            c.skip(format!(
                "cannot judge: the pool admitted {} held requests and refused none, so no place can be seen to free (T1 judges the limit)",
                workers + queue + beyond
            ));
        }
        return;
    }
    if beyond > 0 {
        c.evidence.push(format!(
            "the pool admitted {beyond} more held requests than workers + queue (T1 judges that); judged against the places it has"
        ));
    }
    // Let the running ones reach their held stage.
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Drop k running requests (the first sent) and the last admitted one (waiting in the queue).
    let k = (t.trials.max(1) as usize).min(workers);
    let m = usize::from(held.len() > workers);
    let last = held.len() - m;
    let dropped_queued: Vec<_> = held.drain(last..).collect();
    let dropped_running: Vec<_> = held.drain(..k).collect();
    let dropped = Instant::now();
    let at_stages: Vec<String> = dropped_running
        .iter()
        .map(|(label, _, _)| {
            label
                .trim_start_matches("running (held at ")
                .trim_end_matches(')')
                .to_owned()
        })
        .collect();
    for (label, sent, task) in dropped_running.into_iter().chain(dropped_queued) {
        task.abort();
        c.cancelled_lane(label, sent, dropped);
    }
    let rest: Vec<_> = held.into_iter().map(|(_, _, task)| task).collect();

    // No hold or deadline may free a place before the probes have been answered.
    let natural = first_sent + hold_for;
    if dropped + stop + margin > natural {
        join_all(rest).await;
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
    // Done: the held requests end by themselves (a disconnect would count, or leak, more
    // cancellations than the clause's), then the probes run.
    for (i, r) in join_all(rest).await.into_iter().enumerate() {
        if let Ok(reply) = r {
            c.reply(t, format!("held-{i}"), &reply);
        }
    }
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
