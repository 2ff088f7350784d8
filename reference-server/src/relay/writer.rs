//! The one writer of a relay socket. Every frame is one WebSocket text message, written and
//! flushed under a lock held for exactly that frame, so frames of concurrent responses interleave
//! but are never split or mixed (R5).

use axum::extract::ws::{Message, WebSocket};
use futures_util::SinkExt;
use futures_util::stream::SplitSink;
use plimsoll_spec::relay::RelayResponse;
use tokio::sync::Mutex;

/// The socket is gone: the frame was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

pub struct FrameWriter {
    sink: Mutex<SplitSink<WebSocket, Message>>,
}

impl FrameWriter {
    pub fn new(sink: SplitSink<WebSocket, Message>) -> FrameWriter {
        FrameWriter {
            sink: Mutex::new(sink),
        }
    }

    /// Writes one frame as one message, holding the lock for that frame only.
    pub async fn send(&self, frame: &RelayResponse) -> Result<(), Gone> {
        let text = serde_json::to_string(frame).map_err(|_| Gone)?;
        let mut sink = self.sink.lock().await;
        sink.send(Message::Text(text.into()))
            .await
            .map_err(|_| Gone)
    }

    /// The `relay-split-frames` broken variant: the frame's JSON goes out as two messages, the
    /// lock taken for each half separately, so another response's half can land in between.
    pub async fn send_split(&self, frame: &RelayResponse) -> Result<(), Gone> {
        let text = serde_json::to_string(frame).map_err(|_| Gone)?;
        let mut mid = text.len() / 2;
        while !text.is_char_boundary(mid) {
            mid -= 1;
        }
        let (head, tail) = text.split_at(mid);
        for half in [head, tail] {
            {
                let mut sink = self.sink.lock().await;
                sink.send(Message::Text(half.to_owned().into()))
                    .await
                    .map_err(|_| Gone)?;
            }
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// Says goodbye (server shutdown); errors mean the peer is already gone.
    pub async fn close(&self) {
        let mut sink = self.sink.lock().await;
        let _ = sink.send(Message::Close(None)).await;
        let _ = sink.close().await;
    }
}
