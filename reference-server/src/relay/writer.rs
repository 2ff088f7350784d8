//! The one writer of a relay socket. Every frame is one WebSocket text message, written and
//! flushed under a lock held for exactly that frame, so frames of concurrent responses interleave
//! but are never split or mixed (R5). How a frame goes out is the [`FrameSender`] seam.

use std::fmt::Debug;

use futures_util::SinkExt;
use futures_util::future::BoxFuture;
use plimsoll_spec::relay::RelayResponse;
use tokio::sync::Mutex;

pub(crate) use super::socket::Gone;
use super::socket::{Outgoing, OutgoingSink};

pub struct FrameWriter {
    sink: Mutex<OutgoingSink>,
}

impl FrameWriter {
    pub fn new(sink: OutgoingSink) -> FrameWriter {
        FrameWriter {
            sink: Mutex::new(sink),
        }
    }

    /// Writes one frame as one message.
    pub async fn send(&self, frame: &RelayResponse) -> Result<(), Gone> {
        let text = serde_json::to_string(frame).map_err(|_| Gone)?;
        self.send_text(text).await
    }

    /// Writes one text message, holding the lock for that message only.
    pub async fn send_text(&self, text: String) -> Result<(), Gone> {
        let mut sink = self.sink.lock().await;
        sink.send(Outgoing::Text(text)).await
    }

    /// Says goodbye (server shutdown); errors mean the peer is already gone.
    pub async fn close(&self) {
        let mut sink = self.sink.lock().await;
        let _ = sink.send(Outgoing::Close).await;
        let _ = sink.close().await;
    }
}

/// Puts one frame of a response on the socket.
pub trait FrameSender: Debug + Send + Sync {
    /// `frame` is one of the `of` frames of its response.
    fn send<'a>(
        &'a self,
        writer: &'a FrameWriter,
        frame: &'a RelayResponse,
        of: usize,
    ) -> BoxFuture<'a, Result<(), Gone>>;
}

/// A frame is one message, written under one hold of the lock.
#[derive(Debug)]
pub(crate) struct WholeFrames;

impl FrameSender for WholeFrames {
    // clause: R5 — concurrent responses interleave whole frames only
    fn send<'a>(
        &'a self,
        writer: &'a FrameWriter,
        frame: &'a RelayResponse,
        _of: usize,
    ) -> BoxFuture<'a, Result<(), Gone>> {
        Box::pin(writer.send(frame))
    }
}
