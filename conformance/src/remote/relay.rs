//! The checker as the relay, for a bridge that dials its relay (seed 003's direction): a
//! WebSocket listener on loopback. Sockets are accepted and their handshakes completed in the
//! background as soon as the bridge dials, as a relay would, so a bridge is never left waiting on
//! a check; a check takes the bridge's newest socket. A bridge holds one socket at a time, so an
//! older one still queued is a dead one and is dropped.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinSet;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use plimsoll_fault::FaultLine;

/// A relay socket, whichever end dialled.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The path the bridge is told to dial; any path is accepted.
const PATH: &str = "/relay";
/// A bridge that opens a TCP connection but never completes its handshake is dropped after this.
const HANDSHAKE: Duration = Duration::from_secs(3);
/// Sockets accepted but not yet taken by a check, and handshakes in progress at once: beyond
/// them a new socket is dropped, and further connections wait in the kernel's backlog, so a
/// bridge that dials in a loop cannot grow the checker's memory or its tasks.
const WAITING: usize = 8;
/// Sockets carried through a fault at once: a bridge holds one, and a dropped one lingers only
/// until the fault has delivered its close; beyond this a new connection is closed at once.
const CARRIED: usize = 4 * WAITING;

/// Why no bridge's socket came.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The listener's accept loop has ended: no socket will come.
    #[error("the relay at {url} stopped accepting")]
    Stopped {
        /// The URL the bridge dials.
        url: String,
    },
    /// No bridge completed a handshake within the limit.
    #[error("no bridge dialled the relay at {url} within {:.1} s", .limit.as_secs_f64())]
    Nobody {
        /// The URL the bridge dials.
        url: String,
        /// How long the checker waited.
        limit: Duration,
    },
}

/// Where the checker listens as the relay, and the fault the bridge's sockets cross there (a
/// run's `--relay-listen` and `--fault`, as the binary reads them).
#[derive(Debug, Clone)]
pub struct RelayEnd {
    /// The address to listen on (port 0: a free one).
    pub addr: SocketAddr,
    /// The run's fault, if any.
    pub line: Option<FaultLine>,
}

impl RelayEnd {
    /// The listener.
    pub async fn listen(self) -> std::io::Result<RelayListener> {
        RelayListener::bind_through(self.addr, self.line).await
    }
}

/// A bridge's socket, with when its handshake completed.
pub struct Dialled {
    /// The socket, its handshake done: a check speaks the relay protocol on it.
    pub ws: Ws,
    /// When the handshake completed: a check that waits for the bridge to (re)dial times from it.
    pub at: Instant,
    /// The bridge's address and port on this connection.
    pub peer: SocketAddr,
}

/// The relay's listener.
pub struct RelayListener {
    url: String,
    line: Option<FaultLine>,
    ready: Mutex<Ready>,
    accepting: tokio::task::JoinHandle<()>,
}

/// Sockets whose handshake is done, not yet taken by a check.
struct Ready {
    queued: mpsc::Receiver<Dialled>,
    /// One already received from the queue by [`RelayListener::dialled`] and kept for the next
    /// check.
    kept: Option<Dialled>,
}

impl Ready {
    /// The newest socket waiting, if any; older ones are dropped.
    fn newest(&mut self) -> Option<Dialled> {
        let mut newest = self.kept.take();
        while let Ok(dialled) = self.queued.try_recv() {
            newest = Some(dialled);
        }
        newest
    }
}

