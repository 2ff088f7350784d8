//! How an envelope's job runs once it has joined the relay pool's queue: the [`RelayDispatch`]
//! seam. The contract's way, [`Concurrent`], runs each on a task of its own, so the receive loop
//! reads the next envelope at once and a fast request never waits behind a slow one.

use std::fmt::Debug;

use futures_util::future::BoxFuture;

pub trait RelayDispatch: Debug + Send + Sync {
    /// Starts `job` (its slot wait, the request and its frames); the receive loop reads the next
    /// message when the returned future completes.
    fn run(&self, job: BoxFuture<'static, ()>) -> BoxFuture<'static, ()>;
}

#[derive(Debug)]
pub(crate) struct Concurrent;

impl RelayDispatch for Concurrent {
    // clause: R2 — a request completes while another is in flight on the same connection
    fn run(&self, job: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        tokio::spawn(job);
        Box::pin(async {})
    }
}
