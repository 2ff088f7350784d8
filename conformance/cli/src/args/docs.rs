//! The options of `plimsoll docs`.

use std::path::PathBuf;

/// `plimsoll docs`'s command line: where the repository is, and whether to write or only compare;
/// or, with `--contract`, one contract's document.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DocsArgs {
    /// Render FILE's document instead of the repository's generated files: its service, rate
    /// limits, refusals and tolerances, and what `plimsoll check` judges of it.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Run",
        conflicts_with = "root"
    )]
    pub contract: Option<PathBuf>,
    /// With --contract: write the document to FILE (default: standard output).
    #[arg(long, value_name = "FILE", help_heading = "Run", requires = "contract")]
    pub out: Option<PathBuf>,
    /// Repository root (default: the nearest ancestor holding spec/contract.toml).
    #[arg(long, value_name = "DIR", help_heading = "Run")]
    pub root: Option<PathBuf>,
    /// Change nothing; exit 1 naming each stale file (with --contract: --out's).
    #[arg(long, help_heading = "Run")]
    pub check: bool,
}
