//! A broken relay: one envelope at a time, frames split across messages, responses under each
//! other's ids, a bridge that does not dial its relay again or dials too late.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use futures_util::future::BoxFuture;
use plimsoll_spec::Contract;
use plimsoll_spec::model::RelayReconnect;
use plimsoll_spec::relay::{RELAY_ERROR, RELAY_RESPONSE, RelayResponse};
use tokio::sync::oneshot;

use crate::error::ErrorKind;
use crate::relay::dispatch::RelayDispatch;
use crate::relay::hooks::{Authorised, RelayHooks};
use crate::relay::redial::{Backoff, ContractBackoff, Ending, Redial};
use crate::relay::stop::RelayStop;
use crate::relay::writer::{FrameSender, FrameWriter, Gone};

/// R6: a bridge that dials once; after the relay drops it, it stays away.
#[derive(Debug)]
pub(super) struct NoRedial;

impl Redial for NoRedial {
    fn backoff(&self, _r6: &RelayReconnect) -> Option<Backoff> {
        None
    }
}

/// R6 under a fault: a bridge that dials again when its relay closes the socket, but gives up
/// when the relay resets it (its read error ends the dialling task), so only a relay that
/// vanishes (`vanish`: the checker's close reaches it as an RST) shows it.
#[derive(Debug)]
pub(super) struct ResetEndsDialling;

impl Redial for ResetEndsDialling {
    fn backoff(&self, r6: &RelayReconnect) -> Option<Backoff> {
        ContractBackoff.backoff(r6)
    }

    fn after(&self, ending: Ending) -> bool {
        ending != Ending::Reset
    }
}

/// R6: a bridge that comes back, but only after twice the bound.
#[derive(Debug)]
pub(super) struct SlowRedial;

impl Redial for SlowRedial {
    fn backoff(&self, r6: &RelayReconnect) -> Option<Backoff> {
        let late = Duration::from_millis(r6.reconnect_within_ms * 2);
        Some(Backoff {
            initial: late,
            max: late.max(Duration::from_millis(r6.backoff_max_ms)),
        })
    }
}

/// R6: a stopping bridge waits for its stragglers, as long as the server drains HTTP requests.
#[derive(Debug)]
pub(super) struct WaitsForStragglers;

impl RelayStop for WaitsForStragglers {
    fn grace(&self, drain: Duration) -> Duration {
        drain
    }
}

/// R5: frames of a response are held back until its last one exists, then sent together: the
/// whole response buffered, though each frame is still whole.
#[derive(Debug, Default)]
pub(super) struct Buffered {
    held: Mutex<HashMap<String, Vec<RelayResponse>>>,
}

impl FrameSender for Buffered {
    fn send<'a>(
        &'a self,
        writer: &'a FrameWriter,
        frame: &'a RelayResponse,
        _of: usize,
    ) -> BoxFuture<'a, Result<(), Gone>> {
        let earlier = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if !frame.r#final {
                held.entry(frame.request_id.clone())
                    .or_default()
                    .push(frame.clone());
                return Box::pin(async { Ok(()) });
            }
            held.remove(&frame.request_id).unwrap_or_default()
        };
        Box::pin(async move {
            for f in earlier.iter().chain(std::iter::once(frame)) {
                writer.send(f).await?;
            }
            Ok(())
        })
    }
}

/// R2: the receive loop waits for each envelope's whole job.
#[derive(Debug)]
pub(super) struct Serial;

impl RelayDispatch for Serial {
    fn run(&self, job: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        job
    }
}

/// R5: a frame of a multi-frame response goes out as two messages, the lock taken for each
/// half, so another response's half can land in between. Single-frame answers stay whole, so
/// they still parse and only R5 sees the damage.
#[derive(Debug)]
pub(super) struct SplitFrames;

