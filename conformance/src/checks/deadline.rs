//! B1: 504 at the deadline, naming the stage, with the slot back and the temp files gone.

use std::sync::Arc;
use std::time::Duration;

use super::{Ctx, capacity_recovered, join_all, ms, worst_and_median};
use crate::target::{Op, Reply, Target};

fn judge(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    reply: &Reply,
    timeout_ms: u64,
    stages: &[plimsoll_spec::Stage],
    held: usize,
) {
    c.reply(label, reply, t.request_id_header());
    let late = t.expected.tolerances.timeout_late_ms;
    let elapsed = ms(reply.elapsed);
    let body = reply.json();
    c.require(reply.status == 504 && body["code"] == "timeout", || {
        format!(
            "{label}: expected 504 timeout after {timeout_ms} ms, got {} {} after {elapsed:.0} ms",
            reply.status, body["code"]
        )
    });
    c.require(elapsed >= timeout_ms as f64, || {
        format!("{label}: answered {elapsed:.0} ms, before the {timeout_ms} ms deadline")
    });
    c.require(elapsed <= (timeout_ms + late) as f64, || {
        format!("{label}: answered {elapsed:.0} ms, more than {late} ms after the {timeout_ms} ms deadline")
    });
    let stage = stages[held].as_str();
    c.require(body["failed_stage"] == stage, || {
        format!(
            "{label}: failed_stage {} instead of {stage}",
            body["failed_stage"]
        )
    });
    let before: Vec<&str> = stages[..held].iter().map(|s| s.as_str()).collect();
    c.require(
        body["completed_stages"] == serde_json::json!(before),
        || {
            format!(
                "{label}: completed_stages {} instead of {before:?}",
                body["completed_stages"]
            )
        },
    );
}

pub async fn b1(t: &Arc<Target>, c: &mut Ctx) {
    let b1 = &t.expected.clauses.b1.value;
    let late = t.expected.tolerances.timeout_late_ms;
    let stop = t.stop_within();
    c.expected = format!(
        "504 timeout between {} and {} ms (export {} ms), failed_stage = the held stage, slot back within {} ms, no temp files",
        b1.digitize_timeout_ms,
        b1.digitize_timeout_ms + late,
        b1.export_timeout_ms,
        stop.as_millis()
    );
    let stages = &t.expected.stages.digitize;
    let held = stages.len() / 2; // a stage in the middle: some completed, some not
    let hook = format!("hold={}:{}", stages[held], b1.digitize_timeout_ms + 10_000);
    // A server that ignores its deadline is not waited on for ever.
    let give_up = Duration::from_millis(b1.digitize_timeout_ms + late + 3000);
    let mut elapsed = Vec::new();
    let mut remaining = t.trials.max(1) as usize;
    let mut trial = 0;
    while remaining > 0 {
        let batch = remaining.min(t.digitize_workers());
        let tasks: Vec<_> = (0..batch)
            .map(|_| {
                let t = t.clone();
                let request = t.digitize_request(Some(&hook)).timeout(give_up);
                tokio::spawn(async move { t.send(request, Op::Digitize).await })
            })
            .collect();
        for r in join_all(tasks).await {
            match r {
                Ok(reply) => {
                    elapsed.push(ms(reply.elapsed));
                    judge(
                        t,
                        c,
                        &format!("trial-{trial}"),
                        &reply,
                        b1.digitize_timeout_ms,
                        stages,
                        held,
                    );
                }
                Err(e) => c.fail(format!(
                    "trial-{trial}: no answer within {} ms: {e}",
                    give_up.as_millis()
                )),
            }
            trial += 1;
        }
        remaining -= batch;
        match t
            .wait_metric("plimsoll_workers_busy", "digitize", stop, |v| v == 0.0)
            .await
        {
            Ok(took) => c
                .evidence
                .push(format!("slots back {:.0} ms after the 504s", ms(took))),
            Err(e) => c.fail(format!(
                "slot not released within {} ms of the deadline: {e}",
                stop.as_millis()
            )),
        }
        if let Some(entries) = t.temp_entries() {
            c.require(entries.is_empty(), || {
                format!("temp files left after the timeout: {entries:?}")
            });
        }
    }

    // Export has its own deadline.
    let export_stages = &t.expected.stages.export;
    let design = match t.digitize(None).await {
        Ok(r) if r.status == 200 => Some(r.body),
        Ok(r) => {
            c.fail(format!("could not get a design to export: {}", r.status));
            None
        }
        Err(e) => {
            c.fail(format!("could not get a design to export: {e}"));
            None
        }
    };
    if let Some(design) = design {
        let api = &t.expected.api.export;
        let held = 1;
        let request = t
            .client
            .post(t.url(&api.path))
            .header("content-type", api.content_types[0].as_str())
            .header(
                t.hook_header(),
                format!(
                    "hold={}:{}",
                    export_stages[held],
                    b1.export_timeout_ms + 10_000
                ),
            )
            .timeout(Duration::from_millis(b1.export_timeout_ms + late + 3000))
            .body(design);
        match t.send(request, Op::Export).await {
            Ok(reply) => {
                elapsed.push(ms(reply.elapsed));
                judge(
                    t,
                    c,
                    "export",
                    &reply,
                    b1.export_timeout_ms,
                    export_stages,
                    held,
                );
            }
            Err(e) => c.fail(format!("export: {e}")),
        }
    }
    let (worst, median) = worst_and_median(&elapsed);
    c.trials_ms = elapsed;
    c.observed = format!(
        "{} timeouts: worst answered at {worst:.0} ms, median {median:.0} ms",
        c.trials_ms.len()
    );
    capacity_recovered(t, c).await;
}
