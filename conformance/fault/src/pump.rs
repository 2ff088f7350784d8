//! One direction of one proxied connection: a reader that stamps each chunk with its due time
//! and a writer that delivers it then, cut and paced as the [`Shape`] says, with the
//! connection's shared [`Link`] deciding when both sockets are reset or closed.
//!
//! Reader and writer are joined by a queue of [`QUEUE`] chunks of at most [`CHUNK`] bytes, and
//! every queued byte holds a permit of the proxy's byte budget, so the proxy holds at most that
//! budget whatever its writers' pace (a full queue or budget stops the reading, and TCP's own
//! window slows the sender). The queue is long enough for the bandwidth-delay product of a
//! latency toxic (8 MB in flight per direction: 320 MB/s at 25 ms one way), so latency does
//! not also cap throughput.
//!
//! A peer's reset travels in order with its data: the bytes it sent before are delivered,
//! then the other peer is reset, as on a real path where the RST follows the segments.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::shape::Shape;
use super::spec::{Fault, Toxic};

/// The largest chunk read at once.
const CHUNK: usize = 8 * 1024;
/// Chunks queued between reader and writer, per direction.
const QUEUE: usize = 1024;

/// What one connection's two directions share: the reset (RST both sockets), the close (FIN
/// both, `timeout`'s end) and `reset_peer`'s byte budget.
#[derive(Debug)]
pub(crate) struct Link {
    reset: CancellationToken,
    close: CancellationToken,
    budget: Option<AtomicU64>,
}

impl Link {
    /// The shared state of a connection under `fault`.
    pub(crate) fn new(fault: &Fault) -> Link {
        let bytes = match fault.toxic {
            Toxic::ResetPeer { bytes, .. } => bytes,
            _ => None,
        };
        Link {
            reset: CancellationToken::new(),
            close: CancellationToken::new(),
            budget: bytes.map(AtomicU64::new),
        }
    }

    /// Fires the fault's timers (`reset_peer`'s `timeout`, `timeout`'s close); never returns,
    /// so it is raced against the pumps.
    pub(crate) async fn timers(&self, fault: &Fault) {
        match fault.toxic {
            Toxic::ResetPeer {
                timeout: Some(t), ..
            } => {
                tokio::time::sleep(t).await;
                self.reset.cancel();
            }
            Toxic::Timeout { timeout } if !timeout.is_zero() => {
                tokio::time::sleep(timeout).await;
                self.close.cancel();
            }
            _ => {}
        }
        std::future::pending::<()>().await
    }

    /// Of a piece of `n` bytes, how many may pass before the byte budget is spent, and
    /// whether the connection is reset after them.
    fn allow(&self, n: usize, counted: bool) -> (usize, bool) {
        let Some(budget) = self.budget.as_ref().filter(|_| counted) else {
            return (n, false);
        };
        let mut granted = 0;
        let _ = budget.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            granted = left.min(n as u64);
            Some(left - granted)
        });
        (granted as usize, budget.load(Ordering::SeqCst) == 0)
    }
}

/// A chunk on its way (holding its bytes' share of the budget), or the end of the direction:
/// a FIN or an RST to pass on.
enum Item {
    Data {
        due: Instant,
        bytes: Vec<u8>,
        _held: OwnedSemaphorePermit,
    },
    End {
        due: Instant,
    },
    Reset {
        due: Instant,
    },
}

fn lock(shape: &Mutex<Shape>) -> std::sync::MutexGuard<'_, Shape> {
    shape.lock().unwrap_or_else(|e| e.into_inner())
}

/// Forwards `from` to `to` under `shape` until the direction ends, the link is reset or
/// closed, or either peer fails.
pub(crate) async fn pump(
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    shape: Shape,
    link: &Link,
    budget: Arc<Semaphore>,
) {
    let shape = Mutex::new(shape);
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::join!(
        read_side(from, tx, &shape, link, budget),
        write_side(rx, to, &shape, link)
    );
}

