//! What every run (`check`, `load`) sets up before its first request and tears down after its
//! last: the plan naming what is checked, the contract it judges by, the subject under test
//! (an embedded reference server or an external target), the target's claimed effective values,
//! and the exit code. One lifecycle, so the two commands cannot drift apart.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plimsoll_spec::{Contract, EMBEDDED_TOML, Reconciliation};

use crate::checks::contract;
use crate::remote::bridge::BridgeProcess;
use crate::remote::process::ProcessSource;
use crate::remote::relay::RelayListener;
use crate::remote::upstream::Upstream;
use crate::verdict::{CheckResult, Manifest, RunReport};

/// Exit code: every verdict passed (skips allowed, unless `--strict`).
pub const EXIT_PASS: u8 = 0;
/// Exit code: a verdict failed.
pub const EXIT_FAIL: u8 = 1;
/// Exit code: the run could not proceed; the reason is one line on stderr.
pub const EXIT_CANNOT_PROCEED: u8 = 2;

/// What a run checks and how long it may take: one plan for `check` and `load` (the binary
/// makes it from the command line's `Target` options and `--timeout`).
#[derive(Debug, Clone)]
pub struct SubjectPlan {
    /// Base URL of the implementation; `None`: the binary starts the embedded reference server.
    pub target: Option<String>,
    /// Contract to judge against; `None`: the embedded `spec/contract.toml`.
    pub contract: Option<PathBuf>,
    /// Adopt the target's claimed values in the fields the contract lets a deployment override.
    pub allow_overrides: bool,
    /// The implementation's temp folder, when the checker can see it.
    pub temp_dir: Option<PathBuf>,
    /// The implementation's process id, to read its memory and open files from /proc.
    pub pid: Option<u32>,
    /// Certificate authorities (a PEM file) trusted for an `https://` target besides the
    /// system's roots.
    pub ca_file: Option<PathBuf>,
    /// How long the whole run may take before it is stopped, its reports marked incomplete.
    pub timeout: Duration,
}

impl Default for SubjectPlan {
    /// The embedded reference server, the embedded contract, [`DEFAULT_TIMEOUT_S`].
    fn default() -> SubjectPlan {
        SubjectPlan {
            target: None,
            contract: None,
            allow_overrides: false,
            temp_dir: None,
            pid: None,
            ca_file: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
        }
    }
}

/// `--timeout`'s default: a run of the full contract timeouts (`--full-timeouts`, B1 waiting
/// out the contract's deadlines in every trial) takes about a quarter of it on a 2-core machine, so only a run that hangs
/// reaches it.
pub const DEFAULT_TIMEOUT_S: u64 = 1800;

/// How long the subject may take to stop once the run was stopped: with the runtime's own
/// shutdown after it, the process exits within 2 s of the signal.
const STOPPED_FINISH: Duration = Duration::from_millis(1000);

/// What a finished command counts as failed: one failure is exit code 1; a run that judged no
/// clause at all has nothing to say (exit code 2).
pub trait Failures {
    /// Verdicts that failed.
    fn failures(&self) -> usize;
    /// Whether any clause was judged (passed, failed or waived), rather than every one not
    /// applicable or skipped.
    fn judged(&self) -> bool;
}

impl Failures for RunReport {
    fn failures(&self) -> usize {
        self.failed()
    }

    fn judged(&self) -> bool {
        self.judged_a_clause()
    }
}

