//! B3: a client that goes away stops its worker within the bound, running or queued.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, MetricName, Pool};

use crate::checks::ctx::{Ctx, ms, worst_and_median};
use crate::checks::pool::{
    capacity_recovered, hold, join_all, no_temp_files, occupy, spawn_digitize,
};
use crate::checks::registry::Check;
use crate::target::Target;

pub const CHECK: Check = Check::clause(
    ClauseId::B3,
    "The client drops a held request while it runs (at a different stage each trial) and one \
     while it waits in the queue: the busy gauge, or the queue depth, drops within \
     {stop_within_ms} ms, the cancellation counter rises by exactly one each time, no temp file \
     remains, and every slot admits work again.",
    |t, c| Box::pin(b3(t, c)),
);

async fn cancellations(t: &Target) -> f64 {
    t.metric(MetricName::CancellationsTotal, Pool::Digitize)
        .await
        .unwrap_or(0.0)
}

/// Requires the cancellation counter to have risen by exactly one since `before`.
async fn require_counted(t: &Target, c: &mut Ctx, label: &str, before: f64) {
    let after = cancellations(t).await;
    c.require(after - before == 1.0, || {
        format!(
            "{label}: {} rose by {}",
            MetricName::CancellationsTotal,
            after - before
        )
    });
}

async fn b3(t: &Arc<Target>, c: &mut Ctx) {
    let stop = t.stop_within();
    c.expected = format!(
        "worker stops within {} ms of a disconnect (running or queued), counted, temp files gone",
        stop.as_millis()
    );
    let stages = &t.expected.stages.digitize;
    let settle = stop * 2;
    let baseline = c.baseline_busy;
    let mut stops = Vec::new();
    for trial in 0..t.trials.max(1) {
        let before = cancellations(t).await;
        let stage = stages[(trial as usize) % stages.len()];
        let sent = Instant::now();
        // Held well past the bound, but not for ever: a server that ignores the disconnect
        // frees the slot by itself soon after, and the checks after this one are not poisoned.
        let task = spawn_digitize(t, Some(hold(stage, stop.as_millis() as u64 * 3)));
        if let Err(e) = t
            .wait_metric(
                MetricName::WorkersBusy,
                Pool::Digitize,
                Duration::from_secs(5),
                |v| v > baseline,
            )
            .await
        {
            c.fail(format!("trial {trial}: the held request never ran: {e}"));
            task.abort();
            continue;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        task.abort();
        let dropped = Instant::now();
        c.cancelled_lane(format!("running-{trial} (held at {stage})"), sent, dropped);
        match t
            .wait_metric(MetricName::WorkersBusy, Pool::Digitize, settle, |v| {
                v <= baseline
            })
            .await
        {
            Ok(took) => {
                stops.push(ms(took));
                c.require(took <= stop, || {
                    format!(
                        "trial {trial}: worker stopped {:.0} ms after the disconnect",
                        ms(took)
                    )
                });
            }
            Err(e) => {
                stops.push(ms(settle));
                c.fail(format!(
                    "trial {trial}: worker still busy after the disconnect: {e}"
                ));
            }
        }
        let label = format!("trial {trial}");
        require_counted(t, c, &label, before).await;
        no_temp_files(t, c, &label).await;
    }

    let queue = t.digitize_queue();
    let queued_note = if queue == 0 {
        "queued case skipped: queue capacity is 0".to_owned()
    } else {
        let before = cancellations(t).await;
        let sent = Instant::now();
        let (holders, waiting) = occupy(t, c, |_| 800).await;
        let note = match waiting {
            None => "queued request never queued".to_owned(),
            Some(waiting) => {
                waiting.abort();
                c.cancelled_lane("queued", sent, Instant::now());
                match t
                    .wait_metric(MetricName::QueueDepth, Pool::Digitize, stop, |v| v == 0.0)
                    .await
                {
                    Ok(took) => {
                        require_counted(t, c, "queued", before).await;
                        format!(
                            "queued request left the queue {:.0} ms after the disconnect",
                            ms(took)
                        )
                    }
                    Err(e) => {
                        c.fail(format!(
                            "queued request still queued after the disconnect: {e}"
                        ));
                        "queued request stayed queued".to_owned()
                    }
                }
            }
        };
        for (i, r) in join_all(holders).await.iter().enumerate() {
            if let Ok(reply) = r {
                c.reply(t, format!("holder-{i}"), reply);
            }
        }
        note
    };
    let (worst, median) = worst_and_median(&stops);
    c.trials_ms = stops;
    c.observed = format!(
        "running: worker stopped after worst {worst:.0} ms, median {median:.0} ms; {queued_note}"
    );
    capacity_recovered(t, c).await;
}