async fn read_side(
    mut from: OwnedReadHalf,
    tx: mpsc::Sender<Item>,
    shape: &Mutex<Shape>,
    link: &Link,
    budget: Arc<Semaphore>,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let item = tokio::select! {
            _ = link.reset.cancelled() => break,
            _ = link.close.cancelled() => break,
            item = read_item(&mut from, &mut buf, shape, &budget) => item,
        };
        let data = matches!(item, Item::Data { .. });
        if tx.send(item).await.is_err() || !data {
            break;
        }
    }
    if link.reset.is_cancelled() {
        let _ = from.as_ref().set_zero_linger();
    }
}

/// The next chunk read, stamped with its due time once the budget holds its bytes; the end,
/// or a reset (the peer reset or failed: the other peer is reset too, as it would see it).
async fn read_item(
    from: &mut OwnedReadHalf,
    buf: &mut [u8],
    shape: &Mutex<Shape>,
    budget: &Arc<Semaphore>,
) -> Item {
    let read = from.read(buf).await;
    let due = lock(shape).due(Instant::now());
    match read {
        Ok(0) => Item::End { due },
        Ok(n) => match budget.clone().acquire_many_owned(n as u32).await {
            Ok(held) => Item::Data {
                due,
                bytes: buf[..n].to_vec(),
                _held: held,
            },
            Err(_) => Item::Reset { due },
        },
        Err(_) => Item::Reset { due },
    }
}

async fn write_side(
    mut rx: mpsc::Receiver<Item>,
    mut to: OwnedWriteHalf,
    shape: &Mutex<Shape>,
    link: &Link,
) {
    let outcome = tokio::select! {
        _ = link.reset.cancelled() => Ok(()),
        _ = link.close.cancelled() => Ok(()),
        outcome = forward(&mut rx, &mut to, shape, link) => outcome,
    };
    if outcome.is_err() {
        link.reset.cancel();
    }
    if link.reset.is_cancelled() {
        // No FIN before the RST: the write half must not shut down when it is dropped.
        let _ = to.as_ref().set_zero_linger();
        to.forget();
    }
}

async fn forward(
    rx: &mut mpsc::Receiver<Item>,
    to: &mut OwnedWriteHalf,
    shape: &Mutex<Shape>,
    link: &Link,
) -> io::Result<()> {
    // Once the receiving peer is gone, the rest is read and dropped: its reset or close comes
    // back the other way, in order with what it sent.
    let mut gone = false;
    while let Some(item) = rx.recv().await {
        match item {
            Item::End { due } if lock(shape).close_resets() => {
                tokio::time::sleep_until(due).await;
                link.reset.cancel();
                return Ok(());
            }
            Item::End { due } => {
                let delay = lock(shape).close_delay();
                tokio::time::sleep_until(due + delay).await;
                return if gone { Ok(()) } else { to.shutdown().await };
            }
            Item::Reset { due } => {
                tokio::time::sleep_until(due).await;
                link.reset.cancel();
                return Ok(());
            }
            Item::Data { due, bytes, .. } => {
                tokio::time::sleep_until(due).await;
                if gone || lock(shape).drops() {
                    continue;
                }
                match write_pieces(to, &bytes, shape, link).await {
                    Ok(true) => {
                        link.reset.cancel();
                        return Ok(());
                    }
                    Ok(false) => {}
                    Err(_) => gone = true,
                }
            }
        }
    }
    Ok(())
}

/// Writes `bytes` piece by piece with the shape's pauses; true once the byte budget is spent
/// (the connection is then reset).
async fn write_pieces(
    to: &mut OwnedWriteHalf,
    mut bytes: &[u8],
    shape: &Mutex<Shape>,
    link: &Link,
) -> io::Result<bool> {
    while !bytes.is_empty() {
        let (n, pause, counted) = {
            let mut s = lock(shape);
            let (n, pause) = s.piece(bytes.len());
            (n, pause, s.counts_bytes())
        };
        let (allowed, spent) = link.allow(n, counted);
        to.write_all(&bytes[..allowed]).await?;
        if spent {
            return Ok(true);
        }
        bytes = &bytes[n..];
        if pause > Duration::ZERO {
            let at = lock(shape).pace(Instant::now(), pause);
            tokio::time::sleep_until(at).await;
        }
    }
    Ok(false)
}
