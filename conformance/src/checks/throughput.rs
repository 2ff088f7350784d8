//! T1 (worker limit) and T2 (FIFO queue).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Ctx, join_all, spawn_digitize};
use crate::target::{Reply, Target};

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

pub async fn t1(t: &Arc<Target>, c: &mut Ctx) {
    let workers = t.digitize_workers();
    let queue = t.digitize_queue();
    c.expected = format!(
        "at most {workers} digitize jobs at once; the busy gauge reaches {workers} and never exceeds it"
    );
    let limit = t
        .metric("plimsoll_workers_limit", "digitize")
        .await
        .unwrap_or(f64::NAN);
    c.require(limit == workers as f64, || {
        format!("plimsoll_workers_limit is {limit}, the contract says {workers}")
    });

    let burst = workers + queue + 2;
    let hold = format!("hold={}:700", t.expected.stages.digitize[0]);
    let tasks: Vec<_> = (0..burst)
        .map(|_| spawn_digitize(t, Some(hold.clone())))
        .collect();
    let mut max_busy = 0.0f64;
    let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms);
    let started = Instant::now();
    while !tasks.iter().all(|task| task.is_finished())
        && started.elapsed() < Duration::from_secs(30)
    {
        if let Ok(v) = t.metric("plimsoll_workers_busy", "digitize").await {
            max_busy = max_busy.max(v);
        }
        tokio::time::sleep(poll).await;
    }
    let replies = join_all(tasks).await;
    let mut ok = Vec::new();
    for (i, r) in replies.iter().enumerate() {
        match r {
            Ok(reply) => {
                c.reply(format!("burst-{i}"), reply, t.request_id_header());
                if reply.status == 200 {
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

pub async fn t2(t: &Arc<Target>, c: &mut Ctx) {
    let queue = t.digitize_queue();
    c.expected = "queued requests start in arrival order (FIFO)".into();
    if queue == 0 {
        c.skip("queue capacity is 0: nothing waits, so there is no order to check (T3 covers the refusal)");
        return;
    }
    let stage = t.expected.stages.digitize[0];
    // Holders release one at a time, 150 ms apart, so each queued request starts alone.
    let (holders, first_queued) = super::occupy(t, c, |k| 500 + 150 * k as u64).await;
    let Some(first_queued) = first_queued else {
        return;
    };
    let mut queued = vec![first_queued];
    for i in 1..queue {
        queued.push(spawn_digitize(t, Some(format!("hold={stage}:100"))));
        if let Err(e) = t
            .wait_metric(
                "plimsoll_queue_depth",
                "digitize",
                Duration::from_secs(2),
                |v| v >= (i + 1) as f64,
            )
            .await
        {
            c.fail(format!("queued request {i} did not show in the queue: {e}"));
        }
    }
    for (i, r) in join_all(holders).await.iter().enumerate() {
        match r {
            Ok(reply) => c.reply(format!("holder-{i}"), reply, t.request_id_header()),
            Err(e) => c.fail(format!("holder-{i}: {e}")),
        }
    }
    let mut starts = Vec::new();
    for (i, r) in join_all(queued).await.into_iter().enumerate() {
        match r {
            Ok(reply) => {
                c.reply(format!("queued-{i}"), &reply, t.request_id_header());
                c.require(reply.status == 200, || {
                    format!("queued-{i} answered {}", reply.status)
                });
                // Worker start = sent + queue time; without Server-Timing, completion order.
                let start = match reply.timing {
                    Some((q, _)) => reply.sent + Duration::from_secs_f64(q / 1000.0),
                    None => reply.sent + reply.elapsed,
                };
                starts.push((start, i));
            }
            Err(e) => c.fail(format!("queued-{i}: {e}")),
        }
    }
    starts.sort();
    let order: Vec<usize> = starts.iter().map(|(_, i)| *i).collect();
    let arrival: Vec<usize> = (0..order.len()).collect();
    c.observed = format!("start order {order:?} for arrival order {arrival:?}");
    c.require(order == arrival, || {
        format!("started in order {order:?}, arrived in {arrival:?}")
    });
}
