//! B3: a client that goes away stops its worker within the bound, running or queued.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Ctx, capacity_recovered, join_all, ms, spawn_digitize, worst_and_median};
use crate::target::Target;

async fn temp_clean(t: &Target, c: &mut Ctx, label: &str) {
    match t.temp_entries() {
        Some(entries) => {
            c.require(entries.is_empty(), || {
                format!("{label}: temp files left: {entries:?}")
            });
        }
        None => {
            let n = t
                .metric("plimsoll_temp_files", "")
                .await
                .unwrap_or(f64::NAN);
            c.require(n == 0.0, || format!("{label}: plimsoll_temp_files is {n}"));
        }
    }
}

pub async fn b3(t: &Arc<Target>, c: &mut Ctx) {
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
        let before = t
            .metric("plimsoll_cancellations_total", "digitize")
            .await
            .unwrap_or(0.0);
        let stage = stages[(trial as usize) % stages.len()];
        let sent = Instant::now();
        // Held well past the bound, but not for ever: a server that ignores the disconnect
        // frees the slot by itself soon after, and the checks after this one are not poisoned.
        let task = spawn_digitize(t, Some(format!("hold={stage}:{}", stop.as_millis() * 3)));
        if let Err(e) = t
            .wait_metric(
                "plimsoll_workers_busy",
                "digitize",
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
            .wait_metric("plimsoll_workers_busy", "digitize", settle, |v| {
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
        let after = t
            .metric("plimsoll_cancellations_total", "digitize")
            .await
            .unwrap_or(0.0);
        c.require(after - before == 1.0, || {
            format!(
                "trial {trial}: cancellations_total rose by {}",
                after - before
            )
        });
        temp_clean(t, c, &format!("trial {trial}")).await;
    }

    let queue = t.digitize_queue();
    let queued_note = if queue == 0 {
        "queued case skipped: queue capacity is 0".to_owned()
    } else {
        let before = t
            .metric("plimsoll_cancellations_total", "digitize")
            .await
            .unwrap_or(0.0);
        let sent = Instant::now();
        let (holders, waiting) = super::occupy(t, c, |_| 800).await;
        let note = match waiting {
            None => "queued request never queued".to_owned(),
            Some(waiting) => {
                waiting.abort();
                c.cancelled_lane("queued", sent, Instant::now());
                match t
                    .wait_metric("plimsoll_queue_depth", "digitize", stop, |v| v == 0.0)
                    .await
                {
                    Ok(took) => {
                        let after = t
                            .metric("plimsoll_cancellations_total", "digitize")
                            .await
                            .unwrap_or(0.0);
                        c.require(after - before == 1.0, || {
                            format!("queued: cancellations_total rose by {}", after - before)
                        });
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
                c.reply(format!("holder-{i}"), reply, t.request_id_header());
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
