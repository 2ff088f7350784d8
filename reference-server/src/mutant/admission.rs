//! Broken admission: pools too big, the queue served newest first, a refusal that waits, a
//! Retry-After that ignores the load, a slot taken before the upload.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use plimsoll_spec::Pool;
use plimsoll_spec::model::RetryAfter;

use crate::admission::{
    Admission, Admitted, Denied, Entry, PoolSizing, QueueDiscipline, UploadFirst,
};
use crate::retry_after::{RetryAfterPolicy, WaitEstimator, whole_seconds};

/// T1/R1: the listed pools let everything run.
#[derive(Debug)]
pub(super) struct Unbounded(pub &'static [Pool]);

impl PoolSizing for Unbounded {
    fn workers(&self, pool: Pool, contract: usize) -> usize {
        if self.0.contains(&pool) {
            usize::MAX / 2
        } else {
            contract
        }
    }

    fn queue_capacity(&self, _pool: Pool, contract: usize) -> usize {
        contract
    }
}

/// T1: one slot more than the contract says.
#[derive(Debug)]
pub(super) struct PlusOne(pub &'static [Pool]);

impl PoolSizing for PlusOne {
    fn workers(&self, pool: Pool, contract: usize) -> usize {
        contract + usize::from(self.0.contains(&pool))
    }

    fn queue_capacity(&self, _pool: Pool, contract: usize) -> usize {
        contract
    }
}

/// R1: the seed's rejected alternative — a full pool refuses instead of queueing.
#[derive(Debug)]
pub(super) struct RejectWhenFull(pub &'static [Pool]);

impl PoolSizing for RejectWhenFull {
    fn workers(&self, _pool: Pool, contract: usize) -> usize {
        contract
    }

    fn queue_capacity(&self, pool: Pool, contract: usize) -> usize {
        if self.0.contains(&pool) { 0 } else { contract }
    }
}

/// T2: the newest waiter first.
#[derive(Debug)]
pub(super) struct Lifo(pub &'static [Pool]);

impl QueueDiscipline for Lifo {
    fn next(&self, pool: Pool, queued: usize) -> usize {
        if self.0.contains(&pool) {
            queued - 1
        } else {
            0
        }
    }
}

/// T3: a refusal is only answered once a slot has freed.
#[derive(Debug)]
pub(super) struct RefusalWaits;

impl Admission for RefusalWaits {
    fn admit<'a>(&'a self, entry: Entry<'a>) -> BoxFuture<'a, Result<Admitted, Denied>> {
        let pool = entry.pool;
        Box::pin(async move {
            let admitted = UploadFirst.admit(entry).await;
            if let Err(Denied::Full(_)) = admitted {
                while pool.load().0 >= pool.spec().workers {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            admitted
        })
    }
}

/// T3: Retry-After is always the same, whatever the queue waits (no estimator).
#[derive(Debug)]
pub(super) struct ConstantRetryAfter(pub u64);

impl RetryAfterPolicy for ConstantRetryAfter {
    fn estimator(&self, _pool: Pool, _t3: &RetryAfter) -> Box<dyn WaitEstimator> {
        Box::new(Constant(self.0))
    }
}

#[derive(Debug)]
struct Constant(u64);

impl WaitEstimator for Constant {
    fn record(&mut self, _wait: Duration) {}

    fn retry_after_seconds(&self, _max_seconds: u64) -> u64 {
        self.0
    }

    /// No sample changes the answer.
    fn window(&self) -> usize {
        0
    }
}

/// T3: Retry-After from another order statistic of the same window than the contract's p50.
#[derive(Debug, Clone, Copy)]
pub(super) enum Statistic {
    /// The mean of the window.
    Mean,
    /// The nearest-rank 90th percentile.
    P90,
    /// The longest wait of the window.
    Max,
}

impl Statistic {
    fn of(self, window: &VecDeque<Duration>) -> Duration {
        let mut sorted: Vec<Duration> = window.iter().copied().collect();
        sorted.sort_unstable();
        match self {
            Statistic::Mean => {
                sorted.iter().sum::<Duration>() / u32::try_from(sorted.len()).unwrap_or(u32::MAX)
            }
            Statistic::P90 => sorted[(sorted.len() * 90).div_ceil(100).max(1) - 1],
            Statistic::Max => sorted[sorted.len() - 1],
        }
    }
}

/// T3: the window, its size and rounding as the contract says, but [`Statistic`] instead of
/// the p50.
#[derive(Debug)]
pub(super) struct OtherStatistic(pub Statistic);

impl RetryAfterPolicy for OtherStatistic {
    fn estimator(&self, _pool: Pool, t3: &RetryAfter) -> Box<dyn WaitEstimator> {
        Box::new(OtherWindow {
            statistic: self.0,
            window: VecDeque::new(),
            t3: t3.clone(),
        })
    }
}

#[derive(Debug)]
struct OtherWindow {
    statistic: Statistic,
    window: VecDeque<Duration>,
    t3: RetryAfter,
}

impl WaitEstimator for OtherWindow {
    fn record(&mut self, wait: Duration) {
        if self.window.len() == self.window() {
            self.window.pop_front();
        }
        self.window.push_back(wait);
    }

    fn retry_after_seconds(&self, max_seconds: u64) -> u64 {
        let wait = if self.window.is_empty() {
            Duration::from_secs(self.t3.empty_window_seconds)
        } else {
            self.statistic.of(&self.window)
        };
        whole_seconds(wait, self.t3.min_seconds, max_seconds)
    }

    fn window(&self) -> usize {
        (self.t3.window_samples as usize).max(1)
    }
}

/// B1: the slot is taken before the body is read, so a slow upload holds a worker (and the
/// upload's time counts against the job's deadline).
#[derive(Debug)]
pub(super) struct SlotFirst;

impl Admission for SlotFirst {
    fn admit<'a>(&'a self, entry: Entry<'a>) -> BoxFuture<'a, Result<Admitted, Denied>> {
        Box::pin(async move {
            let arrived = Instant::now();
            (entry.on_arrival)(arrived);
            let deadline = arrived + entry.timeout;
            let permit = match tokio::time::timeout_at(deadline.into(), entry.pool.acquire()).await
            {
                Err(_) => return Err(Denied::QueueTimeout),
                Ok(Err(refused)) => return Err(Denied::Full(refused)),
                Ok(Ok(permit)) => permit,
            };
            // Dropping the permit on a failed upload gives the slot back.
            let upload = entry.upload.read().await?;
            Ok(Admitted {
                upload,
                permit,
                arrived,
            })
        })
    }
}
