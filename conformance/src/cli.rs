//! Command-line parsing; each subcommand hands off to its module.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "plimsoll",
    version,
    about = "A machine-readable concurrency contract, its reference server and its conformance suite"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Regenerate docs/concurrency.md, spec/openapi.json and spec/schemas/*.json from spec/contract.toml.
    Docs {
        /// Change nothing; exit 1 naming each stale file.
        #[arg(long)]
        check: bool,
        /// Repository root (default: the nearest ancestor holding spec/contract.toml).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Check an implementation against the contract (default: the embedded reference server).
    Check(crate::check::CheckArgs),
    /// Run a goose load profile against an implementation, judged by the contract and a queueing prediction.
    Load(crate::load::LoadArgs),
    /// Run the reference server (settings from the environment: WORKER_POOL_SIZE, ..., PLIMSOLL_TEST_HOOKS).
    Serve(crate::serve::ServeArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Docs { check, root } => crate::docs::run(root, check),
        Command::Serve(args) => crate::serve::run(args),
        Command::Check(args) => crate::check::run(args),
        Command::Load(args) => crate::load::run(args),
    };
    ExitCode::from(code)
}
