//! How many relayed requests ran at once while a scenario ran, as the target's
//! [`LocalHandler`](super::local::LocalHandler) counts them: at the checker's own upstream when it
//! plays the bridge's local handler (on the checker's clock: nothing to trust), or from the relay
//! pool's gauges, sampled from the metrics path (the client sees answers, the gauges say how many
//! ran at once).

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{MetricName, Pool};
use tokio_util::sync::CancellationToken;

use super::upstream::{Upstream, max_overlap};
use super::{Target, metric_value, series};

/// Sampling stops after this many samples whatever happens.
const MAX_SAMPLES: usize = 4000;

/// Where the counts come from.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The relay pool's gauges in the target's `/metrics`.
    #[default]
    Gauges,
    /// The requests the checker's upstream received.
    Upstream,
}

/// How many relayed requests ran at once during a scenario, and how that was counted.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    /// Where the counts come from, so a verdict can say what it judged.
    pub source: Source,
    /// Gauge samples read, or requests the upstream received.
    pub count: usize,
    /// Failed or timed-out reads of `/metrics` (none at the upstream).
    pub errors: usize,
    /// The relay busy series existed in at least one sample.
    pub present: bool,
    /// The most relay jobs running at once: the busy gauge's maximum, or the upstream's overlap.
    pub busy_max: f64,
    /// The relay queue gauge's maximum (0 at the upstream, which sees no queue).
    pub queued_max: f64,
    /// When the busy gauge first hit its maximum (ms after sampling began).
    pub busy_max_at_ms: f64,
    /// The contract's metrics path the gauges were read from (empty at the upstream).
    pub metrics_path: String,
}

impl Samples {
    /// What `busy_max` counts, for a verdict.
    pub fn what(&self) -> &'static str {
        match self.source {
            Source::Gauges => "busy gauge",
            Source::Upstream => "requests at the upstream",
        }
    }

    /// One line of evidence.
    pub fn describe(&self) -> String {
        match self.source {
            Source::Gauges => format!(
                "{} gauge samples ({} errors); busy max {} first at {:.0} ms; queue depth max {}",
                self.count, self.errors, self.busy_max, self.busy_max_at_ms, self.queued_max
            ),
            Source::Upstream => format!(
                "{} requests reached the checker's upstream; at most {} at once, first at {:.0} ms",
                self.count, self.busy_max, self.busy_max_at_ms
            ),
        }
    }

    /// Why nothing was counted (the metrics path never read or without the relay busy series;
    /// no request reached the upstream), if so: the check fails with it.
    pub fn missing(&self) -> Option<String> {
        match self.source {
            Source::Upstream => (self.count == 0).then(|| {
                "no relayed request reached the checker's upstream: the bridge did not perform them"
                    .to_owned()
            }),
            Source::Gauges if self.count == 0 => Some(format!(
                "{} could not be read while the relay worked ({} errors)",
                self.metrics_path, self.errors
            )),
            Source::Gauges => (!self.present).then(|| {
                format!(
                    "{} has no {} series",
                    self.metrics_path,
                    series(MetricName::WorkersBusy, Pool::Relay)
                )
            }),
        }
    }
}

/// Counting under way; [`Sampler::finish`] ends it.
pub enum Sampler {
    /// Polling `/metrics` on a task of its own.
    Gauges {
        /// Cancelled to end the polling early.
        stop: CancellationToken,
        /// The polling task, which hands back what it read.
        task: tokio::task::JoinHandle<Samples>,
    },
    /// Counting the checker's own upstream, which records every request anyway.
    Upstream {
        /// The upstream the bridge performs its requests against.
        upstream: Arc<Upstream>,
        /// When counting began: earlier requests do not count.
        origin: Instant,
    },
}

impl Sampler {
    /// Counting by the relay pool's gauges on the target's metrics path.
    pub fn gauges(t: &Arc<Target>, limit: Duration) -> Sampler {
        poll_gauges(t, limit)
    }

    /// Ends the counting and hands back what it counted.
    pub async fn finish(self) -> Samples {
        match self {
            Sampler::Gauges { stop, task } => {
                stop.cancel();
                task.await.unwrap_or_default()
            }
            Sampler::Upstream { upstream, origin } => {
                let visits = upstream.visits_since(origin);
                let (max, at) = max_overlap(&visits);
                Samples {
                    source: Source::Upstream,
                    count: visits.len(),
                    errors: 0,
                    present: true,
                    busy_max: max as f64,
                    queued_max: 0.0,
                    busy_max_at_ms: at.map_or(0.0, |at| {
                        at.saturating_duration_since(origin).as_secs_f64() * 1000.0
                    }),
                    metrics_path: String::new(),
                }
            }
        }
    }
}

/// Polls the metrics path every `metrics_poll_interval_ms` until stopped (or `limit`, or
/// [`MAX_SAMPLES`]), keeping the maxima of the relay busy and queue gauges.
fn poll_gauges(t: &Arc<Target>, limit: Duration) -> Sampler {
    let stop = CancellationToken::new();
    let t = t.clone();
    let token = stop.clone();
    let task = tokio::spawn(async move {
        let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms.max(1));
        let url = t.url(&t.expected.api().metrics.path);
        let relay =
            |text: &str, name: MetricName| metric_value(text, name.as_str(), Pool::Relay.as_str());
        let started = Instant::now();
        let mut s = Samples {
            metrics_path: t.expected.api().metrics.path.clone(),
            ..Samples::default()
        };
        while !token.is_cancelled() && started.elapsed() < limit && s.count < MAX_SAMPLES {
            let text = async { t.client.get(&url).send().await?.text().await };
            match tokio::time::timeout(Duration::from_secs(1), text).await {
                Ok(Ok(text)) => {
                    s.count += 1;
                    let busy = relay(&text, MetricName::WorkersBusy);
                    s.present |= busy.is_some();
                    let busy = busy.unwrap_or(0.0);
                    if busy > s.busy_max {
                        s.busy_max = busy;
                        s.busy_max_at_ms = started.elapsed().as_secs_f64() * 1000.0;
                    }
                    s.queued_max = s
                        .queued_max
                        .max(relay(&text, MetricName::QueueDepth).unwrap_or(0.0));
                }
                _ => s.errors += 1,
            }
            tokio::select! {
                () = token.cancelled() => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
        s
    });
    Sampler::Gauges { stop, task }
}
