//! T1: the worker limit, seen by the busy gauge and by the server's own run intervals.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, MetricName, Pool};

use crate::checks::ctx::Ctx;
use crate::checks::pool::{hold_first, join_all, spawn_digitize};
use crate::checks::registry::Check;
use crate::target::{Reply, Target, series};

pub const CHECK: Check = Check::clause(
    ClauseId::T1,
    "A burst of held requests, more than workers and queue places together: the busy gauge, \
     sampled throughout, reaches {digitize_workers} and never exceeds it, the limit gauge says \
     {digitize_workers}, no more requests are admitted than workers plus queue, and the run \
     intervals the server reports per request (queue and run time) never overlap more than \
     {digitize_workers} deep.",
    |t, c| Box::pin(t1(t, c)),
);

/// The most requests whose run intervals overlap. Each interval is placed by the server's own
/// Server-Timing (`queue` after sending, lasting `run`), so response delivery delays on a busy
/// client do not stretch it; overlaps shorter than `slack` (hand-over jitter) are ignored.
fn max_overlap(replies: &[&Reply], slack: Duration) -> usize {
    let mut events: Vec<(Instant, i32)> = Vec::new();
    for r in replies {
        if let Some((queue, run)) = r.timing {
            let start = r.sent + Duration::from_secs_f64(queue / 1000.0);
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

async fn t1(t: &Arc<Target>, c: &mut Ctx) {
    let workers = t.digitize_workers();
    let queue = t.digitize_queue();
    c.expected = format!(
        "at most {workers} digitize jobs at once; the busy gauge reaches {workers} and never exceeds it"
    );
    let limit = t
        .metric(MetricName::WorkersLimit, Pool::Digitize)
        .await
        .unwrap_or(f64::NAN);
    c.require(limit == workers as f64, || {
        format!(
            "{} is {limit}, the contract says {workers}",
            series(MetricName::WorkersLimit, Pool::Digitize)
        )
    });

    let burst = workers + queue + 2;
    let tasks: Vec<_> = (0..burst)
        .map(|_| spawn_digitize(t, Some(hold_first(t, 700))))
        .collect();
    let mut max_busy = 0.0f64;
    let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms);
    let started = Instant::now();
    while !tasks.iter().all(|task| task.is_finished())
        && started.elapsed() < Duration::from_secs(30)
    {
        if let Ok(v) = t.metric(MetricName::WorkersBusy, Pool::Digitize).await {
            max_busy = max_busy.max(v);
        }
        tokio::time::sleep(poll).await;
    }
    let replies = join_all(tasks).await;
    let mut ok = Vec::new();
    for (i, r) in replies.iter().enumerate() {
        match r {
            Ok(reply) => {
                c.reply(t, format!("burst-{i}"), reply);
                if reply.ok() {
                    ok.push(reply);
                }
            }
            Err(e) => c.fail(format!("burst-{i}: {e}")),
        }
    }
    // Hand-over jitter between one request ending and the next starting is a few ms, tens under
    // load; a request that really runs alongside overlaps for the whole 700 ms hold.
    let overlap = max_overlap(&ok, Duration::from_millis(100));
    c.observed = format!(
        "busy gauge max {max_busy}; {} of {burst} admitted; at most {overlap} running at once (Server-Timing)",
        ok.len()
    );
    c.require(max_busy <= workers as f64, || {
        format!("busy gauge reached {max_busy} > {workers}")
    });
    c.require(max_busy >= workers as f64, || {
        format!("busy gauge never reached {workers} (max {max_busy})")
    });
    c.require(overlap <= workers, || {
        format!("{overlap} requests ran at once, limit {workers}")
    });
    c.require(ok.len() <= workers + queue, || {
        format!(
            "{} admitted out of a burst of {burst}; workers + queue = {}",
            ok.len(),
            workers + queue
        )
    });
}
