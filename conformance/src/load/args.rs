//! The command line of `plimsoll load`: which profile, against what, and where the reports go.

use std::path::PathBuf;

use crate::report::ReportFiles;
use crate::session::Fatal;

/// The profiles of the contract's `[load]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileName {
    /// Waves of simultaneous requests: admission must be exact.
    Burst,
    /// Below capacity: refusals as predicted, no added latency.
    Steady,
    /// Far past capacity: no collapse, fast refusals, documented statuses only.
    Overload,
    /// Below capacity for long, some clients giving up: resources flat, slots come back.
    Soak,
}

impl ProfileName {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileName::Burst => "burst",
            ProfileName::Steady => "steady",
            ProfileName::Overload => "overload",
            ProfileName::Soak => "soak",
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// The profile to run.
    #[arg(long, value_enum)]
    pub profile: ProfileName,
    /// Base URL of the implementation (default: start the embedded reference server).
    #[arg(long)]
    pub target: Option<String>,
    /// Contract to judge against (default: the embedded spec/contract.toml).
    #[arg(long)]
    pub contract: Option<PathBuf>,
    /// Judge the target's own effective values (GET /v1/contract) where they differ from the contract.
    #[arg(long)]
    pub allow_overrides: bool,
    /// Seconds of load (default: the profile's duration_s; burst runs its waves instead).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Burst waves (default: the profile's waves).
    #[arg(long)]
    pub waves: Option<u32>,
    /// Closed-loop users (default: the contract's load.users, more for large pools).
    #[arg(long)]
    pub users: Option<u32>,
    /// Seed of every random draw (think times, holds, abandonment).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The implementation's process id, to read its memory and open files from /proc (soak).
    #[arg(long)]
    pub pid: Option<u32>,
    /// The implementation's temp folder, if the checker can see it.
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// Write goose's own report here (.html, .json or .md).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The verdict reports: `--json`, `--junit`, `--html`.
    #[command(flatten)]
    pub reports: ReportFiles,
    /// No progress display and colours (also when stdout is not a terminal).
    #[arg(long)]
    pub quiet: bool,
}

impl LoadArgs {
    /// Arguments for running `profile` against the embedded server with every default.
    pub fn new(profile: ProfileName) -> LoadArgs {
        LoadArgs {
            profile,
            target: None,
            contract: None,
            allow_overrides: false,
            duration: None,
            waves: None,
            users: None,
            seed: 1,
            pid: None,
            temp_dir: None,
            report: None,
            reports: ReportFiles::default(),
            quiet: true,
        }
    }

    /// Goose's report path as a string, when asked for.
    pub(super) fn goose_report(&self) -> Option<String> {
        self.report.as_ref().map(|p| p.display().to_string())
    }

    /// What the command line asks that cannot work, before anything starts.
    pub(super) fn validate(&self) -> Result<(), Fatal> {
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
