//! What the load profiles watch besides the answers: `/metrics` read throughout the run (busy
//! gauge, queue depth, temp files), and the server process's memory and open files.
//!
//! Process figures come from `/proc/<pid>` when the checker knows the pid (the embedded server
//! runs in this process; `--pid` names an external one), otherwise from the standard Prometheus
//! process metrics if the target exposes them; with neither the soak verdicts say so and skip.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use plimsoll_spec::model::Series;
use plimsoll_spec::{MetricName, Pool};
use tokio_util::sync::CancellationToken;

use plimsoll_conformance::remote::body::{MAX_REPLY_BYTES, read_capped};
use plimsoll_conformance::remote::process::{
    FDS_METRIC, ProcessSource, RSS_METRIC, proc_fds, proc_rss_bytes,
};
use plimsoll_conformance::remote::{MetricError, series_value};

/// One reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Since the run's start.
    pub t_ms: f64,
    /// The pool's busy workers gauge; `None` when `/metrics` could not be read or lacks it.
    pub busy: Option<f64>,
    /// The pool's queue depth gauge.
    pub depth: Option<f64>,
    /// The temp files gauge: per-request temp directories present.
    pub temp_files: Option<f64>,
    /// The server's resident memory, from `/proc` or its own metrics ([`ProcessSource`]); `/proc`
    /// is read only about every 100 ms, `None` in between.
    pub rss_bytes: Option<f64>,
    /// The server's open file descriptors, read with the memory.
    pub fds: Option<f64>,
}

/// The series a target reports the loaded pool in: the reference's `plimsoll_*` gauges, or
/// the series another contract declares for the pool (`[pools.NAME.metrics]`). A series left
/// undeclared is not read, and what needs it is not judged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Where the exposition is served; None: the contract declares none for the pool.
    pub path: Option<String>,
    /// The pool's busy workers.
    pub busy: Option<Series>,
    /// The pool's waiting requests.
    pub queued: Option<Series>,
    /// Per-request temp directories present (the reference's alone).
    pub temp_files: Option<Series>,
}

impl Gauges {
    /// The reference implementation's gauges of `pool` at `path`.
    pub fn reference(path: &str, pool: Pool) -> Gauges {
        let of = |name: MetricName, pool: Option<Pool>| Series {
            name: name.as_str().to_owned(),
            labels: pool
                .map(|p| [("pool".to_owned(), p.as_str().to_owned())].into())
                .unwrap_or_default(),
        };
        Gauges {
            path: Some(path.to_owned()),
            busy: Some(of(MetricName::WorkersBusy, Some(pool))),
            queued: Some(of(MetricName::QueueDepth, Some(pool))),
            temp_files: Some(of(MetricName::TempFiles, None)),
        }
    }

    /// The series a contract declares for a pool of its own.
    pub fn declared(metrics: Option<&plimsoll_spec::model::PoolMetrics>) -> Gauges {
        metrics.map_or_else(Gauges::default, |m| Gauges {
            path: Some(m.path.clone()),
            busy: m.busy.clone(),
            queued: m.queued.clone(),
            temp_files: None,
        })
    }
}

/// The pieces of a `/metrics` text the profiles use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsView {
    /// The pool's busy workers gauge.
    pub busy: Option<f64>,
    /// The pool's queue depth gauge.
    pub depth: Option<f64>,
    /// Per-request temp directories present.
    pub temp_files: Option<f64>,
    /// `process_resident_memory_bytes`: the target's claim of its memory.
    pub rss_bytes: Option<f64>,
    /// `process_open_fds`: the target's claim of its open files.
    pub fds: Option<f64>,
}

impl MetricsView {
    /// The pool's figures in a `/metrics` text, and the server-wide ones; a missing (or
    /// undeclared) series is `None`.
    pub fn parse(text: &str, gauges: &Gauges) -> MetricsView {
        let read = |s: &Option<Series>| s.as_ref().and_then(|s| series_value(text, s));
        let process = |name: &str| {
            let series = Series {
                name: name.to_owned(),
                labels: Default::default(),
            };
            series_value(text, &series)
        };
        MetricsView {
            busy: read(&gauges.busy),
            depth: read(&gauges.queued),
            temp_files: read(&gauges.temp_files),
            rss_bytes: process(RSS_METRIC),
            fds: process(FDS_METRIC),
        }
    }
}

