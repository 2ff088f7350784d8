//! The relay pool's gauges, sampled from `/metrics` while a scenario runs: the client sees
//! answers, the gauges say how many ran at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{MetricName, Pool};
use tokio_util::sync::CancellationToken;

use crate::checks::ctx::{Ctx, ms};
use crate::remote::{Target, metric_value, series};

/// Sampling stops after this many samples whatever happens.
const MAX_SAMPLES: usize = 4000;

#[derive(Debug, Default, Clone)]
pub struct Samples {
    pub count: usize,
    pub errors: usize,
    /// The relay busy series existed in at least one sample.
    pub present: bool,
    pub busy_max: f64,
    pub queued_max: f64,
    /// When the busy gauge first hit its maximum (ms after sampling began).
    pub busy_max_at_ms: f64,
}

impl Samples {
    /// Records a failure when `/metrics` was never read or has no relay busy series; true then.
    pub fn missing(&self, c: &mut Ctx) -> bool {
        if self.count == 0 {
            c.fail(format!(
                "/metrics could not be read while the relay worked ({} errors)",
                self.errors
            ));
            return true;
        }
        !c.require(self.present, || {
            format!(
                "/metrics has no {} series",
                series(MetricName::WorkersBusy, Pool::Relay)
            )
        })
    }
}

pub struct Sampler {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Samples>,
}

/// Polls `/metrics` every `metrics_poll_interval_ms` until stopped (or `limit`, or
/// [`MAX_SAMPLES`]), keeping the maxima of the relay busy and queue gauges.
pub fn sample(t: &Arc<Target>, limit: Duration) -> Sampler {
    let stop = CancellationToken::new();
    let t = t.clone();
    let token = stop.clone();
    let task = tokio::spawn(async move {
        let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms.max(1));
        let url = t.url(&t.expected.api.metrics.path);
        let relay =
            |text: &str, name: MetricName| metric_value(text, name.as_str(), Pool::Relay.as_str());
        let started = Instant::now();
        let mut s = Samples::default();
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
                        s.busy_max_at_ms = ms(started.elapsed());
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
    Sampler { stop, task }
}

impl Sampler {
    pub async fn finish(self) -> Samples {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}
