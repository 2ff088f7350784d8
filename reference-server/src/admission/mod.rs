//! Admission control (T1–T3): a bounded pool of worker slots with a bounded queue in front of
//! it. A request either gets a slot now, waits in the queue for one, or is refused at once with
//! the Retry-After the estimator computes. Slots are [`Permit`]s, released on drop, so a job gives
//! its slot back exactly when its worker stops, whatever the exit path.
//!
//! The pieces a broken variant may swap are seams here: how many slots a pool gets
//! ([`PoolSizing`]), which waiter a freed slot goes to ([`QueueDiscipline`]) and how an HTTP
//! request comes to hold a slot ([`Admission`]).

mod entry;
mod policy;
mod refusals;
mod slot;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use plimsoll_spec::Pool;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::oneshot;

use crate::metrics::{Metrics, PoolLabel};
use crate::retry_after::WaitEstimator;
use refusals::OpenRefusals;

pub use entry::{Admission, Admitted, Denied, Entry, UploadFirst};
pub use policy::{ContractSizing, Fifo, PoolSizing, QueueDiscipline};
pub use slot::Slot;

/// Sizing and behaviour of one pool.
#[derive(Debug, Clone)]
pub struct PoolSpec {
    /// Which pool: the label of its metrics and what each seam is told.
    pub pool: Pool,
    /// Worker slots: the jobs that may run at once (T1, R1).
    pub workers: usize,
    /// Places in the queue; a request past them is refused at once (T3).
    pub queue_capacity: usize,
    /// Which waiter a freed slot goes to (T2).
    pub discipline: Arc<dyn QueueDiscipline>,
    /// Retry-After never exceeds this (the pool's timeout, in seconds).
    pub max_retry_after_s: u64,
}

/// The pool is full: answer 503 now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The Retry-After the 503 carries, in seconds (T3).
    pub retry_after_s: u64,
    /// The slots held when it was refused (the answer's detail), read under the refusal's own
    /// lock: no second trip to the pool's lock.
    pub busy: usize,
    /// The requests queued when it was refused, read likewise.
    pub queued: usize,
}

struct Waiter {
    id: u64,
    arrived: Instant,
    tx: oneshot::Sender<Permit>,
}

struct State {
    busy: usize,
    queue: VecDeque<Waiter>,
    /// Refusals whose queue-wait sample is still open: it closes when the next slot frees. At
    /// most the estimator's window of them.
    refused: OpenRefusals,
    estimator: Box<dyn WaitEstimator>,
    next_id: u64,
}

/// A pool of worker slots.
pub struct WorkerPool {
    spec: PoolSpec,
    state: Mutex<State>,
    busy: Gauge,
    depth: Gauge,
    wait: Histogram,
}

impl WorkerPool {
    /// An idle pool whose gauges are published under its pool's label from the start;
    /// `estimator` turns its queue waits into Retry-After.
    pub fn new(
        spec: PoolSpec,
        estimator: Box<dyn WaitEstimator>,
        metrics: &Metrics,
    ) -> Arc<WorkerPool> {
        let label = PoolLabel::of(spec.pool);
        metrics
            .workers_limit
            .get_or_create(&label)
            .set(i64::try_from(spec.workers).unwrap_or(i64::MAX));
        metrics.register_pool(spec.pool);
        Arc::new(WorkerPool {
            state: Mutex::new(State {
                busy: 0,
                queue: VecDeque::new(),
                refused: OpenRefusals::new(estimator.window()),
                estimator,
                next_id: 0,
            }),
            busy: metrics.workers_busy.get_or_create(&label).clone(),
            depth: metrics.queue_depth.get_or_create(&label).clone(),
            wait: metrics.queue_wait.get_or_create(&label).clone(),
            spec,
        })
    }

    /// Which pool it is, for code that holds only the `WorkerPool`.
    pub fn pool(&self) -> Pool {
        self.spec.pool
    }

