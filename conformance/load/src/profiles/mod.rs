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

use super::Engine;
use super::progress::{Goal, Ticker};
use super::run::{RunOutput, RunSpec};
use super::runner::{self, LiveCounts};
use super::scrape::{Sample, Scraper};
use super::{Ctx, POOL};

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
                POOL.into(),
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
