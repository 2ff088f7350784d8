//! The options of `plimsoll contract`.

use std::path::PathBuf;

/// `plimsoll contract`'s command line: what to do with a contract document.
#[derive(Debug, Clone, clap::Args)]
pub struct ContractArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ContractAction,
}

/// The actions on a contract document.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ContractAction {
    /// Rewrite a contract written in language 1 (contracts 1.x) in language 2, on stdout.
    Upgrade(UpgradeArgs),
    /// Report every value a contract document still leaves to fill in and every rule it breaks,
    /// each with its line.
    Lint(LintArgs),
}

/// `plimsoll contract upgrade`'s command line.
#[derive(Debug, Clone, clap::Args)]
pub struct UpgradeArgs {
    /// The language-1 contract document.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Write the upgraded document here instead of stdout.
    #[arg(long, short, value_name = "FILE", help_heading = "Run")]
    pub output: Option<PathBuf>,
}

/// `plimsoll contract lint`'s command line.
#[derive(Debug, Clone, clap::Args)]
pub struct LintArgs {
    /// The contract document (a draft of `plimsoll init`, or any contract in language 2).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}
