//! B1: the contract's timeout status at the deadline, naming the stage, with the slot back and
//! the temp files gone.

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::{ClauseId, ErrorCode, MetricName, Pool, Stage};

use crate::checks::ctx::{Ctx, ms, worst_and_median};
use crate::checks::pool::{capacity_recovered, hold, join_all};
use crate::checks::registry::Check;
use crate::target::{Op, Reply, Target};

pub const CHECK: Check = Check::clause(
    ClauseId::B1,
    "Requests held at a middle stage past the digitize deadline, and an export held past its own: \
     each gets {status:timeout} `timeout` no earlier than the deadline and no later than the \
     tolerance after it, naming the held stage as `failed_stage` and exactly the stages before \
     it as `completed_stages`; the busy gauge drops within the cancellation bound, no temp file \
     remains, and every slot admits work again.",
    |t, c| Box::pin(b1(t, c)),
);

fn judge(
    t: &Target,
    c: &mut Ctx,
    label: &str,
    reply: &Reply,
    timeout_ms: u64,
    stages: &[Stage],
    held: usize,
) {
    c.reply(t, label, reply);
    let late = t.expected.tolerances.timeout_late_ms;
    let elapsed = ms(reply.elapsed);
    c.require(t.is_error(reply, ErrorCode::Timeout), || {
        format!(
            "{label}: expected {} {} after {timeout_ms} ms, got {} {} after {elapsed:.0} ms",
            t.status(ErrorCode::Timeout),
            ErrorCode::Timeout,
            reply.status,
            reply.json()["code"]
        )
    });
    c.require(elapsed >= timeout_ms as f64, || {
        format!("{label}: answered {elapsed:.0} ms, before the {timeout_ms} ms deadline")
    });
    c.require(elapsed <= (timeout_ms + late) as f64, || {
        format!("{label}: answered {elapsed:.0} ms, more than {late} ms after the {timeout_ms} ms deadline")
    });
    c.require_stages(label, &reply.json(), stages, held);
}

async fn b1(t: &Arc<Target>, c: &mut Ctx) {
    let b1 = &t.expected.clauses.b1.value;
    let late = t.expected.tolerances.timeout_late_ms;
    let stop = t.stop_within();
    c.expected = format!(
        "{} {} between {} and {} ms (export {} ms), failed_stage = the held stage, slot back within {} ms, no temp files",
        t.status(ErrorCode::Timeout),
        ErrorCode::Timeout,
        b1.digitize_timeout_ms,
        b1.digitize_timeout_ms + late,
        b1.export_timeout_ms,
        stop.as_millis()
    );
    let stages = &t.expected.stages.digitize;
    let held = stages.len() / 2; // a stage in the middle: some completed, some not
    let hook = hold(stages[held], b1.digitize_timeout_ms + 10_000);
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
            .wait_metric(MetricName::WorkersBusy, Pool::Digitize, stop, |v| v == 0.0)
            .await
        {
            Ok(took) => c
                .evidence
                .push(format!("slots back {:.0} ms after the timeouts", ms(took))),
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
        Ok(r) if r.ok() => Some(r.body),
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
        let held = 1;
        let hook = hold(export_stages[held], b1.export_timeout_ms + 10_000);
        let request = t
            .export_request(Some(&hook), design)
            .timeout(Duration::from_millis(b1.export_timeout_ms + late + 3000));
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