/// Reads `/metrics` once.
pub async fn read_metrics(
    client: &reqwest::Client,
    url: &str,
    gauges: &Gauges,
) -> Result<MetricsView, MetricError> {
    let failed = |source| MetricError::Get {
        path: url.to_owned(),
        source,
    };
    let response = client.get(url).send().await.map_err(failed)?;
    // A target that answers gigabytes costs the reader at most the cap.
    let body = read_capped(response, MAX_REPLY_BYTES)
        .await
        .map_err(|source| MetricError::Body {
            path: url.to_owned(),
            source,
        })?;
    let text = String::from_utf8_lossy(&body);
    Ok(MetricsView::parse(&text, gauges))
}

/// Entries of the implementation's temp folder, when the checker can see it (0 when the
/// folder does not exist: nothing was left in it).
pub fn temp_entries(dir: Option<&Path>) -> Option<usize> {
    let dir = dir?;
    Some(std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0))
}

/// A background reader of `/metrics` (and the process figures) for the length of a run.
pub struct Scraper {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<(Vec<Sample>, Vec<String>)>,
    /// Highest busy gauge seen so far (for the progress display), as f64 bits.
    pub max_busy: Arc<AtomicU64>,
}

impl Scraper {
    /// Starts reading `metrics_url` (when the target serves one) every `interval`, and the
    /// process figures from `process`, each sample stamped against `t0`.
    pub fn spawn(
        client: reqwest::Client,
        metrics_url: Option<String>,
        gauges: Gauges,
        interval: Duration,
        t0: Instant,
        process: ProcessSource,
    ) -> Scraper {
        let stop = CancellationToken::new();
        let max_busy = Arc::new(AtomicU64::new(0f64.to_bits()));
        let (token, max) = (stop.clone(), max_busy.clone());
        let handle = tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut errors = Vec::new();
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // /proc is read about every 100 ms: memory and descriptors change slowly.
            let every = (100 / interval.as_millis().max(1)).max(1) as usize;
            let mut n = 0usize;
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let t_ms = t0.elapsed().as_secs_f64() * 1000.0;
                let mut sample = Sample {
                    t_ms,
                    ..Sample::default()
                };
                let read = match &metrics_url {
                    Some(url) => Some(read_metrics(&client, url, &gauges).await),
                    None => None,
                };
                match read {
                    Some(Ok(v)) => {
                        sample.busy = v.busy;
                        sample.depth = v.depth;
                        sample.temp_files = v.temp_files;
                        if process == ProcessSource::Metrics {
                            sample.rss_bytes = v.rss_bytes;
                            sample.fds = v.fds;
                        }
                        if let Some(b) = v.busy {
                            let prev = f64::from_bits(max.load(Ordering::Relaxed));
                            if b > prev {
                                max.store(b.to_bits(), Ordering::Relaxed);
                            }
                        }
                    }
                    Some(Err(e)) if errors.len() < 10 => {
                        errors.push(format!("{t_ms:.0} ms: {e}"));
                    }
                    Some(Err(_)) | None => {}
                }
                if let ProcessSource::Proc { pid, .. } = process
                    && n.is_multiple_of(every)
                {
                    sample.rss_bytes = proc_rss_bytes(pid);
                    sample.fds = proc_fds(pid);
                }
                n += 1;
                samples.push(sample);
            }
            (samples, errors)
        });
        Scraper {
            stop,
            handle,
            max_busy,
        }
    }

    /// Stops reading and hands back every sample and the first read errors.
    pub async fn finish(self) -> (Vec<Sample>, Vec<String>) {
        self.stop.cancel();
        self.handle.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_figures_the_profiles_use() {
        let text = "# HELP x\n\
            plimsoll_workers_busy{pool=\"digitize\"} 3\n\
            plimsoll_workers_busy{pool=\"export\"} 1\n\
            plimsoll_queue_depth{pool=\"digitize\"} 2\n\
            plimsoll_temp_files 5\n\
            process_resident_memory_bytes 1.5e7\n";
        let v = MetricsView::parse(text, &Gauges::reference("/metrics", Pool::Digitize));
        assert_eq!(v.busy, Some(3.0));
        assert_eq!(v.depth, Some(2.0));
        assert_eq!(v.temp_files, Some(5.0));
        assert_eq!(v.rss_bytes, Some(1.5e7));
        assert_eq!(v.fds, None);
        let declared = Gauges::declared(None);
        assert_eq!(MetricsView::parse(text, &declared).busy, None);
    }
}
