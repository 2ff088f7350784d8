//! One run of a profile, whichever engine drives it: what it is asked to do ([`RunSpec`]) and
//! what it hands to the verdicts ([`RunOutput`]).

use std::time::Duration;

use super::runner::{Attempt, DrainWait, HoldPlan, RequestTemplate};

/// Everything a finished run hands to the verdicts.
pub struct RunOutput {
    pub attempts: Vec<Attempt>,
    /// The load engine's own counts, as one evidence line.
    pub engine_summary: String,
    /// How long the engine ran, ms.
    pub elapsed_ms: f64,
    /// Burst only: a wave started before the previous one drained.
    pub drain_failed: bool,
    /// Think time users spent waiting when the profile ended (their last think, cut short).
    pub censored_think_ms: f64,
}

/// Settings of one goose run.
pub struct RunSpec {
    pub host: String,
    pub users: usize,
    pub seed: u64,
    pub template: RequestTemplate,
    pub hold: HoldPlan,
    pub report: Option<String>,
    pub kind: RunKind,
    /// What sends the requests.
    pub engine: Engine,
}

/// The load engine: goose in this process, or Locust's master and workers.
#[derive(Debug, Clone)]
pub enum Engine {
    Goose,
    Locust(super::locust::LocustEngine),
}

pub enum RunKind {
    Rate {
        mean_think_ms: f64,
        duration: Duration,
    },
    Burst {
        waves: usize,
        drain: DrainWait,
    },
}