impl RelayListener {
    /// Listens on `addr` (port 0: a free one) and starts accepting.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<RelayListener> {
        RelayListener::bind_through(addr, None).await
    }

    /// As [`RelayListener::bind`], with every socket the bridge dials carried through `line`
    /// when there is one: the fault sits between the bridge and the checker's end of the
    /// socket, its handshake included, and `upstream` is what the checker sends.
    pub async fn bind_through(
        addr: SocketAddr,
        line: Option<FaultLine>,
    ) -> std::io::Result<RelayListener> {
        let listener = TcpListener::bind(addr).await?;
        let url = format!("ws://{}{PATH}", listener.local_addr()?);
        let (tx, rx) = mpsc::channel(WAITING);
        Ok(RelayListener {
            url,
            line: line.clone(),
            ready: Mutex::new(Ready {
                queued: rx,
                kept: None,
            }),
            accepting: tokio::spawn(accept(listener, tx, line)),
        })
    }

    /// The URL a bridge dials.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The fault the bridge's sockets cross, if any, with how many have crossed it: the
    /// evidence that the relay's traffic went through the run's fault.
    pub fn through(&self) -> Option<(plimsoll_fault::Fault, u64)> {
        self.line
            .as_ref()
            .map(|line| (line.fault(), line.carried()))
    }

    /// The bridge's newest socket: one already accepted, or the next within `limit`.
    pub async fn next(&self, limit: Duration) -> Result<Dialled, DialError> {
        let mut ready = self.ready.lock().await;
        if let Some(dialled) = ready.newest() {
            return Ok(dialled);
        }
        match tokio::time::timeout(limit, ready.queued.recv()).await {
            Ok(Some(dialled)) => Ok(dialled),
            Ok(None) => Err(self.stopped()),
            Err(_) => Err(self.nobody(limit)),
        }
    }

    /// Waits, at most `limit`, until the bridge has dialled, and keeps its socket for the next
    /// check: a run learns that its bridge is there before the first check begins.
    pub async fn dialled(&self, limit: Duration) -> Result<Instant, DialError> {
        let mut ready = self.ready.lock().await;
        let newest = match ready.newest() {
            Some(dialled) => dialled,
            None => match tokio::time::timeout(limit, ready.queued.recv()).await {
                Ok(Some(dialled)) => dialled,
                Ok(None) => return Err(self.stopped()),
                Err(_) => return Err(self.nobody(limit)),
            },
        };
        let at = newest.at;
        ready.kept = Some(newest);
        Ok(at)
    }

    fn stopped(&self) -> DialError {
        DialError::Stopped {
            url: self.url.clone(),
        }
    }

    fn nobody(&self, limit: Duration) -> DialError {
        DialError::Nobody {
            url: self.url.clone(),
            limit,
        }
    }
}

