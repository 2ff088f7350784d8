//! The profiles: [`burst`] (waves from a barrier) and [`rate`] (steady, overload and soak:
//! closed-loop users at a planned attempt rate, with [`soak`]'s resource verdicts). Each runs
//! its engine (goose, or Locust) through [`drive`], drains the pool, and ends with the shared verdicts.

pub(super) mod burst;
pub(super) mod rate;
pub(super) mod soak;

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::progress::{Goal, Ticker};
use super::run::{Engine, RunOutput, RunSpec};
use super::runner::{self, LiveCounts};
use super::scrape::{ProcessSource, Sample, Scraper};
use super::{Ctx, POOL};
use crate::session::Fatal;

/// What a profile's goose run left: the attempts and goose's own counts, and what `/metrics`
/// (and the process) said throughout.
pub(super) struct Observed {
    pub out: RunOutput,
    pub samples: Vec<Sample>,
    pub scrape_errors: Vec<String>,
}

/// Runs `spec` with `/metrics` read throughout and a progress bar towards `goal`. Returns once
/// goose has stopped, that is once every attempt it sent was answered or abandoned.
pub(super) async fn drive(
    ctx: &Ctx,
    spec: RunSpec,
    process: ProcessSource,
    goal: Goal,
) -> Result<Observed, Fatal> {
    let t0 = Instant::now();
    let scraper = Scraper::spawn(
        ctx.client.clone(),
        ctx.metrics_url.clone(),
        POOL.into(),
        Duration::from_millis(ctx.section().scrape_interval_ms),
        t0,
        process,
    );
    let live = Arc::new(LiveCounts::default());
    let ticker = Ticker::start(
        ctx.style.color,
        goal,
        live.clone(),
        scraper.max_busy.clone(),
    );
    let outcome = match &spec.engine {
        Engine::Goose => runner::run(spec, t0, live).await,
        Engine::Locust(engine) => super::locust::run(&spec, engine).await,
    };
    Ticker::finish(ticker).await;
    let (samples, scrape_errors) = scraper.finish().await;
    let out = outcome.map_err(|e| Fatal::Unreachable(format!("the load generator failed: {e}")))?;
    Ok(Observed {
        out,
        samples,
        scrape_errors,
    })
}
