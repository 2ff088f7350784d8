//! The accept loop (B4): caps open connections and serves each with the HTTP/1 settings that
//! close a connection whose request head does not arrive in time.
//!
//! hyper has the head timer (`header_read_timeout`, which since hyper 1.4 runs from the
//! connection's start and again after every response, so it also bounds an idle keep-alive
//! connection); it has no connection cap, so the cap is a semaphore around `accept`. The
//! connection is served by hyper's HTTP/1 builder rather than `axum::serve` because the latter
//! exposes neither setting, and rather than hyper-util's auto (HTTP/1 or 2) builder because that
//! one reads the protocol preface with no timer running: a silent client would be held for ever.
//! It sits above [`crate::http`] (it serves the API); the policy it reads is the seam
//! [`crate::connections`], below it.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use plimsoll_spec::model::Connections;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::connections::{ConnectionIo, ConnectionPolicy};
use crate::http::Api;
use crate::poll_again::PollAgain;

/// Accepts connections on `listener` and serves `app` on each until `stop` is cancelled, then
/// asks every open connection to finish its request in flight and close, and returns once they
/// have (upgraded relay sockets are no longer connections here: the server drains them).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Api,
    policy: &dyn ConnectionPolicy,
    bounds: &Connections,
    stop: CancellationToken,
) {
    let head_timeout = policy.head_timeout(bounds);
    let places = policy
        .max_connections(bounds)
        .map(|n| Arc::new(Semaphore::new(n)));
    let open = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // A failed accept (e.g. out of descriptors) concerns one connection; back off
                // briefly so a persistent error does not spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
            },
        };
        let place = match &places {
            None => None,
            Some(places) => match places.clone().try_acquire_owned() {
                Ok(place) => Some(place),
                // Over the cap: closed at once, unanswered, without touching the open ones.
                Err(_) => {
                    drop(stream);
                    continue;
                }
            },
        };
        // Each connection watches a token of its own: the task polls it every time it wakes,
        // and a child's lock is its own, where the shared token's would be taken by every
        // connection on every request (3 % of a refusal's cost, docs/benchmarks.md).
        let _ = stream.set_nodelay(true);
        open.spawn(serve_one(
            policy.io(stream, bounds),
            app.clone(),
            head_timeout,
            stop.child_token(),
            place,
        ));
    }
    open.close();
    open.wait().await;
}

async fn serve_one(
    stream: Box<dyn ConnectionIo>,
    app: Api,
    head_timeout: Option<Duration>,
    stop: CancellationToken,
    _place: Option<tokio::sync::OwnedSemaphorePermit>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout);
    let service = TowerToHyperService::new(app);
    let conn = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let conn = std::pin::pin!(conn);
    let mut conn = PollAgain::new(conn);
    tokio::select! {
        _ = &mut conn => return,
        () = stop.cancelled() => conn.get_mut().as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}
