//! Broken connections that pass on a perfect network and fail only under a fault (issue
//! "the bugs only a fault reveals"): a head timer that restarts at every byte, and a server
//! that notices a client's FIN but not its RST. Each wraps the accepted socket through
//! [`ConnectionPolicy::io`], the contract's bounds otherwise kept.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use plimsoll_spec::model::Connections;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::connections::{ConnectionIo, ConnectionPolicy};

/// B4 under a trickle: the head timer is an idle timer, restarted by every byte of the head, so
/// a head sliced into pieces arriving faster than the timeout is never timed out. Silent,
/// half-sent and idle keep-alive connections (the fault-free probes) still close on time.
#[derive(Debug)]
pub(super) struct IdleHeadTimer;

impl ConnectionPolicy for IdleHeadTimer {
    fn head_timeout(&self, _contract: &Connections) -> Option<Duration> {
        None
    }

    fn max_connections(&self, contract: &Connections) -> Option<usize> {
        contract.max_connections.map(|n| n as usize)
    }

    fn io(&self, stream: TcpStream, contract: &Connections) -> Box<dyn ConnectionIo> {
        Box::new(IdleHead::new(
            stream,
            Duration::from_millis(contract.head_timeout_ms),
        ))
    }
}

/// A socket whose reads fail once no byte of an awaited head came for `idle`. A head is awaited
/// from the connection's start and after every write (a response), until its blank line.
struct IdleHead {
    inner: TcpStream,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
    /// Whether a head is awaited (the timer runs).
    awaiting: bool,
    /// The head's last three bytes so far: its blank line may straddle two reads.
    tail: Vec<u8>,
}

impl IdleHead {
    fn new(inner: TcpStream, idle: Duration) -> IdleHead {
        IdleHead {
            inner,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            awaiting: true,
            tail: Vec::new(),
        }
    }

    /// Restarts the timer: the variant's fault.
    fn restart(&mut self) {
        let at = Instant::now() + self.idle;
        self.timer.as_mut().reset(at);
    }

    /// Takes in bytes of the head: whether its blank line has come.
    fn head_ends(&mut self, bytes: &[u8]) -> bool {
        let mut seen = std::mem::take(&mut self.tail);
        seen.extend_from_slice(bytes);
        let ends = seen.windows(4).any(|w| w == b"\r\n\r\n");
        self.tail = seen[seen.len().saturating_sub(3)..].to_vec();
        ends
    }
}

impl AsyncRead for IdleHead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.awaiting && this.timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let new = buf.filled()[before..].to_vec();
        if this.awaiting && !new.is_empty() {
            this.restart();
            this.awaiting = !this.head_ends(&new);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for IdleHead {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        if n > 0 {
            // A response: the next head is awaited from here.
            this.awaiting = true;
            this.tail.clear();
            this.restart();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// B3 under a vanishing client: a reset read from the socket is taken for "nothing yet", so a
/// client whose connection is reset (killed, dropped by a NAT) never counts as gone and its job
/// runs on; a client that closes (FIN) still cancels its job.
#[derive(Debug)]
pub(super) struct ResetUnnoticed;

impl ConnectionPolicy for ResetUnnoticed {
    fn head_timeout(&self, contract: &Connections) -> Option<Duration> {
        Some(Duration::from_millis(contract.head_timeout_ms))
    }

    fn max_connections(&self, contract: &Connections) -> Option<usize> {
        contract.max_connections.map(|n| n as usize)
    }

    fn io(&self, stream: TcpStream, _contract: &Connections) -> Box<dyn ConnectionIo> {
        Box::new(DeafToResets {
            inner: stream,
            reset: false,
        })
    }
}

/// A socket whose reads never end once the peer reset it: only writes see the reset.
struct DeafToResets {
    inner: TcpStream,
    reset: bool,
}

impl AsyncRead for DeafToResets {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.reset {
            return Poll::Pending;
        }
        match ready!(Pin::new(&mut this.inner).poll_read(cx, buf)) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                this.reset = true;
                Poll::Pending
            }
            other => Poll::Ready(other),
        }
    }
}

impl AsyncWrite for DeafToResets {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