impl Drop for RelayListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Accepts connections and completes their handshakes off the accept loop, at most
/// [`WAITING`] at once; with a `line`, each connection is first put behind the fault, and the
/// loop owns what carries it, so dropping the listener ends every carried socket.
async fn accept(listener: TcpListener, ready: mpsc::Sender<Dialled>, line: Option<FaultLine>) {
    let handshakes = std::sync::Arc::new(tokio::sync::Semaphore::new(WAITING));
    let mut carried = JoinSet::new();
    loop {
        let Ok(permit) = handshakes.clone().acquire_owned().await else {
            return;
        };
        let Ok((tcp, peer)) = listener.accept().await else {
            return;
        };
        while carried.try_join_next().is_some() {}
        let stream = match &line {
            None => tcp,
            Some(_) if carried.len() >= CARRIED => continue,
            Some(line) => match line.interpose(tcp).await {
                Ok((near, carry)) => {
                    carried.spawn(carry);
                    near
                }
                Err(_) => continue,
            },
        };
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let stream = MaybeTlsStream::Plain(stream);
            let handshake = tokio_tungstenite::accept_async(stream);
            if let Ok(Ok(ws)) = tokio::time::timeout(HANDSHAKE, handshake).await {
                let _ = ready.try_send(Dialled {
                    ws,
                    at: Instant::now(),
                    peer,
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn listener() -> RelayListener {
        RelayListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_check_takes_the_bridges_newest_socket() {
        let relay = listener().await;
        let mut dialled = Vec::new();
        for _ in 0..3 {
            let (ws, _) = tokio_tungstenite::connect_async(relay.url()).await.unwrap();
            dialled.push(local(&ws));
            // The handshake is done by the accept task; let it queue the socket.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let taken = relay.next(Duration::from_secs(1)).await.unwrap();
        assert_eq!(Some(&taken.peer), dialled.last());
        // The older two were dropped with it: nothing else is waiting.
        assert!(relay.next(Duration::from_millis(50)).await.is_err());
    }

    #[tokio::test]
    async fn a_socket_seen_before_the_first_check_is_kept_for_it() {
        let relay = listener().await;
        let (ws, _) = tokio_tungstenite::connect_async(relay.url()).await.unwrap();
        relay.dialled(Duration::from_secs(1)).await.unwrap();
        let taken = relay.next(Duration::from_millis(50)).await.unwrap();
        assert_eq!(taken.peer, local(&ws));
    }

    #[tokio::test]
    async fn no_bridge_is_an_error_within_the_limit() {
        let relay = listener().await;
        let started = Instant::now();
        let e = relay.next(Duration::from_millis(100)).await.err().unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(matches!(e, DialError::Nobody { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "no bridge dialled the relay at {} within 0.1 s",
                relay.url()
            )
        );
    }

    async fn through(spec: &str) -> RelayListener {
        let line = FaultLine::new(spec.parse().unwrap(), 1);
        RelayListener::bind_through(SocketAddr::from(([127, 0, 0, 1], 0)), Some(line))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_bridges_socket_crosses_the_fault_both_ways() {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let relay = through("latency:latency=100").await;
        let (mut bridge, _) = tokio_tungstenite::connect_async(relay.url()).await.unwrap();
        let mut checker = relay.next(Duration::from_secs(2)).await.unwrap();
        // The peer is the bridge's own end, not the checker's side of the fault.
        assert_eq!(checker.peer, local(&bridge));

        let sent = Instant::now();
        checker.ws.send(Message::text("envelope")).await.unwrap();
        assert_eq!(
            bridge.next().await.unwrap().unwrap(),
            Message::text("envelope")
        );
        let down = sent.elapsed();
        let sent = Instant::now();
        bridge.send(Message::text("frame")).await.unwrap();
        assert_eq!(
            checker.ws.next().await.unwrap().unwrap(),
            Message::text("frame")
        );
        let up = sent.elapsed();
        for (way, took) in [("to the bridge", down), ("to the checker", up)] {
            assert!(
                (Duration::from_millis(100)..Duration::from_millis(400)).contains(&took),
                "{way}: {took:?}"
            );
        }
        assert_eq!(relay.through().map(|(_, n)| n), Some(1));
    }

    /// Under `vanish`, the checker dropping its socket reaches the bridge as a reset; without a
    /// fault, as a plain close.
    #[tokio::test]
    async fn under_vanish_a_dropped_socket_reaches_the_bridge_as_a_reset() {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Error;
        for (relay, reset) in [
            (through("reset_peer:on_close=1,stream=upstream").await, true),
            (listener().await, false),
        ] {
            let (mut bridge, _) = tokio_tungstenite::connect_async(relay.url()).await.unwrap();
            drop(relay.next(Duration::from_secs(2)).await.unwrap());
            let end = tokio::time::timeout(Duration::from_secs(2), bridge.next())
                .await
                .expect("the bridge learns of the drop");
            let was_reset = matches!(
                &end,
                Some(Err(Error::Io(e))) if e.kind() == std::io::ErrorKind::ConnectionReset
            );
            assert_eq!(was_reset, reset, "{end:?}");
        }
    }

    /// The client side's local address: the peer the relay saw.
    fn local(ws: &Ws) -> SocketAddr {
        match ws.get_ref() {
            MaybeTlsStream::Plain(tcp) => tcp.local_addr().unwrap(),
            _ => unreachable!("loopback sockets are plain"),
        }
    }
}

/// Where a relay check's socket comes from, and who started the bridge: the second thing that
/// differs between the ways a relay is checked (the first is the target's
/// [`LocalHandler`](super::local::LocalHandler)). A check asks for a socket; it never asks how one
/// is had.
#[derive(Clone)]
pub enum RelaySocket {
    /// The checker dials the target's relay endpoint (an implementation whose bridge accepts its
    /// relay), through the run's fault when it has one.
    Dialled {
        /// The endpoint, `ws://` or `wss://`.
        url: String,
        /// The run's fault, as the evidence names it.
        fault: Option<String>,
    },
    /// The target's bridge dials the checker, which plays its relay (seed 003's direction).
    Accepted {
        /// The listener the bridge dials.
        listener: std::sync::Arc<RelayListener>,
        /// The bridge's process, when the checker started it (R6 stops it).
        process: Option<std::sync::Arc<super::bridge::BridgeProcess>>,
    },
}

/// Why a relay socket could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The checker plays the relay, and the target's bridge did not dial it.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The target's relay endpoint did not complete a handshake within the limit.
    #[error("connecting to {url} took more than {} s", .limit.as_secs())]
    Slow {
        /// The relay endpoint.
        url: String,
        /// How long the checker waited.
        limit: Duration,
    },
    /// The target's relay endpoint refused the connection or the handshake.
    #[error("connecting to {url}: {source}")]
    Connect {
        /// The relay endpoint.
        url: String,
        /// Why it failed.
        source: tokio_tungstenite::tungstenite::Error,
    },
}

impl RelaySocket {
    /// The target's relay endpoint at `base` (its `http(s)://` URL) and `path`, dialled by the
    /// checker.
    pub fn dialled(base: &str, path: &str, fault: Option<String>) -> RelaySocket {
        let base = if let Some(rest) = base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            base.to_owned()
        };
        RelaySocket::Dialled {
            url: format!("{base}{path}"),
            fault,
        }
    }

    /// A socket, with how long it took to have (at most `limit`): dialled to the target's relay
    /// endpoint, or the newest one the target's bridge dialled to the checker.
    pub async fn connect(&self, limit: Duration) -> Result<(Ws, Duration), SocketError> {
        let started = Instant::now();
        match self {
            RelaySocket::Accepted { listener, .. } => {
                let dialled = listener.next(limit).await?;
                Ok((dialled.ws, started.elapsed()))
            }
            RelaySocket::Dialled { url, .. } => {
                let dial = tokio_tungstenite::connect_async(url.as_str());
                match tokio::time::timeout(limit, dial).await {
                    Err(_) => Err(SocketError::Slow {
                        url: url.clone(),
                        limit,
                    }),
                    Ok(Err(source)) => Err(SocketError::Connect {
                        url: url.clone(),
                        source,
                    }),
                    Ok(Ok((ws, _))) => Ok((ws, started.elapsed())),
                }
            }
        }
    }

    /// Where the sockets come from and the fault they cross, for the evidence.
    pub fn describe(&self) -> String {
        let through =
            |fault: Option<String>| fault.map(|f| format!(" through {f}")).unwrap_or_default();
        match self {
            RelaySocket::Accepted { listener, .. } => format!(
                "the bridge's socket to {}{}",
                listener.url(),
                through(listener.through().map(|(fault, _)| fault.to_string()))
            ),
            RelaySocket::Dialled { url, fault } => format!("{url}{}", through(fault.clone())),
        }
    }

    /// How soon the next socket must come after the relay dropped one, when the bridge dials it
    /// (R6's `reconnect_within`); `None` when the checker dials.
    pub fn redial_within(&self, reconnect_within: Duration) -> Option<Duration> {
        matches!(self, RelaySocket::Accepted { .. }).then_some(reconnect_within)
    }

    /// The bridge's process, when the checker started it.
    pub fn process(&self) -> Option<&super::bridge::BridgeProcess> {
        match self {
            RelaySocket::Accepted { process, .. } => process.as_deref(),
            RelaySocket::Dialled { .. } => None,
        }
    }
}
