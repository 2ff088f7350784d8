//! The bridge the way seed 003 runs it: it dials its relay (`--relay-url`), serves the relay
//! protocol on that socket exactly as the relay endpoint does, and when the relay drops it, dials
//! again — first after R6's `backoff_initial_ms`, doubling to `backoff_max_ms` while the relay
//! is unreachable, so a routine drop is healed within `reconnect_within_ms`. Each socket has its
//! own writer: workers of a dead socket fail their sends and drop their frames, so no orphan's
//! frame ever goes out on the next socket (R6).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::connection;
use crate::relay::socket::Socket;
use crate::state::{ApiService, AppState};

/// Dials `url` and serves each socket until `stop` is cancelled, performing envelopes against
/// `upstream`, or this server's own API when there is none.
pub(crate) async fn run(
    state: AppState,
    url: String,
    upstream: Option<ApiService>,
    stop: CancellationToken,
) {
    let r6 = state.config.contract.clauses().r6.value.clone();
    let redial = state.components().redial.backoff(&r6);
    // A relay that accepts the TCP connection but never completes the handshake is one failed
    // dial, not a hung bridge.
    let handshake = Duration::from_millis(r6.backoff_max_ms.max(r6.reconnect_within_ms));
    let mut wait = redial.map(|b| b.initial).unwrap_or_default();
    while !stop.is_cancelled() {
        let dialled = tokio::select! {
            () = stop.cancelled() => return,
            dialled = tokio::time::timeout(handshake, tokio_tungstenite::connect_async(url.as_str())) => dialled,
        };
        match dialled {
            Ok(Ok((ws, _))) => {
                // Serving ended: nothing is left to relay to.
                let Some(api) = upstream.clone().or_else(|| state.api.get()) else {
                    return;
                };
                tracing::info!(relay = %url, "relay dialled");
                let ending = connection(state.clone(), api, Socket::dialled(ws), &stop).await;
                if !state.components().redial.after(ending) {
                    tracing::warn!(relay = %url, ?ending, "the bridge does not dial again");
                    return;
                }
                wait = redial.map(|b| b.initial).unwrap_or_default();
            }
            Ok(Err(e)) => {
                tracing::warn!(relay = %url, error = %e, retry_in_ms = wait.as_millis() as u64, "relay unreachable");
            }
            Err(_) => {
                tracing::warn!(relay = %url, retry_in_ms = wait.as_millis() as u64, "relay handshake timed out");
            }
        }
        let Some(backoff) = redial else {
            tracing::warn!(relay = %url, "the bridge does not dial again");
            return;
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(backoff.max);
    }
}