    /// Its sizing, after the seams had their say (a broken variant reads the slots it got).
    pub fn spec(&self) -> &PoolSpec {
        &self.spec
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic never happens while the lock is held; recover the data regardless.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// (busy, queued) right now.
    pub fn load(&self) -> (usize, usize) {
        let st = self.lock();
        (st.busy, st.queue.len())
    }

    /// The Retry-After a refusal would carry now, without counting one (B5's refusals ask for
    /// no slot, so they add no sample).
    pub fn retry_after_s(&self) -> u64 {
        self.lock()
            .estimator
            .retry_after_seconds(self.spec.max_retry_after_s)
    }

    /// Takes a slot: at once if one is free and nobody is waiting, after waiting in the queue if
    /// there is room, otherwise refused immediately. Dropping the returned future while queued
    /// (client gone) leaves the queue.
    pub async fn acquire(self: &Arc<Self>) -> Result<Permit, Refused> {
        let arrived = Instant::now();
        let (id, rx) = {
            let mut st = self.lock();
            // clause: T1 — at most `workers` jobs hold a slot; nobody overtakes a waiter
            if st.busy < self.spec.workers && st.queue.is_empty() {
                st.busy += 1;
                st.estimator.record(Duration::ZERO);
                self.wait.observe(0.0);
                self.publish(&st);
                return Ok(Permit::new(self.clone()));
            }
            // clause: T3 — refused at once, never after waiting for a slot
            if st.queue.len() >= self.spec.queue_capacity {
                st.refused.push(arrived);
                return Err(self.refusal(&st));
            }
            let (tx, rx) = oneshot::channel();
            let id = st.next_id;
            st.next_id += 1;
            st.queue.push_back(Waiter { id, arrived, tx });
            self.publish(&st);
            (id, rx)
        };
        let _leave = LeaveQueue { pool: self, id };
        match rx.await {
            Ok(permit) => Ok(permit),
            // Only possible if the waiter was removed without a permit, which release never does.
            Err(_) => Err(self.refusal(&self.lock())),
        }
    }

    /// The refusal `st` gives: its Retry-After and its load, read under the caller's lock.
    fn refusal(&self, st: &State) -> Refused {
        Refused {
            retry_after_s: (st.estimator).retry_after_seconds(self.spec.max_retry_after_s),
            busy: st.busy,
            queued: st.queue.len(),
        }
    }

    fn release(self: &Arc<Self>) {
        let mut st = self.lock();
        let now = Instant::now();
        let State {
            refused, estimator, ..
        } = &mut *st;
        refused.close(now, estimator.as_mut());
        loop {
            let next = match st.queue.len() {
                0 => None,
                queued => {
                    let i = self.spec.discipline.next(self.spec.pool, queued);
                    st.queue.remove(i.min(queued - 1))
                }
            };
            let Some(waiter) = next else {
                st.busy -= 1;
                break;
            };
            let wait = now - waiter.arrived;
            match waiter.tx.send(Permit::new(self.clone())) {
                Ok(()) => {
                    st.estimator.record(wait);
                    self.wait.observe(wait.as_secs_f64());
                    break;
                }
                // The waiter's future is being dropped; hand the slot to the next one.
                Err(mut orphan) => orphan.armed = false,
            }
        }
        self.publish(&st);
    }

    fn publish(&self, st: &State) {
        self.busy.set(i64::try_from(st.busy).unwrap_or(i64::MAX));
        self.depth
            .set(i64::try_from(st.queue.len()).unwrap_or(i64::MAX));
    }
}

/// Removes a waiter whose request went away before it got a slot.
struct LeaveQueue<'a> {
    pool: &'a Arc<WorkerPool>,
    id: u64,
}

impl Drop for LeaveQueue<'_> {
    fn drop(&mut self) {
        let mut st = self.pool.lock();
        st.queue.retain(|w| w.id != self.id);
        self.pool.publish(&st);
    }
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (busy, queued) = self.load();
        f.debug_struct("Pool")
            .field("pool", &self.spec.pool)
            .field("busy", &busy)
            .field("queued", &queued)
            .finish()
    }
}

/// One worker slot; the slot is released when the permit drops.
#[derive(Debug)]
pub struct Permit {
    pool: Arc<WorkerPool>,
    armed: bool,
    granted: Instant,
}

impl Permit {
    fn new(pool: Arc<WorkerPool>) -> Permit {
        Permit {
            pool,
            armed: true,
            granted: Instant::now(),
        }
    }

