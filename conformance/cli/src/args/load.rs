//! The options of `plimsoll load`: what is loaded (with `SubjectArgs`), a fleet behind a
//! balancer, the profile, the engine, and the reports.

use std::path::PathBuf;

use plimsoll_load::prediction::Balancer;
use plimsoll_load::{EngineName, ProfileName};

use super::one_of;
use super::reports::{BaselineArgs, ReportFiles};
use super::subject::SubjectArgs;

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
    #[arg(
        long,
        value_parser = one_of(&Balancer::ALL, Balancer::as_str),
        value_name = "POLICY",
        help_heading = "Fleet"
    )]
    pub balancer: Option<Balancer>,
    /// The profile to run (see Profiles below).
    #[arg(long, value_parser = one_of(&ProfileName::ALL, ProfileName::as_str), help_heading = "Run")]
    pub profile: ProfileName,
    /// The contract's pool to load (default: the reference's digitize pool, or the only pool
    /// of another contract with a `hold`).
    #[arg(long, value_name = "NAME", help_heading = "Run")]
    pub pool: Option<String>,
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
    #[arg(
        long,
        value_parser = one_of(&EngineName::ALL, EngineName::as_str),
        default_value_t = EngineName::Goose,
        help_heading = "Engine"
    )]
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
            reports: ReportFiles::quiet(),
            baseline: BaselineArgs::default(),
            report: None,
        }
    }
}
