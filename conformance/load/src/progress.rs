//! The progress bar of a profile on an interactive stderr, fed from the runner's live counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio_util::sync::CancellationToken;

use super::runner::LiveCounts;

/// What the bar counts up to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Goal {
    /// Seconds of a rate profile.
    Seconds(u64),
    /// Waves of a burst.
    Waves(u64),
}

/// A running progress bar; [`Ticker::finish`] clears it.
pub(super) struct Ticker {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

impl Ticker {
    /// A bar, or `None` when not `enabled` or stderr is not a terminal.
    pub(super) fn start(
        enabled: bool,
        goal: Goal,
        live: Arc<LiveCounts>,
        max_busy: Arc<AtomicU64>,
    ) -> Option<Ticker> {
        if !enabled || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return None;
        }
        let (total, unit) = match goal {
            Goal::Seconds(n) => (n, "s"),
            Goal::Waves(n) => (n, "waves"),
        };
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let template = format!("{{spinner}} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        let stop = CancellationToken::new();
        let token = stop.clone();
        let started = Instant::now();
        let handle = tokio::spawn(async move {
            loop {
                let pos = match goal {
                    Goal::Waves(_) => live.waves_done.load(Ordering::Relaxed),
                    Goal::Seconds(_) => started.elapsed().as_secs().min(total),
                };
                bar.set_position(pos);
                bar.set_message(format!(
                    "sent {} · ok {} · refused {} · other {} · busy max {}",
                    live.sent.load(Ordering::Relaxed),
                    live.ok.load(Ordering::Relaxed),
                    live.refused.load(Ordering::Relaxed),
                    live.other.load(Ordering::Relaxed),
                    f64::from_bits(max_busy.load(Ordering::Relaxed))
                ));
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
            bar.finish_and_clear();
        });
        Some(Ticker { stop, handle })
    }

    pub(super) async fn finish(ticker: Option<Ticker>) {
        if let Some(t) = ticker {
            t.stop.cancel();
            let _ = t.handle.await;
        }
    }
}