/// Runs a command that judges a target (`check`, `load`) from the command line: starts the
/// runtime, runs `execute` on it, and maps the outcome to the exit code ([`EXIT_PASS`],
/// [`EXIT_FAIL`], [`EXIT_CANNOT_PROCEED`] with a one-line reason on stderr).
pub fn run_command<Fut, R>(command: &str, execute: impl FnOnce() -> Fut) -> u8
where
    Fut: Future<Output = Result<R, Fatal>>,
    R: Failures,
{
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("plimsoll {command}: cannot start the runtime: {e}");
            return EXIT_CANNOT_PROCEED;
        }
    };
    let outcome = runtime.block_on(execute());
    // Work the run left behind (a held job's blocking thread) must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(300));
    match outcome {
        Ok(report) if report.failures() > 0 => EXIT_FAIL,
        Ok(report) if !report.judged() => {
            eprintln!(
                "plimsoll {command}: nothing to judge: no clause was judged (each check that ran without one is listed as not applicable, with why; `--only` or `--skip` may have left no clause to run)"
            );
            EXIT_CANNOT_PROCEED
        }
        Ok(_) => EXIT_PASS,
        Err(e) => {
            eprintln!("plimsoll {command}: cannot proceed: {e}");
            EXIT_CANNOT_PROCEED
        }
    }
}

/// One judged run: reads the contract, runs `run` on it and the subject, and stops the subject
/// whatever happened; the caller writes the report files. A stop signal or the plan's timeout
/// ends `run` where it is: what it recorded in its [`Partial`] comes back, marked incomplete,
/// in [`Fatal::Stopped`].
pub async fn judge(
    plan: &SubjectPlan,
    subject: Subject,
    run: impl AsyncFnOnce(&ContractSource, &Subject, &Partial) -> Result<RunReport, Fatal>,
) -> Result<RunReport, Fatal> {
    let partial = Partial::default();
    let result = match ContractSource::read(plan.contract.as_deref()) {
        Ok(source) => tokio::select! {
            result = run(&source, &subject, &partial) => result,
            why = stop_requested(plan.timeout) => Err(Fatal::Stopped { why, partial: None }),
        },
        Err(e) => Err(e),
    };
    if let Err(Fatal::Stopped { why, .. }) = result {
        let _ = tokio::time::timeout(STOPPED_FINISH, subject.finish()).await;
        let partial = partial.take(&why).map(Box::new);
        return Err(Fatal::Stopped { why, partial });
    }
    subject.finish().await;
    result
}

/// What a run has finished so far, for the reports of a run that is stopped before its end.
#[derive(Default)]
pub struct Partial(std::sync::Mutex<PartialState>);

#[derive(Default)]
struct PartialState {
    manifest: Option<Manifest>,
    results: Vec<CheckResult>,
    running: Option<String>,
}

impl Partial {
    fn lock(&self) -> std::sync::MutexGuard<'_, PartialState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The run's manifest, once it is known (nothing is written for a run stopped before).
    pub fn begin(&self, manifest: &Manifest) {
        self.lock().manifest = Some(manifest.clone());
    }

    /// The check (or phase) now running, named in the reason of a stop.
    pub fn running(&self, what: &str) {
        self.lock().running = Some(what.to_owned());
    }

    /// A finished check's result.
    pub fn finished(&self, result: &CheckResult) {
        let mut state = self.lock();
        state.results.push(result.clone());
        state.running = None;
    }

    /// The report so far, marked incomplete with `why` (and what was running then).
    fn take(&self, why: &str) -> Option<RunReport> {
        let mut state = self.lock();
        let mut manifest = state.manifest.take()?;
        manifest.incomplete = Some(match state.running.take() {
            Some(what) => format!("{why} while {what} ran; later checks did not run"),
            None => why.to_owned(),
        });
        Some(RunReport {
            manifest,
            results: std::mem::take(&mut state.results),
            series: None,
        })
    }
}

/// Resolves when the run must stop: Ctrl-C, SIGTERM, or `timeout` after the start; says which.
async fn stop_requested(timeout: Duration) -> String {
    let deadline = tokio::time::sleep(timeout);
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = deadline => format!("stopped by --timeout after {} s", timeout.as_secs()),
        _ = tokio::signal::ctrl_c() => "stopped by Ctrl-C (SIGINT)".to_owned(),
        _ = terminate => "stopped by SIGTERM".to_owned(),
    }
}

