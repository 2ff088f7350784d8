//! What a run checks (`check` and `load` alike): the `Target` options and `--timeout`.

use std::path::PathBuf;

/// What a run checks, as the command line names it: one set of options for `check` and `load`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Target")]
pub struct SubjectArgs {
    /// Base URL of the implementation (default: start the embedded reference server on a free
    /// loopback port).
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Contract to judge against (default: the embedded spec/contract.toml).
    #[arg(long, value_name = "FILE")]
    pub contract: Option<PathBuf>,
    /// Adopt the target's GET /v1/contract values in fields the contract lets a deployment
    /// override (each listed in the report); any other difference is refused and fails
    /// `contract`.
    #[arg(long)]
    pub allow_overrides: bool,
    /// The implementation's temp folder, if the checker can see it (must be readable at the
    /// start).
    #[arg(long, value_name = "DIR")]
    pub temp_dir: Option<PathBuf>,
    /// The implementation's process id, to read its memory (B5, soak) and open files (soak)
    /// from /proc.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Trust the certificate authorities in FILE (PEM) for an `https://` target, besides the
    /// system's own roots: a target whose certificate none of them signed is unreachable.
    #[arg(long, value_name = "FILE", help_heading = "Target")]
    pub ca_file: Option<PathBuf>,
    /// Stop the whole run after this many seconds (default 1800), writing the reports asked
    /// for, marked incomplete (exit code 2). A stop signal (Ctrl-C, SIGTERM) does the same at
    /// once.
    #[arg(long, value_name = "SECS", help_heading = "Run")]
    pub timeout: Option<u64>,
}
