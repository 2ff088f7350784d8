//! Broken admission: pools too big, the queue served newest first, a refusal that waits.

use std::time::Duration;

use futures_util::future::BoxFuture;
use plimsoll_spec::Pool;

use crate::admission::{
    Admission, Admitted, Denied, Entry, PoolSizing, QueueDiscipline, UploadFirst,
};

/// T1/R1: the listed pools let everything run.
#[derive(Debug)]
pub struct Unbounded(pub &'static [Pool]);

impl PoolSizing for Unbounded {
    fn workers(&self, pool: Pool, contract: usize) -> usize {
        if self.0.contains(&pool) {
            usize::MAX / 2
        } else {
            contract
        }
    }
}

/// T1: one slot more than the contract says.
#[derive(Debug)]
pub struct PlusOne(pub &'static [Pool]);

impl PoolSizing for PlusOne {
    fn workers(&self, pool: Pool, contract: usize) -> usize {
        contract + usize::from(self.0.contains(&pool))
    }
}

/// T2: the newest waiter first.
#[derive(Debug)]
pub struct Lifo(pub &'static [Pool]);

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
pub struct RefusalWaits;

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
