//! The conformance checks, one per clause, each named by its clause id. A check talks to the
//! target only through [`Target`] and records what it measured in a [`Ctx`].

mod api;
mod backpressure;
mod cancellation;
mod deadline;
mod failure;
mod invalid_input;
mod logs;
mod memory;
mod relay;
mod request_id;
mod throughput;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::target::{Reply, Target};
use crate::verdict::{CheckResult, Lane, LaneOutcome, Verdict};

/// Every check id, in the order they run. F4 and API come last: they judge every reply of the
/// run (request ids; conformance to the OpenAPI document and the problem schema).
pub const ALL: [&str; 17] = [
    "T1", "T2", "T3", "B1", "B2", "B3", "F1", "F2", "F3", "R1", "R2", "R3", "R4", "R5", "R6", "F4",
    "API",
];

/// What one check is building up while it runs.
pub struct Ctx {
    started: Instant,
    failures: Vec<String>,
    skip: Option<String>,
    pub expected: String,
    pub observed: String,
    pub evidence: Vec<String>,
    pub lanes: Vec<Lane>,
    pub trials_ms: Vec<f64>,
    /// Busy digitize workers when the check started: a check answers only for the capacity it
    /// could have lost itself.
    pub baseline_busy: f64,
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
            baseline_busy: 0.0,
            started: Instant::now(),
            failures: Vec::new(),
            skip: None,
            expected: String::new(),
            observed: String::new(),
            evidence: Vec::new(),
            lanes: Vec::new(),
            trials_ms: Vec::new(),
        }
    }

    pub fn fail(&mut self, message: impl Into<String>) {
        self.failures.push(message.into());
    }

    /// Records a failure unless `ok`.
    pub fn require(&mut self, ok: bool, message: impl FnOnce() -> String) -> bool {
        if !ok {
            self.fail(message());
        }
        ok
    }

    pub fn skip(&mut self, reason: impl Into<String>) {
        self.skip = Some(reason.into());
    }

    pub fn failed(&self) -> bool {
        !self.failures.is_empty()
    }

    pub fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64() * 1000.0
    }

    /// Adds a reply to the timeline. (Its OpenAPI/schema violations are judged by the API
    /// check, so each check fails only for its own clause.)
    pub fn reply(&mut self, label: impl Into<String>, reply: &Reply, request_id_header: &str) {
        let label = label.into();
        let outcome = match reply.status {
            200..=299 => LaneOutcome::Ok,
            503 if reply.code() == "overloaded" => LaneOutcome::Refused,
            504 => LaneOutcome::TimedOut,
            _ => LaneOutcome::Failed,
        };
        let start = self.ms(reply.sent);
        self.lanes.push(Lane {
            label,
            request_id: reply.request_id(request_id_header),
            start_ms: start,
            run_start_ms: reply.timing.map(|(queue, _)| start + queue),
            end_ms: self.ms(reply.sent + reply.elapsed),
            outcome,
            status: Some(reply.status),
        });
    }

    /// A request the checker abandoned (disconnected) at `end`.
    pub fn cancelled_lane(&mut self, label: impl Into<String>, sent: Instant, end: Instant) {
        self.lanes.push(Lane {
            label: label.into(),
            request_id: None,
            start_ms: self.ms(sent),
            run_start_ms: None,
            end_ms: self.ms(end),
            outcome: LaneOutcome::Cancelled,
            status: None,
        });
    }
}