/// Why a run could not proceed (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum Fatal {
    /// The contract file could not be read, or is not a valid contract.
    #[error("contract: {0}")]
    Contract(String),
    /// The target could not be reached, or its client could not be built.
    #[error("target unreachable: {0}")]
    Unreachable(String),
    /// The target refuses test hooks, which the checks and profiles hold requests with; the message
    /// says how to turn them on.
    #[error("{0}")]
    Hooks(String),
    /// The embedded reference server could not be configured or started.
    #[error("embedded server: {0}")]
    Embedded(String),
    /// The command line asks what cannot work (a bad option or path); the message names it.
    #[error("{0}")]
    Usage(String),
    /// A report file asked for could not be written.
    #[error("writing reports: {0}")]
    Report(#[from] std::io::Error),
    /// A stop signal or `--timeout` ended the run: `partial` is what finished before (none when
    /// the run was stopped before it knew what it judges), marked incomplete, for the caller to
    /// write as the reports asked for.
    #[error("{why}")]
    Stopped {
        /// What stopped the run, and what was running then.
        why: String,
        /// The report so far.
        partial: Option<Box<RunReport>>,
    },
}

/// The contract a run judges by, with the text it came from (hashed into the report).
pub struct ContractSource {
    /// The contract, parsed and validated.
    pub contract: Contract,
    /// Its TOML text as read, which the manifest's `contract_hash` fingerprints.
    pub text: String,
}

impl ContractSource {
    /// `--contract FILE`, or the embedded `spec/contract.toml`.
    pub fn read(path: Option<&Path>) -> Result<ContractSource, Fatal> {
        match path {
            Some(path) => {
                let (contract, text) =
                    Contract::read(path).map_err(|e| Fatal::Contract(e.to_string()))?;
                Ok(ContractSource { contract, text })
            }
            None => Ok(ContractSource {
                contract: Contract::embedded().clone(),
                text: EMBEDDED_TOML.to_owned(),
            }),
        }
    }

    /// A stable fingerprint of the contract text (FNV-1a, 64 bit): enough to tell two reports'
    /// contracts apart, not a security measure.
    pub fn hash(&self) -> String {
        let h = self.text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("{h:016x}")
    }
}

/// Whether the run started its own reference server or checks someone else's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A reference server the checker started itself, in the checker's process.
    Embedded,
    /// Someone else's implementation, named by `--target`.
    External,
    /// A relay bridge whose both ends the checker plays.
    Bridge,
}

