//! The fault proxy: a loopback listener that forwards every connection to the target through
//! one [`Fault`], one task per connection (its two directions joined in it), at most
//! [`ProxyOptions::max_connections`] at once. Dropping the [`FaultProxy`] ends the listener and
//! every connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};

use super::pump::{Link, pump};
use super::shape::Shape;
use super::spec::{Fault, Stream};
use crate::rng::SplitMix64;

/// How long the proxy waits for the target to accept a connection before it resets the
/// client's (a target that does not accept looks the same through the proxy as without it).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The bytes all connections may hold queued at once (64 MB): what bounds the proxy's memory,
/// whatever the number of connections and the pace of their writers.
const BYTE_BUDGET: usize = 64 << 20;
/// The pause after a failed `accept` (out of file descriptors), so the loop cannot spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// How the proxy draws and how much it holds.
#[derive(Debug, Clone, Copy)]
pub struct ProxyOptions {
    /// `--seed`: the same seed, the same jitter and slice sizes for the n-th connection.
    pub seed: u64,
    /// Connections forwarded at once; one more is accepted and closed at once. Must exceed
    /// what the checks open (B4 opens the contract's connection cap plus one).
    pub max_connections: usize,
}

impl Default for ProxyOptions {
    fn default() -> ProxyOptions {
        ProxyOptions {
            seed: 1,
            max_connections: 1024,
        }
    }
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// No loopback port could be bound.
    #[error("cannot listen on loopback for the fault proxy: {0}")]
    Bind(#[source] std::io::Error),
}

/// A running fault proxy; dropped, it stops listening and drops every connection.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    fault: Fault,
    accepted: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port (of `upstream`'s address family) and forwards each
    /// connection to `upstream` through `fault`.
    pub async fn start(
        upstream: SocketAddr,
        fault: Fault,
        options: ProxyOptions,
    ) -> Result<FaultProxy, ProxyError> {
        let ip: IpAddr = match upstream {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        };
        let listener = TcpListener::bind((ip, 0)).await.map_err(ProxyError::Bind)?;
        let addr = listener.local_addr().map_err(ProxyError::Bind)?;
        let accepted = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            fault,
            options,
            accepted.clone(),
        ));
        Ok(FaultProxy {
            addr,
            fault,
            accepted,
            accept,
        })
    }

    /// The address clients connect to instead of the target's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The fault every connection goes through.
    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// Connections forwarded so far: evidence that traffic went through the proxy.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // The accept task owns every connection's task: aborting it drops them all.
        self.accept.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    fault: Fault,
    options: ProxyOptions,
    accepted: Arc<AtomicU64>,
) {
    let slots = Arc::new(Semaphore::new(options.max_connections));
    let budget = Arc::new(Semaphore::new(BYTE_BUDGET));
    let mut connections = JoinSet::new();
    // Ends when the proxy is dropped (the task is aborted).
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        // Past the cap the connection is closed at once, unanswered.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let index = accepted.fetch_add(1, Ordering::Relaxed);
        let budget = budget.clone();
        connections.spawn(async move {
            connection(client, upstream, fault, (options.seed, index), budget).await;
            drop(slot);
        });
    }
}

/// Forwards one connection until both directions end or the fault resets or closes it.
async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    fault: Fault,
    (seed, index): (u64, u64),
    budget: Arc<Semaphore>,
) {
    let server = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(upstream)).await {
        Ok(Ok(server)) => server,
        _ => {
            let _ = client.set_zero_linger();
            return;
        }
    };
    // Each write leaves as its own segment: a slice must not be merged back by Nagle.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let link = Link::new(&fault);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let shape =
        |direction, n| Shape::new(&fault, direction, SplitMix64::stream(seed, 2 * index + n));
    let up = pump(
        client_read,
        server_write,
        shape(Stream::Upstream, 0),
        &link,
        budget.clone(),
    );
    let down = pump(
        server_read,
        client_write,
        shape(Stream::Downstream, 1),
        &link,
        budget,
    );
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = link.timers(&fault) => {}
    }
}
