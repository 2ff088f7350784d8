//! The embedded subject: the reference server a run starts for itself when no `--target` is
//! given, in a workspace of its own (temp folder, log file) that the checker may read.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use plimsoll_conformance::check::embedded_overrides;
use plimsoll_conformance::check::matrix::FaultSet;
use plimsoll_conformance::remote::relay::{RelayEnd, RelayListener};
use plimsoll_conformance::session::{self, Fatal, Started, Subject};
use plimsoll_server::{Config, Embedded};

use crate::args::{CheckArgs, LoadArgs, SubjectArgs};
use crate::{check, load};

/// The embedded server `check` judges: hooks on, timeouts scaled down unless `full_timeouts`,
/// and a small queue so T2 has something to order ([`embedded_overrides`]).
pub fn check_config(full_timeouts: bool) -> Result<Config, Fatal> {
    config(&embedded_overrides(full_timeouts))
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
/// With `relay` (a run's [`CheckArgs::relay_end`]), the checker plays the relay there: the
/// server's bridge dials it, as a mesh node's bridge dials its relay (seed 003), and the relay
/// checks take that socket.
pub async fn start(mut config: Config, relay: Option<RelayEnd>) -> Result<Subject, Fatal> {
    let listener = match relay {
        Some(end) => {
            let listener = listen(end).await?;
            config.relay_url = Some(listener.url().to_owned());
            Some(listener)
        }
        None => None,
    };
    let server = Embedded::start(config)
        .await
        .map_err(|e| Fatal::Embedded(e.to_string()))?;
    let subject = Subject::started(
        server.url(),
        server.temp_dir(),
        server.log_path(),
        Box::new(Running(server)),
    );
    Ok(match listener {
        Some(listener) => subject.with_relay(listener),
        None => subject,
    })
}

/// The checker's relay listener at `end`.
async fn listen(end: RelayEnd) -> Result<Arc<RelayListener>, Fatal> {
    let addr = end.addr;
    end.listen()
        .await
        .map(Arc::new)
        .map_err(|e| Fatal::Usage(format!("cannot listen as the relay on {addr}: {e}")))
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
/// With `relay`, the checker plays the subject's relay there.
async fn subject(
    args: &SubjectArgs,
    server_log: Option<std::path::PathBuf>,
    relay: Option<RelayEnd>,
    config: impl FnOnce() -> Result<Config, Fatal>,
) -> Result<Subject, Fatal> {
    match &args.target {
        Some(url) => {
            let subject = Subject::external(url, args.temp_dir.clone(), server_log)?;
            let Some(end) = relay else {
                return Ok(subject);
            };
            let listener = listen(end).await?;
            println!(
                "Relay: start the bridge under test dialling {}",
                listener.url()
            );
            Ok(subject.with_relay(listener))
        }
        None => {
            refuse_a_contract_the_embedded_server_does_not_serve(args)?;
            start(config()?, relay).await
        }
    }
}

/// The embedded server serves the reference API: a contract without one (another service's)
/// describes a service it is not, so the run needs `--target`, and says so before it starts.
fn refuse_a_contract_the_embedded_server_does_not_serve(args: &SubjectArgs) -> Result<(), Fatal> {
    let Some(path) = &args.contract else {
        return Ok(());
    };
    match plimsoll_spec::Contract::from_file(path) {
        Ok(contract) if !contract.is_reference() => Err(Fatal::Usage(format!(
            "{} describes another service than the embedded reference server (it declares no \
             [api]): give that service's URL with --target",
            path.display()
        ))),
        // A contract the loader refuses is reported where the run reads it.
        _ => Ok(()),
    }
}

/// `plimsoll check` from the command line; returns the exit code.
pub fn run_check(args: CheckArgs) -> u8 {
    if let Some(set) = args.fault_set {
        return run_fault_set(args, set);
    }
    session::run_command("check", async || {
        if args.bridge_mode() {
            let subject = check::bridge::subject(&args).await?;
            return check::execute(&args, subject).await;
        }
        let subject = subject(
            &args.subject,
            args.server_log.clone(),
            relay_end(&args),
            || check_config(args.full_timeouts),
        )
        .await?;
        check::execute(&args, subject).await
    })
}

/// `plimsoll check --fault-set SET`: the suite once per fault, each against a subject of its
/// own (a fresh embedded server per run), then the matrix; returns the exit code.
fn run_fault_set(args: CheckArgs, set: FaultSet) -> u8 {
    session::run_command("check", async || {
        check::matrix::execute(&args, set, async |run: &CheckArgs| {
            subject(&run.subject, run.server_log.clone(), relay_end(run), || {
                check_config(run.full_timeouts)
            })
            .await
        })
        .await
    })
}

/// Where the checker plays the relay in a run of `args`: the embedded server's bridge always
/// dials the checker; a target's only with `--relay-listen`.
fn relay_end(args: &CheckArgs) -> Option<RelayEnd> {
    (args.subject.target.is_none() || args.relay_listen.is_some()).then(|| args.relay_end())
}

/// `plimsoll load` from the command line; returns the exit code.
pub fn run_load(args: LoadArgs) -> u8 {
    session::run_command("load", async || {
        let subject = subject(&args.subject, None, None, load_config).await?;
        load::execute(&args, subject).await
    })
}