impl Mode {
    /// The mode as the manifest records it (`embedded`, `external`, `bridge`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Embedded => "embedded",
            Mode::External => "external",
            Mode::Bridge => "bridge",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A subject the checker started itself and must stop when the run ends: the embedded
/// reference server, which the `plimsoll` binary starts (this library never sees its type).
pub trait Started: Send {
    /// Stops the subject (drain, then cancel); the run waits for it before writing reports.
    fn stop(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The implementation under test and what the checker may see of it besides HTTP.
pub struct Subject {
    /// Base URL, without a trailing slash.
    pub url: String,
    /// Its temp folder, when the checker can see it (B1, B3, F1 count orphan files there).
    pub temp_dir: Option<PathBuf>,
    /// Its log file, when the checker can read it (F3).
    pub server_log: Option<PathBuf>,
    /// The relay its bridge dials, when the checker plays it.
    pub relay: Option<Arc<RelayListener>>,
    /// The bridge's local handler, when the checker plays it too (bridge mode).
    pub upstream: Option<Arc<Upstream>>,
    /// The bridge's process, when the checker started it (`--bridge-command`).
    pub bridge: Option<Arc<BridgeProcess>>,
    started: Option<Box<dyn Started>>,
}

impl Subject {
    /// A subject the checker started itself (see [`Started`]): its paths are its own, so they
    /// are not probed.
    pub fn started(
        url: String,
        temp_dir: PathBuf,
        server_log: PathBuf,
        started: Box<dyn Started>,
    ) -> Subject {
        Subject {
            url,
            temp_dir: Some(temp_dir),
            server_log: Some(server_log),
            relay: None,
            upstream: None,
            bridge: None,
            started: Some(started),
        }
    }

    /// A relay bridge dialling `relay` and relaying to `upstream`, both played by the checker;
    /// `bridge` is its process when the checker started it (killed when the run ends).
    pub fn bridge(
        relay: Arc<RelayListener>,
        upstream: Arc<Upstream>,
        bridge: Option<Arc<BridgeProcess>>,
    ) -> Subject {
        let url = match &bridge {
            Some(bridge) => format!("the relay bridge `{}`", bridge.command()),
            None => format!("the relay bridge dialling {}", relay.url()),
        };
        Subject {
            url,
            temp_dir: None,
            server_log: None,
            relay: Some(relay),
            upstream: Some(upstream),
            bridge,
            started: None,
        }
    }

    /// The subject with its bridge dialling `relay`, which the checker plays.
    pub fn with_relay(mut self, relay: Arc<RelayListener>) -> Subject {
        self.relay = Some(relay);
        self
    }

    /// Someone else's service at `url`. A temp folder or log file named on the command line
    /// must be readable now: a path that is wrong would otherwise read as "no orphan files" or
    /// "no log lines", so it stops the run (exit 2) instead.
    pub fn external(
        url: &str,
        temp_dir: Option<PathBuf>,
        server_log: Option<PathBuf>,
    ) -> Result<Subject, Fatal> {
        if let Some(dir) = &temp_dir {
            std::fs::read_dir(dir)
                .map_err(|e| Fatal::Usage(format!("--temp-dir {}: {e}", dir.display())))?;
        }
        if let Some(log) = &server_log {
            let readable = std::fs::metadata(log).and_then(|m| {
                if m.is_file() {
                    std::fs::File::open(log).map(drop)
                } else {
                    Err(std::io::Error::other("not a file"))
                }
            });
            readable.map_err(|e| Fatal::Usage(format!("--server-log {}: {e}", log.display())))?;
        }
        Ok(Subject {
            url: url.trim_end_matches('/').to_owned(),
            temp_dir,
            server_log,
            relay: None,
            upstream: None,
            bridge: None,
            started: None,
        })
    }

    /// Embedded when the checker started the reference server, bridge when it plays a bridge's
    /// ends, external otherwise.
    pub fn mode(&self) -> Mode {
        if self.started.is_some() {
            Mode::Embedded
        } else if self.upstream.is_some() {
            Mode::Bridge
        } else {
            Mode::External
        }
    }

    /// Where its memory and open files can be read: this process for the embedded server,
    /// `/proc/PID` for an external one whose `--pid` was given, else its own metrics.
    pub fn process(&self, pid: Option<u32>) -> ProcessSource {
        match self.mode() {
            Mode::Embedded => ProcessSource::this_process(),
            Mode::External | Mode::Bridge => ProcessSource::external(pid),
        }
    }

    /// Stops a subject the checker started; nothing for an external one.
    pub async fn finish(self) {
        if let Some(started) = self.started {
            started.stop().await;
        }
        if let Some(bridge) = self.bridge {
            bridge.kill();
        }
    }
}

/// The most of a `/v1/contract` claim the checker reads (the honest one is about 40 kB).
const MAX_CLAIM_BYTES: usize = 4 << 20;

/// The target's claimed effective values (`GET /v1/contract`, or the path `[claim]` declares),
/// reconciled with the contract:
/// what the checks judge by, and what was adopted or refused on the way. Only an unreachable
/// target stops the run; a claim that is no contract (a non-2xx answer, not JSON, not of the
/// schema) is recorded as unreadable, fails the `contract` check, and the run goes on with the
/// contract's own values.
pub async fn reconcile(
    client: &reqwest::Client,
    base: &str,
    contract: &Contract,
    allow_overrides: bool,
) -> Result<Reconciliation, Fatal> {
    let Some(path) = contract.claim_path() else {
        // No claim is declared: the contract's own values are judged, and only a target that
        // cannot be reached stops the run (any answer to its root says it can be).
        reachable(client, base).await?;
        return Ok(Reconciliation {
            effective: contract.clone(),
            adopted: Vec::new(),
            refused: Vec::new(),
            unreadable: None,
        });
    };
    let url = format!("{base}{path}");
    let response = client.get(&url).send().await.map_err(|e| {
        Fatal::Unreachable(format!("{base}: {}", crate::remote::body::with_causes(&e)))
    })?;
    let status = response.status();
    let claim = match crate::remote::body::read_capped(response, MAX_CLAIM_BYTES).await {
        Err(e) => Err(format!("reading {url}: {e}")),
        Ok(_) if !status.is_success() => Err(format!("{url} answered {status}")),
        Ok(body) => serde_json::from_slice::<serde_json::Value>(&body)
            .map_err(|e| format!("{url} is not JSON: {e}")),
    };
    Ok(match claim {
        Ok(claimed) => contract.reconcile(&claimed, allow_overrides),
        Err(why) => Reconciliation {
            effective: contract.clone(),
            adopted: Vec::new(),
            refused: Vec::new(),
            unreadable: Some(why),
        },
    })
}

/// Fails with [`Fatal::Unreachable`] unless `base` answers a `GET /` with any status.
async fn reachable(client: &reqwest::Client, base: &str) -> Result<(), Fatal> {
    client
        .get(format!("{base}/"))
        .send()
        .await
        .map(drop)
        .map_err(|e| {
            Fatal::Unreachable(format!("{base}: {}", crate::remote::body::with_causes(&e)))
        })
}

/// What a run knows before its first check: the target's claim reconciled with the contract,
/// and the manifest every report of the run starts with (the terminal header is drawn from it).
pub struct Opening {
    /// The target's claimed values reconciled with the contract: the effective values the checks
    /// judge, what was adopted and what refused.
    pub reconciliation: Reconciliation,
    /// Whether claimed values may be adopted: `--allow-overrides`, or always on the embedded
    /// server, which runs with overrides the checker set itself.
    pub allow_overrides: bool,
    /// `trials` 1, `seed` 0 and `strict` off until the command sets its own.
    pub manifest: Manifest,
}

/// Reads the target's claim and fills in the run's manifest under `tool`.
pub async fn open(
    client: &reqwest::Client,
    tool: String,
    plan: &SubjectPlan,
    source: &ContractSource,
    subject: &Subject,
) -> Result<Opening, Fatal> {
    let allow_overrides = subject.mode() == Mode::Embedded || plan.allow_overrides;
    let reconciliation = reconcile(client, &subject.url, &source.contract, allow_overrides).await?;
    let manifest = manifest(tool, source, subject, &reconciliation);
    Ok(Opening {
        reconciliation,
        allow_overrides,
        manifest,
    })
}

/// The manifest of a run of `tool` on `subject`, judged by `reconciliation`'s effective values:
/// `trials` 1, `seed` 0 and `strict` off until the command sets its own.
pub fn manifest(
    tool: String,
    source: &ContractSource,
    subject: &Subject,
    reconciliation: &Reconciliation,
) -> Manifest {
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    Manifest {
        report_schema: crate::verdict::REPORT_SCHEMA,
        tool,
        version: env!("CARGO_PKG_VERSION").into(),
        target: subject.url.clone(),
        mode: subject.mode().as_str().into(),
        contract_hash: source.hash(),
        contract_version: source.contract.contract.version.clone(),
        differences: contract::differences(reconciliation),
        scaled: !reconciliation.adopted.is_empty(),
        strict: false,
        effective: serde_json::to_value(&reconciliation.effective).expect("a contract serializes"),
        adopted: reconciliation.adopted.clone(),
        refused: reconciliation.refused.clone(),
        claim_unreadable: reconciliation.unreadable.clone(),
        trials: 1,
        seed: 0,
        started_unix_ms,
        fault: None,
        incomplete: None,
    }
}

/// The runtime every command runs on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}
