//! Driving the digitize pool from outside: held requests on their own tasks, filling every
//! slot until one queues, waiting for the pool to drain, and proving capacity came back after a
//! fault. Holds are test hooks built with the contract's hook grammar, never spelled by hand.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::hooks::format_hooks;
use plimsoll_spec::{HookDirective, MetricName, Pool, Stage};

use super::ctx::Ctx;
use crate::target::{Reply, Target};

pub type Pending = tokio::task::JoinHandle<Result<Reply, String>>;

/// One directive as a hook header value.
pub fn hook(directive: HookDirective) -> String {
    format_hooks(&[directive])
}

/// A hook holding `stage` open for `ms`.
pub fn hold(stage: Stage, ms: u64) -> String {
    hook(HookDirective::Hold { stage, ms })
}

/// A hook holding the first digitize stage for `ms`: the request occupies a slot, does no work.
pub fn hold_first(t: &Target, ms: u64) -> String {
    hold(t.expected.stages.digitize[0], ms)
}

/// Sends a digitize request on its own task (so it can be held open or abandoned).
pub fn spawn_digitize(t: &Arc<Target>, hook: Option<String>) -> Pending {
    let t = t.clone();
    tokio::spawn(async move { t.digitize(hook.as_deref()).await })
}

/// Waits for every task and collects the replies (a failed request becomes an error string).
pub async fn join_all(tasks: Vec<Pending>) -> Vec<Result<Reply, String>> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(
            task.await
                .unwrap_or_else(|e| Err(format!("task failed: {e}"))),
        );
    }
    out
}

/// Requires a plain digitize request (no hook) to succeed, e.g. after a fault or a delay.
pub async fn plain_request_succeeds(t: &Target, c: &mut Ctx, label: &str, what: &str) {
    match t.digitize(None).await {
        Ok(reply) => {
            c.reply(t, label, &reply);
            c.require(reply.ok(), || format!("{what} answered {}", reply.status));
        }
        Err(e) => c.fail(format!("{what}: {e}")),
    }
}

/// Waits until no more digitize workers are busy than when the check started, allowing a
/// worker twice the cancellation bound to stop.
pub async fn drained(t: &Target, c: &Ctx) -> Result<Duration, String> {
    let baseline = c.baseline_busy;
    t.wait_metric(
        MetricName::WorkersBusy,
        Pool::Digitize,
        t.stop_within() * 2,
        |v| v <= baseline,
    )
    .await
}

/// After a fault: the busy gauge drains and every slot admits work again.
pub async fn capacity_recovered(t: &Arc<Target>, c: &mut Ctx) {
    let baseline = c.baseline_busy;
    if let Err(e) = drained(t, c).await {
        c.fail(format!(
            "slots not released after the fault (busy before the check: {baseline}): {e}"
        ));
        return;
    }
    let workers = t.digitize_workers().saturating_sub(baseline as usize);
    let tasks: Vec<_> = (0..workers)
        .map(|_| spawn_digitize(t, Some(hold_first(t, 150))))
        .collect();
    let mut ok = 0;
    for task in tasks {
        if let Ok(Ok(r)) = task.await {
            ok += usize::from(r.ok());
        }
    }
    c.require(ok == workers, || {
        format!("capacity not recovered: {ok} of {workers} concurrent requests admitted")
    });
    c.evidence
        .push(format!("capacity recovered: {ok}/{workers} slots usable"));
}

/// Sends held requests one at a time until one waits in the queue, so the number of requests
/// that really run is measured rather than assumed. Returns the running holders and the one
/// that queued (None, with a failure recorded, if nothing ever queued).
pub async fn occupy(
    t: &Arc<Target>,
    c: &mut Ctx,
    hold_ms: impl Fn(usize) -> u64,
) -> (Vec<Pending>, Option<Pending>) {
    let mut running = Vec::new();
    let attempts = t.digitize_workers() + 8;
    for k in 0..attempts {
        let task = spawn_digitize(t, Some(hold_first(t, hold_ms(k))));
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let busy = t
                .metric(MetricName::WorkersBusy, Pool::Digitize)
                .await
                .unwrap_or(0.0);
            let queued = t
                .metric(MetricName::QueueDepth, Pool::Digitize)
                .await
                .unwrap_or(0.0);
            if queued >= 1.0 {
                return (running, Some(task));
            }
            if busy >= (k + 1) as f64 || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(
                t.expected.tolerances.metrics_poll_interval_ms,
            ))
            .await;
        }
        running.push(task);
    }
    c.fail(format!("nothing queued after {attempts} held requests"));
    (running, None)
}

/// Requires the implementation's temp folder to be empty, or, when the checker cannot see it,
/// the temp-files gauge to be 0.
pub async fn no_temp_files(t: &Target, c: &mut Ctx, label: &str) {
    match t.temp_entries() {
        Some(entries) => {
            c.require(entries.is_empty(), || {
                format!("{label}: temp files left: {entries:?}")
            });
        }
        None => {
            let n = t
                .metric_total(MetricName::TempFiles)
                .await
                .unwrap_or(f64::NAN);
            c.require(n == 0.0, || {
                format!("{label}: {} is {n}", MetricName::TempFiles)
            });
        }
    }
}