/// Runs one check by id and turns its context into a result.
pub async fn run(id: &str, target: &Arc<Target>) -> CheckResult {
    let mut c = Ctx::new();
    let t = target;
    c.baseline_busy = t
        .metric("plimsoll_workers_busy", "digitize")
        .await
        .unwrap_or(0.0);
    match id {
        "T1" => throughput::t1(t, &mut c).await,
        "T2" => throughput::t2(t, &mut c).await,
        "T3" => backpressure::t3(t, &mut c).await,
        "B1" => deadline::b1(t, &mut c).await,
        "B2" => memory::b2(t, &mut c).await,
        "B3" => cancellation::b3(t, &mut c).await,
        "F1" => failure::f1(t, &mut c).await,
        "F2" => invalid_input::f2(t, &mut c).await,
        "F3" => logs::f3(t, &mut c).await,
        "F4" => request_id::f4(t, &mut c).await,
        "API" => api::api(t, &mut c).await,
        "R1" => relay::r1(t, &mut c).await,
        "R2" => relay::r2(t, &mut c).await,
        "R3" => relay::r3(t, &mut c).await,
        "R4" => relay::r4(t, &mut c).await,
        "R5" => relay::r5(t, &mut c).await,
        "R6" => relay::r6(t, &mut c).await,
        other => c.skip(format!("no check named {other}")),
    }
    let clause = t
        .expected
        .clause_list()
        .into_iter()
        .find(|cl| cl.id.as_str() == id);
    let title = match (&clause, id) {
        (Some(cl), _) => cl.title.to_owned(),
        (None, "API") => "Responses match the OpenAPI document and problem schema".to_owned(),
        (None, _) => id.to_owned(),
    };
    let verdict = match (c.skip.take(), c.failures.is_empty()) {
        (Some(reason), true) => Verdict::Skip(reason),
        (_, true) => Verdict::Pass,
        (_, false) => Verdict::Fail(c.failures.join("; ")),
    };
    CheckResult {
        id: id.to_owned(),
        clause: id.to_owned(),
        title,
        expected: c.expected,
        observed: c.observed,
        verdict,
        duration_ms: c.started.elapsed().as_secs_f64() * 1000.0,
        evidence: c.evidence,
        trials_ms: c.trials_ms,
        timeline: c.lanes,
    }
}

/// Sends a digitize request on its own task (so it can be held open or abandoned).
pub fn spawn_digitize(
    t: &Arc<Target>,
    hook: Option<String>,
) -> tokio::task::JoinHandle<Result<Reply, String>> {
    let t = t.clone();
    tokio::spawn(async move { t.digitize(hook.as_deref()).await })
}

/// After a fault: the busy gauge drains and every slot admits work again.
pub async fn capacity_recovered(t: &Arc<Target>, c: &mut Ctx) {
    let limit = t.stop_within() * 2;
    let baseline = c.baseline_busy;
    if let Err(e) = t
        .wait_metric("plimsoll_workers_busy", "digitize", limit, |v| {
            v <= baseline
        })
        .await
    {
        c.fail(format!(
            "slots not released after the fault (busy before the check: {baseline}): {e}"
        ));
        return;
    }
    let workers = t.digitize_workers().saturating_sub(baseline as usize);
    let hold = format!("hold={}:150", t.expected.stages.digitize[0]);
    let tasks: Vec<_> = (0..workers)
        .map(|_| spawn_digitize(t, Some(hold.clone())))
        .collect();
    let mut ok = 0;
    for task in tasks {
        if let Ok(Ok(r)) = task.await {
            ok += usize::from(r.status == 200);
        }
    }
    c.require(ok == workers, || {
        format!("capacity not recovered: {ok} of {workers} concurrent requests admitted")
    });
    c.evidence
        .push(format!("capacity recovered: {ok}/{workers} slots usable"));
}

/// Waits for every task and collects the replies (a failed request becomes an error string).
pub async fn join_all(
    tasks: Vec<tokio::task::JoinHandle<Result<Reply, String>>>,
) -> Vec<Result<Reply, String>> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(
            task.await
                .unwrap_or_else(|e| Err(format!("task failed: {e}"))),
        );
    }
    out
}

/// The worst (largest) value and the median, for trial reports.
pub fn worst_and_median(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let worst = sorted.last().copied().unwrap_or(f64::NAN);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
    (worst, median)
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Sends held requests one at a time until one waits in the queue, so the number of requests
/// that really run is measured rather than assumed. Returns the running holders and the one
/// that queued (None, with a failure recorded, if nothing ever queued).
pub async fn occupy(
    t: &Arc<Target>,
    c: &mut Ctx,
    hold_ms: impl Fn(usize) -> u64,
) -> (
    Vec<tokio::task::JoinHandle<Result<Reply, String>>>,
    Option<tokio::task::JoinHandle<Result<Reply, String>>>,
) {
    let stage = t.expected.stages.digitize[0];
    let mut running = Vec::new();
    let attempts = t.digitize_workers() + 8;
    for k in 0..attempts {
        let task = spawn_digitize(t, Some(format!("hold={stage}:{}", hold_ms(k))));
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let busy = t
                .metric("plimsoll_workers_busy", "digitize")
                .await
                .unwrap_or(0.0);
            let queued = t
                .metric("plimsoll_queue_depth", "digitize")
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
