//! A broken relay: one envelope at a time, frames split across messages.

use futures_util::future::BoxFuture;
use plimsoll_spec::relay::RelayResponse;

use crate::relay::dispatch::RelayDispatch;
use crate::relay::writer::{FrameSender, FrameWriter, Gone};

/// R2: the receive loop waits for each envelope's whole job.
#[derive(Debug)]
pub struct Serial;

impl RelayDispatch for Serial {
    fn run(&self, job: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        job
    }
}

/// R5: a frame of a multi-frame response goes out as two messages, the lock taken for each
/// half, so another response's half can land in between. Single-frame answers stay whole, so
/// they still parse and only R5 sees the damage.
#[derive(Debug)]
pub struct SplitFrames;

impl FrameSender for SplitFrames {
    fn send<'a>(
        &'a self,
        writer: &'a FrameWriter,
        frame: &'a RelayResponse,
        of: usize,
    ) -> BoxFuture<'a, Result<(), Gone>> {
        Box::pin(async move {
            if of < 2 {
                return writer.send(frame).await;
            }
            let text = serde_json::to_string(frame).map_err(|_| Gone)?;
            let mut mid = text.len() / 2;
            while !text.is_char_boundary(mid) {
                mid -= 1;
            }
            let (head, tail) = text.split_at(mid);
            for half in [head, tail] {
                writer.send_text(half.to_owned()).await?;
                tokio::task::yield_now().await;
            }
            Ok(())
        })
    }
}
