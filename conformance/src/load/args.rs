//! The command line of `plimsoll load`: which profile, against what, and where the reports go.

use std::path::PathBuf;

use super::prediction::Balancer;
use crate::baseline::BaselineArgs;
use crate::report::ReportFiles;
use crate::session::{Fatal, SubjectArgs};

/// The profiles of the contract's `[load]` section, each described by [`ProfileName::about`].
// No doc comments on the variants: clap would turn them into a long `--help` of another layout
// than every other command's; `load --help` lists the profiles in a block of its own instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[expect(
    missing_docs,
    reason = "a documented variant would change the layout of `load --help`"
)]
pub enum ProfileName {
    Burst,
    Steady,
    Overload,
    Soak,
}

impl ProfileName {
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
// No doc comments on the variants, as for the profiles: `--engine`'s help says what each is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
#[expect(
    missing_docs,
    reason = "a documented variant would change the layout of `load --help`"
)]
pub enum EngineName {
    #[default]
    Goose,
    Locust,
}

/// `plimsoll load`'s command line: what is loaded, which profile on which engine, and the reports.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// What is loaded: `--target`, `--contract`, `--allow-overrides`, `--temp-dir`.
    #[command(flatten)]
    pub subject: SubjectArgs,
    /// Fleet mode: a replica behind the balancer `--target` names (repeat for each). Each is
    /// read and judged against the per-replica contract on its own.
    #[arg(long, value_name = "URL", help_heading = "Fleet")]
    pub replica: Vec<String>,
    /// Fleet mode: how the balancer picks a replica; selects the prediction's model.
    #[arg(long, value_enum, value_name = "POLICY", help_heading = "Fleet")]
    pub balancer: Option<Balancer>,
    /// The profile to run (see Profiles below).
    #[arg(long, value_enum, help_heading = "Run")]
    pub profile: ProfileName,
    /// Seconds of load (default: the profile's duration_s; burst runs its waves instead).
    #[arg(long, value_name = "SECONDS", help_heading = "Run")]
    pub duration: Option<f64>,
    /// Burst waves (default: the profile's waves).
    #[arg(long, value_name = "N", help_heading = "Run")]
    pub waves: Option<u32>,
    /// Offered load as a multiple of capacity (default: the profile's load_factor), e.g. a soak
    /// at overload: `--profile soak --load-factor 3`.
    #[arg(long, value_name = "X", help_heading = "Run")]
    pub load_factor: Option<f64>,
    /// Closed-loop users (default: the contract's load.users, more for large pools).
    #[arg(long, value_name = "N", help_heading = "Run")]
    pub users: Option<u32>,
    /// The load engine: goose in this process, or Locust's distributed mode (a master and
    /// worker processes; rate profiles only; needs `pip install locust`).
    #[arg(long, value_enum, default_value_t = EngineName::Goose, help_heading = "Engine")]
    pub engine: EngineName,
    /// Locust worker processes started on this machine.
    #[arg(long, default_value_t = 2, value_name = "N", help_heading = "Engine")]
    pub locust_workers: u32,
    /// Workers the Locust master waits for, these and any joining from elsewhere (default: the
    /// local ones).
    #[arg(long, value_name = "N", help_heading = "Engine")]
    pub locust_expect: Option<u32>,
    /// The address the Locust master listens on for workers.
    #[arg(
        long,
        default_value = "127.0.0.1",
        value_name = "ADDR",
        help_heading = "Engine"
    )]
    pub locust_bind: String,
    /// Seed of every random draw (think times, holds, abandonment).
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = "Run")]
    pub seed: u64,
    /// The verdict reports: `--json`, `--junit`, `--html`, `--quiet`.
    #[command(flatten)]
    pub reports: ReportFiles,
    /// An earlier run to compare the figures with: `--baseline`, `--fail-on-regression`.
    #[command(flatten)]
    pub baseline: BaselineArgs,
    /// Write goose's own report here (.html, .json or .md).
    #[arg(long, value_name = "FILE", help_heading = "Reports")]
    pub report: Option<PathBuf>,
}

impl LoadArgs {
    /// Arguments for running `profile` against the embedded server with every default.
    pub fn new(profile: ProfileName) -> LoadArgs {
        LoadArgs {
            subject: SubjectArgs::default(),
            replica: Vec::new(),
            balancer: None,
            profile,
            duration: None,
            waves: None,
            load_factor: None,
            users: None,
            engine: EngineName::Goose,
            locust_workers: 2,
            locust_expect: None,
            locust_bind: "127.0.0.1".into(),
            seed: 1,
            reports: ReportFiles::quiet(),
            baseline: BaselineArgs::default(),
            report: None,
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
