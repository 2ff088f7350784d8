//! What `plimsoll load` runs (the binary makes it from the command line): which profile, on
//! which engine, against what.

use std::fmt;
use std::path::PathBuf;

use plimsoll_conformance::baseline::BaselinePlan;
use plimsoll_conformance::session::{Fatal, SubjectPlan};

use super::prediction::Balancer;

/// The profiles of the contract's `[load]` section, each described by [`ProfileName::about`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileName {
    /// Waves of simultaneous requests.
    Burst,
    /// Below capacity.
    Steady,
    /// Far past capacity.
    Overload,
    /// Below capacity for long.
    Soak,
}

impl ProfileName {
    /// Every profile, in the order `load --help` lists them.
    pub const ALL: [ProfileName; 4] = [
        ProfileName::Burst,
        ProfileName::Steady,
        ProfileName::Overload,
        ProfileName::Soak,
    ];

    /// The name `--profile` takes; the verdicts' ids (`L-steady`) and clauses (`load.steady`)
    /// are built on it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileName::Burst => "burst",
            ProfileName::Steady => "steady",
            ProfileName::Overload => "overload",
            ProfileName::Soak => "soak",
        }
    }

    /// The hold the profile asks of each request, from `[load]`: burst's fixed hold, or the rate
    /// profile's exponential mean (what a slow request or a played dependency holds instead is
    /// the pool's: `LoadedPool::hold`).
    pub fn nominal_hold_ms(self, l: &plimsoll_spec::model::Load) -> u64 {
        match self {
            ProfileName::Burst => l.burst.hold_ms,
            ProfileName::Steady => l.steady.mean_hold_ms,
            ProfileName::Overload => l.overload.mean_hold_ms,
            ProfileName::Soak => l.soak.mean_hold_ms,
        }
    }

    /// What the profile does and what it proves.
    pub fn about(self) -> &'static str {
        match self {
            ProfileName::Burst => "waves of simultaneous requests: admission must be exact",
            ProfileName::Steady => "below capacity: refusals as predicted, no added latency",
            ProfileName::Overload => {
                "far past capacity: no collapse, fast refusals, documented statuses only"
            }
            ProfileName::Soak => {
                "below capacity for long, some clients giving up: resources flat, slots come back"
            }
        }
    }
}

/// What sends the requests: goose in this process, or Locust's master and workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineName {
    /// goose, as a library: its users are tasks of this process.
    #[default]
    Goose,
    /// Locust's distributed mode: a master and worker processes.
    Locust,
}

impl EngineName {
    /// Every engine, in the order `--engine` lists them.
    pub const ALL: [EngineName; 2] = [EngineName::Goose, EngineName::Locust];

    /// The name `--engine` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineName::Goose => "goose",
            EngineName::Locust => "locust",
        }
    }
}

impl fmt::Display for EngineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `plimsoll load` runs: what is loaded, which profile on which engine, and what the
/// verdicts are compared with.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// What is loaded, and how long the run may take.
    pub subject: SubjectPlan,
    /// Fleet mode: the replicas behind the balancer the target names (empty: one server).
    pub replica: Vec<String>,
    /// Fleet mode: how the balancer picks a replica; selects the prediction's model.
    pub balancer: Option<Balancer>,
    /// The profile to run.
    pub profile: ProfileName,
    /// The contract's pool the load goes to; `None`: the reference's digitize pool, or the only
    /// pool of another contract with a `hold`.
    pub pool: Option<String>,
    /// Seconds of load; `None`: the profile's `duration_s` (burst runs its waves instead).
    pub duration: Option<f64>,
    /// Burst waves; `None`: the profile's.
    pub waves: Option<u32>,
    /// Offered load as a multiple of capacity; `None`: the profile's `load_factor`.
    pub load_factor: Option<f64>,
    /// Closed-loop users; `None`: the contract's `load.users`, more for large pools.
    pub users: Option<u32>,
    /// The load engine.
    pub engine: EngineName,
    /// Locust worker processes started on this machine.
    pub locust_workers: u32,
    /// Workers the Locust master waits for; `None`: the local ones.
    pub locust_expect: Option<u32>,
    /// The address the Locust master listens on for workers.
    pub locust_bind: String,
    /// Seed of every random draw (think times, holds, abandonment).
    pub seed: u64,
    /// An earlier run to compare the figures with.
    pub baseline: BaselinePlan,
    /// Where goose writes its own report (.html, .json or .md).
    pub report: Option<PathBuf>,
    /// Show the profile's progress bar (on an interactive stderr only).
    pub progress: bool,
}

impl LoadPlan {
    /// A plan for running `profile` against the embedded server with every default, no
    /// progress bar.
    pub fn new(profile: ProfileName) -> LoadPlan {
        LoadPlan {
            subject: SubjectPlan::default(),
            replica: Vec::new(),
            balancer: None,
            profile,
            pool: None,
            duration: None,
            waves: None,
            load_factor: None,
            users: None,
            engine: EngineName::Goose,
            locust_workers: 2,
            locust_expect: None,
            locust_bind: "127.0.0.1".into(),
            seed: 1,
            baseline: BaselinePlan::default(),
            report: None,
            progress: false,
        }
    }

    /// The engine the profile runs on.
    pub(super) fn engine(&self) -> super::Engine {
        match self.engine {
            EngineName::Goose => super::Engine::Goose,
            EngineName::Locust => super::Engine::Locust(super::locust::LocustEngine {
                python: std::env::var("PLIMSOLL_PYTHON").unwrap_or_else(|_| "python3".into()),
                workers: self.locust_workers,
                expect_workers: self.locust_expect.unwrap_or(self.locust_workers),
                bind: self.locust_bind.clone(),
            }),
        }
    }

    /// Goose's report path as a string, when asked for.
    pub(super) fn goose_report(&self) -> Option<String> {
        self.report.as_ref().map(|p| p.display().to_string())
    }

    /// What the command line asks that cannot work, before anything starts.
    pub(super) fn validate(&self) -> Result<(), Fatal> {
        super::fleet::validate(self)?;
        if let Some(x) = self.load_factor
            && !(x.is_finite() && x > 0.0 && x <= 100.0)
        {
            return Err(Fatal::Usage(format!(
                "--load-factor must be above 0 and at most 100, got {x}"
            )));
        }
        if self.engine == EngineName::Locust {
            if self.profile == ProfileName::Burst {
                return Err(Fatal::Usage(
                    "--engine locust runs the rate profiles (steady, overload, soak); burst's waves need goose".into(),
                ));
            }
            if self.report.is_some() {
                return Err(Fatal::Usage(
                    "--report is goose's report; with --engine locust, Locust's CSV is summarised in the verdicts".into(),
                ));
            }
            let expect = self.locust_expect.unwrap_or(self.locust_workers);
            if expect == 0 || expect < self.locust_workers {
                return Err(Fatal::Usage(format!(
                    "--locust-expect {expect} must be at least 1 and at least --locust-workers {}",
                    self.locust_workers
                )));
            }
        }
        if let Some(path) = &self.report {
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            if !matches!(ext, "html" | "htm" | "json" | "md") {
                return Err(Fatal::Usage(format!(
                    "--report {}: goose writes .html, .json or .md",
                    path.display()
                )));
            }
        }
        Ok(())
    }
}
