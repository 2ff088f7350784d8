//! The embedded subject: the reference server a run starts for itself when no `--target` is
//! given, in a workspace of its own (temp folder, log file) that the checker may read.

use std::future::Future;
use std::pin::Pin;

use plimsoll_conformance::check::{self, CheckArgs};
use plimsoll_conformance::load::{self, LoadArgs};
use plimsoll_conformance::session::{self, Fatal, Started, Subject, SubjectArgs};
use plimsoll_server::{Config, Embedded};

/// The embedded server `check` judges: hooks on, timeouts scaled down unless `full_timeouts`,
/// and a small queue so T2 has something to order ([`check::embedded_overrides`]).
pub fn check_config(full_timeouts: bool) -> Result<Config, Fatal> {
    config(&check::embedded_overrides(full_timeouts))
}

/// The embedded server load profiles run against: the contract's own values (queue capacity
/// included, unlike `check`'s), hooks on.
pub fn load_config() -> Result<Config, Fatal> {
    config(&[])
}

fn config(overrides: &[(&str, &str)]) -> Result<Config, Fatal> {
    let mut config =
        Config::from_overrides(overrides).map_err(|e| Fatal::Embedded(e.to_string()))?;
    config.hooks_enabled = true;
    Ok(config)
}

/// Starts the reference server from `config` in a workspace of its own, as a run's subject.
pub async fn start(config: Config) -> Result<Subject, Fatal> {
    let server = Embedded::start(config)
        .await
        .map_err(|e| Fatal::Embedded(e.to_string()))?;
    Ok(Subject::started(
        server.url(),
        server.temp_dir(),
        server.log_path(),
        Box::new(Running(server)),
    ))
}

/// The embedded server seen as a [`Started`] subject.
struct Running(Embedded);

impl Started for Running {
    fn stop(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let _ = self.0.shutdown().await;
        })
    }
}

/// The subject `args` names: its `--target`, or the embedded server started from `config`.
async fn subject(
    args: &SubjectArgs,
    server_log: Option<std::path::PathBuf>,
    config: impl FnOnce() -> Result<Config, Fatal>,
) -> Result<Subject, Fatal> {
    match &args.target {
        Some(url) => Subject::external(url, args.temp_dir.clone(), server_log),
        None => start(config()?).await,
    }
}

/// `plimsoll check` from the command line; returns the exit code.
pub fn run_check(args: CheckArgs) -> u8 {
    session::run_command("check", async || {
        let subject = subject(&args.subject, args.server_log.clone(), || {
            check_config(args.full_timeouts)
        })
        .await?;
        check::execute(&args, subject).await
    })
}

/// `plimsoll load` from the command line; returns the exit code.
pub fn run_load(args: LoadArgs) -> u8 {
    session::run_command("load", async || {
        let subject = subject(&args.subject, None, load_config).await?;
        load::execute(&args, subject).await
    })
}
