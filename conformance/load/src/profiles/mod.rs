//! The profiles: [`burst`] (waves from a barrier) and [`rate`] (steady, overload and soak:
//! closed-loop users at a planned attempt rate, with [`soak`]'s resource verdicts). Each runs
//! its engine (goose, or Locust) through [`drive`], drains the pool, and ends with the shared verdicts.

pub(super) mod burst;
pub(super) mod rate;
pub(super) mod soak;

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_conformance::remote::process::ProcessSource;
use plimsoll_conformance::session::Fatal;
use plimsoll_conformance::verdict::CheckResult;
use plimsoll_conformance::verdict::series::{Band, Gauge, Limit, RunSeries, Sent, Span};

use super::Ctx;
use super::Engine;
use super::progress::{Goal, Ticker};
use super::run::{RunOutput, RunSpec};
use super::runner::{self, LiveCounts};
use super::scrape::{Sample, Scraper};

/// What `/metrics` (and the process) of one watched server said throughout a run.
pub(super) struct Watched {
    pub samples: Vec<Sample>,
    pub scrape_errors: Vec<String>,
}

/// What a profile's goose run left: the attempts and goose's own counts, and what each watched
/// server's `/metrics` said throughout (in [`Ctx::watched`] order: the target, or each replica).
pub(super) struct Observed {
    pub out: RunOutput,
    pub watched: Vec<Watched>,
}

/// What a profile ends with: its verdicts, and the run over time for the HTML report's charts.
pub(super) struct Profiled {
    pub results: Vec<CheckResult>,
    pub series: RunSeries,
}

impl Observed {
    /// The run over time: the attempts as the generator timed them, binned, against the pool's
    /// limits (every replica's together in fleet mode), with the target's own gauges when one
    /// server was read, the prediction's band when the profile judges one, and `phases`.
    pub(super) fn series(&self, ctx: &Ctx<'_>, band: Option<Band>, phases: Vec<Span>) -> RunSeries {
        let sent = self
            .out
            .attempts
            .iter()
            .map(|a| {
                let refused = ctx.expect.is_refusal(a);
                let ok = ctx.expect.is_ok(a) && !a.abandon_planned;
                Sent {
                    sent_ms: a.sent_ms,
                    end_ms: a.sent_ms + a.latency_ms,
                    answered: a.status().is_some(),
                    ok,
                    refused,
                }
            })
            .collect();
        let n = ctx.replica_count();
        let fleet = if n > 1 {
            format!(", {n} replicas")
        } else {
            String::new()
        };
        let (workers, queue) = (ctx.expect.workers * n, ctx.expect.queue * n);
        let mut limits = vec![Limit {
            label: format!("workers ({workers}{fleet})"),
            value: f64::from(workers),
        }];
        if queue > 0 {
            limits.push(Limit {
                label: format!("workers + queue ({}{fleet})", workers + queue),
                value: f64::from(workers + queue),
            });
        }
        let mut series = RunSeries::new(vec![(ctx.pool.name.clone(), limits, sent)], phases);
        let pool = &mut series.pools[0];
        pool.predicted_refused = band;
        if let [one] = self.watched.as_slice() {
            pool.gauges = one
                .samples
                .iter()
                .map(|s| Gauge {
                    at_ms: s.t_ms,
                    busy: s.busy,
                    queued: s.depth,
                })
                .collect();
        }
        series
    }
}

/// Why the load engine gave no run to judge.
#[derive(Debug, thiserror::Error)]
enum EngineError {
    /// goose, in this process.
    #[error(transparent)]
    Goose(#[from] runner::GooseFailure),
    /// Locust's master and workers.
    #[error(transparent)]
    Locust(#[from] super::locust::LocustError),
}

/// Runs `spec` with `/metrics` read throughout and a progress bar towards `goal`. Returns once
/// goose has stopped, that is once every attempt it sent was answered or abandoned. In fleet
/// mode every replica is read directly (through the balancer a read would reach any of them);
/// the process figures are read beside the first only.
pub(super) async fn drive(
    ctx: &Ctx<'_>,
    spec: RunSpec,
    process: ProcessSource,
    goal: Goal,
) -> Result<Observed, Fatal> {
    let t0 = Instant::now();
    let interval = Duration::from_millis(ctx.section().scrape_interval_ms);
    let scrapers: Vec<Scraper> = ctx
        .watched()
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let process = match i {
                0 => process.clone(),
                _ => ProcessSource::Unavailable("not read beside a second replica".into()),
            };
            Scraper::spawn(
                ctx.client.clone(),
                node.metrics_url.clone(),
                ctx.pool.gauges.clone(),
                interval,
                t0,
                process,
            )
        })
        .collect();
    let live = Arc::new(LiveCounts::default());
    let ticker = Ticker::start(
        ctx.progress,
        goal,
        live.clone(),
        scrapers[0].max_busy.clone(),
    );
    let outcome = match &spec.engine {
        Engine::Goose => runner::run(spec, t0, live).await.map_err(EngineError::from),
        Engine::Locust(engine) => super::locust::run(&spec, engine)
            .await
            .map_err(EngineError::from),
    };
    Ticker::finish(ticker).await;
    let mut watched = Vec::new();
    for scraper in scrapers {
        let (samples, scrape_errors) = scraper.finish().await;
        watched.push(Watched {
            samples,
            scrape_errors,
        });
    }
    let out = outcome.map_err(|e| Fatal::Unreachable(format!("the load generator failed: {e}")))?;
    Ok(Observed { out, watched })
}
