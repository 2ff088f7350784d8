//! The service's admission: a pool of workers with a bounded queue, started in its order, and
//! what a full pool answers. A request that goes away while it waits gives up its place, and
//! one that goes away just after it was handed a worker gives the worker back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::Order;
use crate::refusal::Refusal;

/// A pool of workers with a bounded queue started in its order: the service's admission.
#[derive(Clone)]
pub(crate) struct Pool(Arc<PoolInner>);

struct PoolInner {
    workers: usize,
    places: usize,
    order: Order,
    /// How long a request may wait for a worker before it is refused (none: for ever).
    timeout: Option<Duration>,
    refusal: Refusal,
    state: Mutex<Slots>,
    /// Counts the pool's refusals (a full queue's or a wait's timeout), for `/metrics`.
    refused: prometheus_client::metrics::counter::Counter,
}

/// What a pool is doing now, for `/metrics`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Snapshot {
    /// Requests running.
    pub(crate) busy: usize,
    /// Requests waiting for a worker (not those whose client went away).
    pub(crate) waiting: usize,
    /// The pool's workers.
    pub(crate) workers: usize,
}

/// Busy workers and the requests waiting for one.
#[derive(Default)]
struct Slots {
    busy: usize,
    waiting: VecDeque<oneshot::Sender<()>>,
}

/// A worker, given back when dropped: to the next waiting request in the pool's order, else
/// to the pool.
pub(crate) struct Permit(Pool);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A waiting request; if it goes away after it was handed a worker, it gives the worker back.
struct Waiting {
    rx: oneshot::Receiver<()>,
    pool: Pool,
    done: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.done && self.rx.try_recv().is_ok() {
            self.pool.release();
        }
    }
}

impl Pool {
    pub(crate) fn new(
        workers: usize,
        places: usize,
        order: Order,
        timeout: Option<Duration>,
        (refusal, refused): (Refusal, prometheus_client::metrics::counter::Counter),
    ) -> Pool {
        Pool(Arc::new(PoolInner {
            workers,
            places,
            order,
            timeout,
            refusal,
            state: Mutex::new(Slots::default()),
            refused,
        }))
    }

    /// What the pool is doing now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let slots = self.slots();
        Snapshot {
            busy: slots.busy,
            waiting: slots.waiting.iter().filter(|tx| !tx.is_closed()).count(),
            workers: self.0.workers,
        }
    }

    fn refuse(&self) -> Refusal {
        self.0.refused.inc();
        self.0.refusal
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker at once, a place in the queue and then a worker, or the refusal: when the
    /// queue is full, or when the wait reaches the pool's timeout (its place is then left;
    /// a worker handed over at that very moment is given back).
    pub(crate) async fn acquire(&self) -> Result<Permit, Refusal> {
        let mut waiting = {
            let mut slots = self.slots();
            if slots.busy < self.0.workers {
                slots.busy += 1;
                return Ok(Permit(self.clone()));
            }
            if slots.waiting.len() >= self.0.places {
                drop(slots);
                return Err(self.refuse());
            }
            let (tx, rx) = oneshot::channel();
            slots.waiting.push_back(tx);
            Waiting {
                rx,
                pool: self.clone(),
                done: false,
            }
        };
        let handed = match self.0.timeout {
            Some(limit) => matches!(
                tokio::time::timeout(limit, &mut waiting.rx).await,
                Ok(Ok(()))
            ),
            None => (&mut waiting.rx).await.is_ok(),
        };
        if !handed {
            return Err(self.refuse()); // `waiting` gives back a worker handed meanwhile
        }
        waiting.done = true;
        Ok(Permit(self.clone()))
    }

    /// Takes a free worker for good, as a failure path that never gives its worker back does
    /// (a broken variant's; the contract's pools lose none).
    pub(crate) fn lose_worker(&self) {
        let mut slots = self.slots();
        if slots.busy < self.0.workers {
            slots.busy += 1;
        }
    }

    /// Hands the worker to the next live waiting request in the pool's order, or frees it.
    fn release(&self) {
        let mut slots = self.slots();
        loop {
            let next = match self.0.order {
                Order::Fifo => slots.waiting.pop_front(),
                Order::Lifo => slots.waiting.pop_back(),
            };
            let Some(tx) = next else {
                slots.busy -= 1;
                return;
            };
            if tx.send(()).is_ok() {
                return; // handed over: the worker stays busy
            }
            // Its client went away while it waited: the next one.
        }
    }
}
