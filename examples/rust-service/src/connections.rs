//! The accept loop (B4): at most `max_connections` connections served at once, one more closed
//! at once, unanswered; and a request head within `head_timeout` of a connection's opening or of
//! its previous answer, else the connection is closed. `axum::serve` exposes neither setting, so
//! each connection is served by hyper's HTTP/1 builder, whose head timer (`header_read_timeout`)
//! runs from the connection's start and again after every answer (hyper 1.4 and later), so it
//! bounds an idle keep-alive connection too; the cap is a semaphore around `accept`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How the service bounds its connections: its configuration, which its contract's
/// `[connections]` describes.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// A request head must arrive within this of the connection's opening or of its previous
    /// answer (none: a connection may stay silent for ever, a broken variant's).
    pub head_timeout: Option<Duration>,
    /// Connections served at once (none: every connection is served, a broken variant's).
    pub max_connections: Option<usize>,
    /// Whether a closed connection's place is freed (not: the cap shrinks with every close, a
    /// broken variant's).
    pub frees_places: bool,
}

/// Accepts connections on `listener` and serves `app` on each, within `bounds`, until the
/// process ends.
pub async fn serve(listener: TcpListener, app: Router, bounds: Bounds) -> std::io::Result<()> {
    let places = bounds.max_connections.map(|n| Arc::new(Semaphore::new(n)));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // A failed accept (out of descriptors) concerns one connection: back off briefly
            // so a lasting error does not spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let place = match &places {
            None => None,
            Some(places) => match places.clone().try_acquire_owned() {
                Ok(place) => Some(place),
                // Past the cap: closed at once, unanswered, the open ones untouched.
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_one(stream, app.clone(), bounds, place));
    }
}

/// Serves one connection until it closes; its place of the cap is freed with it.
async fn serve_one(
    stream: tokio::net::TcpStream,
    app: Router,
    bounds: Bounds,
    place: Option<OwnedSemaphorePermit>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.head_timeout);
    let service = TowerToHyperService::new(app);
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if !bounds.frees_places {
        std::mem::forget(place);
    }
}
