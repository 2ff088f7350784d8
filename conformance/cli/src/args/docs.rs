//! The options of `plimsoll docs`.

use std::path::PathBuf;

/// `plimsoll docs`'s command line: where the repository is, and whether to write or only compare.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DocsArgs {
    /// Repository root (default: the nearest ancestor holding spec/contract.toml).
    #[arg(long, value_name = "DIR", help_heading = "Run")]
    pub root: Option<PathBuf>,
    /// Change nothing; exit 1 naming each stale file.
    #[arg(long, help_heading = "Run")]
    pub check: bool,
}
