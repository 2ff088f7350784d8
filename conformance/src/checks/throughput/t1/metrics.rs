//! A pool's declared series (`[pools.NAME.metrics]`), read beside T1's burst: the service's
//! report of itself in its own metric names, cross-checked against what the client saw. A
//! declared series that is not served fails, and so does one that disagrees: a busy gauge that
//! does not peak at the workers the client saw run at once, a queue gauge that does not peak at
//! the places, a limit gauge that is not the contract's, a refusal counter that does not rise by
//! the refusals received. None of it is evidence for the verdict on the pool itself: that rests
//! on the client's clock.

use std::sync::Arc;

use plimsoll_spec::model::{PoolMetrics, Series};

use crate::checks::ctx::Ctx;
use crate::checks::pool::{Burst, GaugeWatch, require_peak};
use crate::remote::{MetricError, Target};

/// The series being watched while the burst runs.
pub(super) struct Watch {
    metrics: PoolMetrics,
    /// Why a declared series could not be read, each once.
    unread: Vec<String>,
    busy: Option<GaugeWatch>,
    queued: Option<GaugeWatch>,
    refused_before: Option<Result<f64, MetricError>>,
}

/// A gauge of `declared` polled until finished.
fn watch(t: &Arc<Target>, path: &str, declared: &Series) -> GaugeWatch {
    let (path, declared) = (path.to_owned(), declared.clone());
    GaugeWatch::polling(t, move |t| {
        let (path, declared) = (path.clone(), declared.clone());
        async move { t.series(&path, &declared).await }
    })
}

impl Watch {
    /// Reads the limit gauge (it must be the contract's `workers`) and the refusal counter,
    /// and starts polling the busy and queue gauges, before the burst.
    pub(super) async fn start(
        t: &Arc<Target>,
        c: &mut Ctx,
        name: &str,
        (metrics, workers): (&PoolMetrics, usize),
    ) -> Watch {
        let mut unread = Vec::new();
        if let Some(limit) = &metrics.limit {
            match t.series(&metrics.path, limit).await {
                Ok(v) => {
                    c.require(v == workers as f64, || {
                        format!("{name}: {limit} reads {v}; the contract says {workers} workers")
                    });
                }
                Err(e) => unread.push(e.to_string()),
            }
        }
        let refused_before = match &metrics.refused {
            Some(s) => Some(t.series(&metrics.path, s).await),
            None => None,
        };
        Watch {
            busy: metrics.busy.as_ref().map(|s| watch(t, &metrics.path, s)),
            queued: metrics.queued.as_ref().map(|s| watch(t, &metrics.path, s)),
            metrics: metrics.clone(),
            unread,
            refused_before,
        }
    }

    /// After the burst: the busy gauge peaked at the workers and the queue gauge at the
    /// places (`queue`), and the refusal counter rose by the refusals the client received.
    /// Returns the figures, for the evidence.
    pub(super) async fn finish(
        mut self,
        t: &Target,
        c: &mut Ctx,
        name: &str,
        (b, workers, queue): (&Burst, usize, usize),
    ) -> String {
        let mut seen = Vec::new();
        for (gauge, watch, expected, what) in [
            (&self.metrics.busy, self.busy, workers, "ran at once"),
            (&self.metrics.queued, self.queued, queue, "waited"),
        ] {
            let (Some(series), Some(watch)) = (gauge, watch) else {
                continue;
            };
            match watch.finish().await {
                Ok((max, samples)) => {
                    let part = format!("{series}'s peak");
                    require_peak(t, c, (max, expected), (b.hold, &part), || {
                        format!(
                            "{name}: {series} peaked at {max} over {samples} samples; by the \
                             client's clock {expected} {what} ({})",
                            b.summary()
                        )
                    });
                    seen.push(format!("{series} peaked at {max}"));
                }
                Err(e) => self.unread.push(e.to_string()),
            }
        }
        if let (Some(series), Some(before)) = (&self.metrics.refused, self.refused_before) {
            let after = t.series(&self.metrics.path, series).await;
            match (before, after) {
                (Ok(before), Ok(after)) => {
                    let rose = after - before;
                    let refused = b.refused.len() as f64;
                    c.require(rose == refused, || {
                        format!(
                            "{name}: {series} rose by {rose} while the client received \
                             {refused} refusals"
                        )
                    });
                    seen.push(format!("{series} rose by {rose}"));
                }
                (Err(e), _) | (_, Err(e)) => self.unread.push(e.to_string()),
            }
        }
        // One failure for the pool's series, each reason once: a missing exposition is one
        // finding, not one per series.
        self.unread.dedup();
        if !self.unread.is_empty() {
            c.fail(format!(
                "{name}: its declared series were not served: {}",
                self.unread.join("; ")
            ));
        }
        seen.join(", ")
    }
}