    /// When the slot was granted (the job's start, for Server-Timing).
    pub fn granted(&self) -> Instant {
        self.granted
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.armed {
            self.pool.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::retry_after::RetryAfterEstimator;

    /// The newest waiter first: shows that the discipline, not the queue, picks.
    #[derive(Debug)]
    struct NewestFirst;

    impl QueueDiscipline for NewestFirst {
        fn next(&self, _pool: Pool, queued: usize) -> usize {
            queued - 1
        }
    }

    fn pool(workers: usize, queue: usize, discipline: Arc<dyn QueueDiscipline>) -> Arc<WorkerPool> {
        let contract = plimsoll_spec::Contract::embedded();
        WorkerPool::new(
            PoolSpec {
                pool: Pool::Digitize,
                workers,
                queue_capacity: queue,
                discipline,
                max_retry_after_s: 60,
            },
            Box::new(RetryAfterEstimator::new(
                plimsoll_spec::model::Estimator::P50,
                64,
                1,
                1,
            )),
            &Metrics::new(contract),
        )
    }

    #[tokio::test]
    async fn refuses_beyond_workers_plus_queue_and_reuses_released_slots() {
        let p = pool(2, 0, Arc::new(Fifo));
        let a = p.acquire().await.unwrap();
        let _b = p.acquire().await.unwrap();
        assert!(p.acquire().await.is_err());
        drop(a);
        assert_eq!(p.load(), (1, 0));
        assert!(p.acquire().await.is_ok());
    }

    #[tokio::test]
    async fn queue_is_served_in_the_discipline_order() {
        let disciplines: [(Arc<dyn QueueDiscipline>, Vec<usize>); 2] = [
            (Arc::new(Fifo), vec![0, 1, 2]),
            (Arc::new(NewestFirst), vec![2, 1, 0]),
        ];
        for (discipline, expected) in disciplines {
            let p = pool(1, 3, discipline.clone());
            let first = p.acquire().await.unwrap();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let mut tasks = Vec::new();
            for i in 0..3 {
                let pool = p.clone();
                let tx = tx.clone();
                tasks.push(tokio::spawn(async move {
                    let permit = pool.acquire().await.unwrap();
                    tx.send(i).unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    drop(permit);
                }));
                while p.load().1 < i + 1 {
                    tokio::task::yield_now().await;
                }
            }
            drop(first);
            for t in tasks {
                t.await.unwrap();
            }
            let order: Vec<usize> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
            assert_eq!(order, expected, "{discipline:?}");
        }
    }

    #[tokio::test]
    async fn a_dropped_waiter_leaves_the_queue_and_loses_nothing() {
        let p = pool(1, 1, Arc::new(Fifo));
        let held = p.acquire().await.unwrap();
        let waiting = tokio::spawn({
            let p = p.clone();
            async move { p.acquire().await.map(|_| ()) }
        });
        while p.load().1 == 0 {
            tokio::task::yield_now().await;
        }
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(p.load(), (1, 0));
        drop(held);
        assert_eq!(p.load(), (0, 0));
    }

    #[tokio::test]
    async fn refusal_samples_close_when_a_slot_frees() {
        let p = pool(1, 0, Arc::new(Fifo));
        let held = p.acquire().await.unwrap();
        // Window so far: [0] (the immediate admission) → 1 s.
        for _ in 0..3 {
            assert_eq!(p.acquire().await.unwrap_err().retry_after_s, 1);
        }
        tokio::time::sleep(Duration::from_millis(1100)).await;
        drop(held);
        // The three refusals waited ~1.1 s for that slot: [0, 1.1, 1.1, 1.1] → p50 1.1 s → 2 s.
        let _held = p.acquire().await.unwrap();
        assert_eq!(p.acquire().await.unwrap_err().retry_after_s, 2);
    }

    #[tokio::test]
    async fn a_million_refusals_keep_the_pool_state_bounded() {
        let p = pool(1, 0, Arc::new(Fifo));
        let held = p.acquire().await.unwrap();
        for _ in 0..1_000_000 {
            assert!(p.acquire().await.is_err());
        }
        {
            let st = p.lock();
            // The estimator's window is 64 (see `pool`): no more samples are kept open.
            assert_eq!(st.refused.len(), 64);
            assert!(st.estimator.window() == 64);
        }
        let released = Instant::now();
        drop(held);
        let release = released.elapsed();
        assert!(p.lock().refused.is_empty());
        assert_eq!(p.load(), (0, 0));
        // Closing 64 samples, not a million (generous bound for a debug build on a busy machine).
        assert!(
            release < Duration::from_millis(50),
            "release took {release:?}"
        );
    }
}
