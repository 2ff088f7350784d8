//! T2: queued requests start in arrival order.

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::{ClauseId, MetricName, Pool};

use crate::checks::ctx::Ctx;
use crate::checks::pool::{hold_first, join_all, occupy, spawn_digitize};
use crate::checks::registry::Check;
use crate::target::Target;

pub const CHECK: Check = Check::clause(
    ClauseId::T2,
    "With a queue (the contract's holds {digitize_queue_capacity} places; at 0 nothing waits, \
     the check does not apply and T3 covers the refusal), every worker is held and requests wait; \
     the holders release one at a time, so each queued request starts alone: their worker \
     starts (sent plus the queue time the server reports) come in arrival order.",
    |t, c| Box::pin(t2(t, c)),
);

async fn t2(t: &Arc<Target>, c: &mut Ctx) {
    let queue = t.digitize_queue();
    c.expected = "queued requests start in arrival order (FIFO)".into();
    if queue == 0 {
        c.not_applicable("queue capacity is 0: nothing waits, so there is no order to check (T3 covers the refusal)");
        return;
    }
    // Holders release one at a time, 150 ms apart, so each queued request starts alone.
    let (holders, first_queued) = occupy(t, c, |k| 500 + 150 * k as u64).await;
    let Some(first_queued) = first_queued else {
        return;
    };
    let mut queued = vec![first_queued];
    for i in 1..queue {
        queued.push(spawn_digitize(t, Some(hold_first(t, 100))));
        if let Err(e) = t
            .wait_metric(
                MetricName::QueueDepth,
                Pool::Digitize,
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
            Ok(reply) => c.reply(t, format!("holder-{i}"), reply),
            Err(e) => c.fail(format!("holder-{i}: {e}")),
        }
    }
    let mut starts = Vec::new();
    for (i, r) in join_all(queued).await.into_iter().enumerate() {
        match r {
            Ok(reply) => {
                c.reply(t, format!("queued-{i}"), &reply);
                c.require(reply.ok(), || {
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
