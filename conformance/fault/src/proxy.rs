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
    line: FaultLine,
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
        let line = FaultLine::new(fault, options.seed);
        let accept = tokio::spawn(accept_loop(
            listener,
            upstream,
            line.clone(),
            options.max_connections,
        ));
        Ok(FaultProxy { addr, line, accept })
    }

    /// The address clients connect to instead of the target's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The fault every connection goes through.
    pub fn fault(&self) -> Fault {
        self.line.fault()
    }

    /// Connections forwarded so far: evidence that traffic went through the proxy.
    pub fn accepted(&self) -> u64 {
        self.line.carried()
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
    line: FaultLine,
    max_connections: usize,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
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
        let line = line.clone();
        connections.spawn(async move {
            connection(client, upstream, &line).await;
            drop(slot);
        });
    }
}

/// Connects to `upstream` for one accepted client and carries the connection through the line.
async fn connection(client: TcpStream, upstream: SocketAddr, line: &FaultLine) {
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(upstream)).await {
        Ok(Ok(server)) => line.carry(client, server).await,
        _ => {
            let _ = client.set_zero_linger();
        }
    }
}

/// One fault applied to connections whose two ends are open: what the proxy does to each
/// connection it accepts, and what the checker's relay listener does to each socket a bridge
/// dials ([`crate::remote::relay::RelayListener::bind_through`]). `client` is always the
/// checker's end, so `upstream` means "from the checker" whichever end dialled. Clones share the
/// byte budget and the count.
#[derive(Debug, Clone)]
pub struct FaultLine {
    fault: Fault,
    seed: u64,
    budget: Arc<Semaphore>,
    carried: Arc<AtomicU64>,
}

impl FaultLine {
    /// A line through `fault`, drawing from `seed`: the n-th connection carried draws the same
    /// jitter and slice sizes in every run of that seed.
    pub fn new(fault: Fault, seed: u64) -> FaultLine {
        FaultLine {
            fault,
            seed,
            budget: Arc::new(Semaphore::new(BYTE_BUDGET)),
            carried: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The fault every connection goes through.
    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// Connections carried so far.
    pub fn carried(&self) -> u64 {
        self.carried.load(Ordering::Relaxed)
    }

    /// Forwards between `client` (the checker's end) and `server` until both directions end or
    /// the fault resets or closes them.
    pub async fn carry(&self, client: TcpStream, server: TcpStream) {
        let index = self.carried.fetch_add(1, Ordering::Relaxed);
        let fault = &self.fault;
        // Each write leaves as its own segment: a slice must not be merged back by Nagle.
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let link = Link::new(fault);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        let shape = |direction, n| {
            Shape::new(
                fault,
                direction,
                SplitMix64::stream(self.seed, 2 * index + n),
            )
        };
        let up = pump(
            client_read,
            server_write,
            shape(Stream::Upstream, 0),
            &link,
            self.budget.clone(),
        );
        let down = pump(
            server_read,
            client_write,
            shape(Stream::Downstream, 1),
            &link,
            self.budget.clone(),
        );
        tokio::select! {
            _ = async { tokio::join!(up, down) } => {}
            _ = link.timers(fault) => {}
        }
    }

    /// Puts the line in front of `server`, a connection the target opened to the checker: the
    /// checker talks on the returned stream, and the returned future (which the caller owns, so
    /// dropping it ends the connection) carries its bytes to and from `server` through the
    /// fault. The two ends of the checker's side are a loopback pair made for it.
    pub async fn interpose(
        &self,
        server: TcpStream,
    ) -> std::io::Result<(TcpStream, impl Future<Output = ()> + Send + 'static)> {
        let ip: IpAddr = match server.local_addr()? {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        };
        let pair = TcpListener::bind((ip, 0)).await?;
        let (near, (far, peer)) =
            tokio::try_join!(TcpStream::connect(pair.local_addr()?), pair.accept())?;
        if peer != near.local_addr()? {
            return Err(std::io::Error::other(format!(
                "another connection ({peer}) reached the checker's loopback pair"
            )));
        }
        let line = self.clone();
        Ok((near, async move { line.carry(far, server).await }))
    }
}
