//! The conformance checks, one per clause, each named by its clause id. A check talks to the
//! target only through [`Target`] and records what it measured in a [`Ctx`].

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

/// Every check id, in the order they run (F4 last among the HTTP ones: it judges every reply).
pub const ALL: [&str; 16] = [
    "T1", "T2", "T3", "B1", "B2", "B3", "F1", "F2", "F3", "R1", "R2", "R3", "R4", "R5", "R6", "F4",
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
}

impl Ctx {
    fn new() -> Ctx {
        Ctx {
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

    /// Adds a reply to the timeline and its OpenAPI/schema violations to the failures.
    pub fn reply(&mut self, label: impl Into<String>, reply: &Reply, request_id_header: &str) {
        let label = label.into();
        for v in &reply.violations {
            self.failures.push(format!("{label}: {v}"));
        }
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
        "R1" => relay::r1(t, &mut c).await,
        "R2" => relay::r2(t, &mut c).await,
        "R3" => relay::r3(t, &mut c).await,
        "R4" => relay::r4(t, &mut c).await,
        "R5" => relay::r5(t, &mut c).await,
        "R6" => relay::r6(t, &mut c).await,
        other => c.skip(format!("no check named {other}")),
    }
    let clause = t.expected.clause_list().into_iter().find(|cl| cl.id == id);
    let title = clause.as_ref().map(|cl| cl.title.to_owned()).unwrap_or_else(|| id.to_owned());
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
pub fn spawn_digitize(t: &Arc<Target>, hook: Option<String>) -> tokio::task::JoinHandle<Result<Reply, String>> {
    let t = t.clone();
    tokio::spawn(async move { t.digitize(hook.as_deref()).await })
}

/// After a fault: the busy gauge drains and every slot admits work again.
pub async fn capacity_recovered(t: &Arc<Target>, c: &mut Ctx) {
    let limit = t.stop_within() * 2;
    if let Err(e) = t.wait_metric("plimsoll_workers_busy", "digitize", limit, |v| v == 0.0).await {
        c.fail(format!("slots not released after the fault: {e}"));
        return;
    }
    let workers = t.digitize_workers();
    let hold = format!("hold={}:150", t.expected.stages.digitize[0]);
    let tasks: Vec<_> = (0..workers).map(|_| spawn_digitize(t, Some(hold.clone()))).collect();
    let mut ok = 0;
    for task in tasks {
        if let Ok(Ok(r)) = task.await {
            ok += usize::from(r.status == 200);
        }
    }
    c.require(ok == workers, || format!("capacity not recovered: {ok} of {workers} concurrent requests admitted"));
    c.evidence.push(format!("capacity recovered: {ok}/{workers} slots usable"));
}

/// Waits for every task and collects the replies (a failed request becomes an error string).
pub async fn join_all(tasks: Vec<tokio::task::JoinHandle<Result<Reply, String>>>) -> Vec<Result<Reply, String>> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.unwrap_or_else(|e| Err(format!("task failed: {e}"))));
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