impl FrameSender for SplitFrames {
    fn send<'a>(
        &'a self,
        writer: &'a FrameWriter,
        frame: &'a RelayResponse,
        of: usize,
    ) -> BoxFuture<'a, Result<(), Gone>> {
        Box::pin(async move {
            // A response's only frame (`seq` 0 and final) stays whole; `of` counts only the
            // frames sent together, which a streamed response sends one at a time.
            if of < 2 && frame.seq == 0 && frame.r#final {
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

/// R3: two single-frame responses that become ready on the same socket within `window` of each
/// other go out under each other's `request_id` (each body and its headers, `X-Request-Id`
/// included, labelled with the other request's id). Every id is still answered exactly once; a
/// response with no partner within the window goes out as it is, `window` late.
#[derive(Debug)]
pub(super) struct SwapIds {
    pub window: Duration,
    /// Per socket (keyed by its writer), the response waiting for a partner.
    waiting: Mutex<HashMap<usize, Waiting>>,
    tickets: AtomicU64,
}

#[derive(Debug)]
struct Waiting {
    ticket: u64,
    request_id: String,
    /// Told the partner's id when one comes.
    partner: oneshot::Sender<String>,
}

impl SwapIds {
    pub(super) fn new(window: Duration) -> SwapIds {
        SwapIds {
            window,
            waiting: Mutex::new(HashMap::new()),
            tickets: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Waiting>> {
        // Nothing panics while the lock is held; recover the data regardless.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id `frame` goes out under.
    async fn label(&self, writer: &FrameWriter, frame: &RelayResponse) -> String {
        let socket = std::ptr::from_ref(writer) as usize;
        let (ticket, mut rx) = {
            let mut waiting = self.lock();
            if let Some(other) = waiting.remove(&socket) {
                let _ = other.partner.send(frame.request_id.clone());
                return other.request_id;
            }
            let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            waiting.insert(
                socket,
                Waiting {
                    ticket,
                    request_id: frame.request_id.clone(),
                    partner: tx,
                },
            );
            (ticket, rx)
        };
        if let Ok(Ok(partner)) = tokio::time::timeout(self.window, &mut rx).await {
            return partner;
        }
        {
            let mut waiting = self.lock();
            if waiting.get(&socket).is_some_and(|w| w.ticket == ticket) {
                waiting.remove(&socket);
                return frame.request_id.clone();
            }
        }
        // A partner took this response between the timeout and the lock: its id was sent then.
        rx.await.unwrap_or_else(|_| frame.request_id.clone())
    }
}

impl FrameSender for SwapIds {
    fn send<'a>(
        &'a self,
        writer: &'a FrameWriter,
        frame: &'a RelayResponse,
        of: usize,
    ) -> BoxFuture<'a, Result<(), Gone>> {
        Box::pin(async move {
            if of > 1 || frame.kind != RELAY_RESPONSE {
                return writer.send(frame).await;
            }
            let label = self.label(writer, frame).await;
            if label == frame.request_id {
                return writer.send(frame).await;
            }
            let mut relabelled = frame.clone();
            relabelled.request_id = label;
            writer.send(&relabelled).await
        })
    }
}

/// R1 (rule `relay-hooks`): an envelope's hook header is not authorised: one that does not parse
/// is read as no directive and the envelope performed, where the HTTP API would refuse it.
#[derive(Debug)]
pub(super) struct UncheckedHooks;

impl RelayHooks for UncheckedHooks {
    fn hold(
        &self,
        contract: &Contract,
        hooks_enabled: bool,
        hook: Option<&str>,
    ) -> Result<Duration, ErrorKind> {
        Ok(Authorised
            .hold(contract, hooks_enabled, hook)
            .unwrap_or_default())
    }
}

/// R3 (rule `relay-error`): a message that is no envelope is logged and left unanswered (its
/// `relay-error` frame is never written), as a bridge that skips what it cannot parse does.
#[derive(Debug)]
pub(super) struct DropsRelayErrors;

impl FrameSender for DropsRelayErrors {
    fn send<'a>(
        &'a self,
        writer: &'a FrameWriter,
        frame: &'a RelayResponse,
        _of: usize,
    ) -> BoxFuture<'a, Result<(), Gone>> {
        Box::pin(async move {
            if frame.kind == RELAY_ERROR {
                return Ok(());
            }
            writer.send(frame).await
        })
    }
}
