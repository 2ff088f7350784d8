//! How an HTTP request comes to hold a worker slot: its upload is read first (a slow upload never
//! holds a slot), then it joins its pool's queue under its deadline or is refused at once.
//! [`Admission`] is the seam; [`UploadFirst`] is the contract's way.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use super::{Permit, Refused, WorkerPool};
use crate::error::ErrorKind;
use crate::upload::{Received, Upload, UploadError};

/// What a request brings to admission.
pub struct Entry<'a> {
    /// The pool the request queues in.
    pub pool: &'a Arc<WorkerPool>,
    /// The body, not read yet: admission reads it before the request queues.
    pub upload: Upload,
    /// The pool's timeout: a request still queued this long after it arrived is timed out.
    pub timeout: Duration,
    /// Called with the arrival time when the request arrives at the pool (its upload read, about
    /// to queue): from then on a client that goes away counts as a cancellation (B3).
    pub on_arrival: &'a (dyn Fn(Instant) + Send + Sync),
}

/// A request that holds a slot.
pub struct Admitted {
    /// The body, with the share of the upload budget (B5) it holds while the job runs.
    pub upload: Received,
    /// The slot, shared with the job's worker as a [`Slot`](super::Slot) until it goes back.
    pub permit: Permit,
    /// When it joined the pool's queue: its deadline and its queue wait count from here.
    pub arrived: Instant,
}

/// Why a request got no slot.
pub enum Denied {
    /// The upload was refused (F2), before the request went near the pool.
    Upload(ErrorKind),
    /// The upload budget had no room for the body (B5), before the request went near the pool.
    OverBudget,
    /// The pool and its queue are full (T3).
    Full(Refused),
    /// The deadline passed while it waited in the queue (B1).
    QueueTimeout,
}

impl From<UploadError> for Denied {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::Rejected(kind) => Denied::Upload(kind),
            UploadError::OverBudget => Denied::OverBudget,
        }
    }
}

/// Reads the upload and takes a slot.
pub trait Admission: Debug + Send + Sync {
    /// Reads `entry`'s upload and takes a slot in its pool, or says why not.
    fn admit<'a>(&'a self, entry: Entry<'a>) -> BoxFuture<'a, Result<Admitted, Denied>>;
}

/// The whole upload first, then the queue: a slot is only ever held by a request that is ready
/// to run.
#[derive(Debug)]
pub struct UploadFirst;

impl Admission for UploadFirst {
    fn admit<'a>(&'a self, entry: Entry<'a>) -> BoxFuture<'a, Result<Admitted, Denied>> {
        Box::pin(async move {
            let upload = entry.upload.read().await?;
            let arrived = Instant::now();
            (entry.on_arrival)(arrived);
            let deadline = arrived + entry.timeout;
            match tokio::time::timeout_at(deadline.into(), entry.pool.acquire()).await {
                Err(_) => Err(Denied::QueueTimeout),
                Ok(Err(refused)) => Err(Denied::Full(refused)),
                Ok(Ok(permit)) => Ok(Admitted {
                    upload,
                    permit,
                    arrived,
                }),
            }
        })
    }
}
