//! `plimsoll check`: runs the conformance checks against a target (or the embedded reference
//! server) and reports clause by clause; in bridge mode ([`bridge`]) the relay clauses against
//! a relay bridge whose both ends the checker plays.

pub mod bridge;
mod fault;
pub mod matrix;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;

use plimsoll_spec::CheckId;

use crate::baseline::{Baseline, BaselineArgs};
pub use crate::checks::contract::contract_result;
use crate::checks::pool::hold_first;
use crate::checks::registry::{self, Run};
use crate::checks::selected;
use crate::remote::Target;
use crate::remote::relay::RelayEnd;
use crate::report::{ReportFiles, terminal};
pub use crate::session::Fatal;
use crate::session::{self, ContractSource, Opening, Partial, Subject, SubjectArgs};
use crate::verdict::{CheckResult, RunReport};
use crate::waivers::Waivers;
use plimsoll_fault::FaultLine;

/// Where the checker plays a subject's relay without `--relay-listen`: a free loopback port.
const RELAY_ON_LOOPBACK: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));

/// `plimsoll check`'s command line: what is checked, which checks run and how, and the reports.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CheckArgs {
    /// What is checked: `--target`, `--contract`, `--allow-overrides`, `--temp-dir`.
    #[command(flatten)]
    pub subject: SubjectArgs,
    /// The implementation's log file, if the checker can read it (F3 needs it; must be
    /// readable at the start).
    #[arg(long, value_name = "FILE", help_heading = "Target")]
    pub server_log: Option<PathBuf>,
    /// Play the relay on ADDR for a bridge that dials its relay (seed 003's direction): the
    /// relay checks take the socket the bridge dials instead of dialling the target's relay
    /// endpoint. The embedded server's bridge always dials the checker (on a free loopback port
    /// unless this is given).
    #[arg(long, value_name = "ADDR", help_heading = "Target")]
    pub relay_listen: Option<std::net::SocketAddr>,
    /// Check a relay bridge instead of an HTTP service: start CMD (with `sh -c`), `{relay_url}`
    /// and `{upstream_url}` filled in; the checker plays the relay it dials and the local handler
    /// it relays to, runs R1–R6, and stops it (SIGTERM, timed) at the end.
    #[arg(
        long,
        value_name = "CMD",
        help_heading = "Bridge",
        conflicts_with = "target"
    )]
    pub bridge_command: Option<String>,
    /// Bridge mode for a bridge started by hand: serve its local handler on ADDR (the relay on
    /// `--relay-listen`, else a free loopback port), print both URLs and wait for it to dial.
    #[arg(
        long,
        value_name = "ADDR",
        help_heading = "Bridge",
        conflicts_with = "target"
    )]
    pub upstream_listen: Option<std::net::SocketAddr>,
    /// Fail every check that skips, with its reason (a gate must not pass on missing evidence).
    /// Checks that do not apply to the target's values still pass, saying so.
    #[arg(long, help_heading = "Run")]
    pub strict: bool,
    /// Embedded server only: keep the contract's real timeouts instead of scaling them down.
    #[arg(long, help_heading = "Run")]
    pub full_timeouts: bool,
    /// Run only these check ids (comma-separated: T1, ..., R6, API); an unknown id is an error.
    #[arg(long, value_delimiter = ',', value_name = "IDS", help_heading = "Run")]
    pub only: Vec<CheckId>,
    /// Skip these check ids (comma-separated). The `contract` check always runs.
    #[arg(long, value_delimiter = ',', value_name = "IDS", help_heading = "Run")]
    pub skip: Vec<CheckId>,
    /// Known deviations, a TOML file of `[[waiver]]` entries (check, reason, link, expires): a
    /// waived failure is reported as waived and does not fail the run; an expired waiver fails;
    /// one for a check that passes is reported as no longer needed (a failure under --strict).
    #[arg(long, value_name = "FILE", help_heading = "Run")]
    pub waivers: Option<PathBuf>,
    /// Trials per timing check (default: the contract's tolerances.trials).
    #[arg(long, value_name = "N", help_heading = "Run")]
    pub trials: Option<u32>,
    /// Run the checks through one fault, as Toxiproxy names it (`latency:latency=50,jitter=10`,
    /// `slicer:average_size=1,delay=20000`, `reset_peer:timeout=500`, `blackhole`,
    /// `bandwidth:rate=64`, `slow_close:delay=300`; each takes `stream=upstream|downstream|both`),
    /// or a standard fault by name (`latency`, `slicer`, `bandwidth`, `trickle`, `vanish`):
    /// every bound the fault lengthens is listed in the report. The relay's WebSocket crosses
    /// it too, whichever end dials.
    #[arg(long, value_name = "SPEC", help_heading = "Run", value_parser = plimsoll_fault::standard::parse)]
    pub fault: Option<plimsoll_fault::Fault>,
    /// Run the suite once per fault of a standard set (`quick`: latency, slicer, bandwidth;
    /// `full`: also trickle and vanish), then print a matrix of checks × faults; `--json` gets
    /// the matrix, and every report file asked for is also written per run with the fault's
    /// name (`report.latency.json`).
    #[arg(
        long,
        value_name = "SET",
        help_heading = "Run",
        hide_possible_values = true,
        conflicts_with_all = ["fault", "bridge_command", "upstream_listen"]
    )]
    pub fault_set: Option<matrix::FaultSet>,
    /// Seed of the fault's draws (jitter, slice sizes): the same seed, the same draws.
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = "Run")]
    pub seed: u64,
    /// The reports: `--json`, `--junit`, `--html`, `--quiet`.
    #[command(flatten)]
    pub reports: ReportFiles,
    /// An earlier run to compare the figures with: `--baseline`, `--fail-on-regression`.
    #[command(flatten)]
    pub baseline: BaselineArgs,
}

impl CheckArgs {
    /// Whether a relay bridge is checked (`--bridge-command` or `--upstream-listen`).
    pub fn bridge_mode(&self) -> bool {
        self.bridge_command.is_some() || self.upstream_listen.is_some()
    }

    /// Where the checker plays a subject's relay in this run: on `--relay-listen` (a free
    /// loopback port without it), the bridge's sockets crossing the run's `--fault`, drawn from
    /// its `--seed`, as the checker's own requests do.
    pub fn relay_end(&self) -> RelayEnd {
        RelayEnd {
            addr: self.relay_listen.unwrap_or(RELAY_ON_LOOPBACK),
            line: self.fault.map(|fault| FaultLine::new(fault, self.seed)),
        }
    }

    /// The embedded reference server with every default and no progress display: what a test
    /// starts from (`CheckArgs { trials: Some(2), ..CheckArgs::embedded() }`).
    pub fn embedded() -> CheckArgs {
        CheckArgs {
            reports: ReportFiles::quiet(),
            ..CheckArgs::default()
        }
    }
}

/// The overrides the embedded server runs with: timeouts scaled down so the suite is quick,
/// and a small queue so T2 has something to order.
pub fn embedded_overrides(full_timeouts: bool) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![("QUEUE_CAPACITY", "2")];
    if !full_timeouts {
        v.push(("DIGITIZE_TIMEOUT_MS", "2000"));
        v.push(("EXPORT_TIMEOUT_MS", "1000"));
        v.push(("UPLOAD_READ_TIMEOUT_MS", "1000"));
        v.push(("HEAD_TIMEOUT_MS", "2000"));
    }
    v
}

/// How long the run's opening request may take before the target counts as unreachable.
const OPENING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs the suite against `subject` (an external target, or a server the binary started with
/// [`embedded_overrides`]).
pub async fn execute(args: &CheckArgs, subject: Subject) -> Result<RunReport, Fatal> {
    session::judge(
        &args.subject,
        subject,
        &args.reports,
        async |source, subject, partial| run_suite(args, source, subject, partial).await,
    )
    .await
}

async fn run_suite(
    args: &CheckArgs,
    source: &ContractSource,
    subject: &Subject,
    partial: &Partial,
) -> Result<RunReport, Fatal> {
    let judging = Judging::of(args)?;
    if subject.upstream.is_some() {
        return bridge::run_suite(args, &judging, source, subject, partial).await;
    }
    // The opening requests (`/v1/contract`) are answered at once by any honest target.
    let client = reqwest::Client::builder()
        .connect_timeout(OPENING_TIMEOUT)
        .timeout(OPENING_TIMEOUT)
        .build()
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    let Opening {
        reconciliation,
        allow_overrides,
        mut manifest,
    } = session::open(&client, "plimsoll".into(), &args.subject, source, subject).await?;
    let expected = reconciliation.effective.clone();
    manifest.trials = args.trials.unwrap_or(expected.tolerances.trials);
    manifest.strict = args.strict;
    let faulted = fault::begin(args, &subject.url, &expected, &mut manifest).await?;
    partial.begin(&manifest);
    let style = args.reports.style();
    // What is checked, before the first request that could fail.
    println!("{}", terminal::header(&manifest, style));
    let base = faulted.as_ref().map_or(&subject.url, |f| &f.base);
    let target = Arc::new(
        Target::new(
            base.clone(),
            expected,
            subject.temp_dir.clone(),
            subject.server_log.clone(),
            manifest.trials,
        )
        .with_relay(subject.relay.clone())
        .with_process(subject.process(args.subject.pid))
        .with_adjustments(
            faulted
                .as_ref()
                .map(|f| f.adjustments.clone())
                .unwrap_or_default(),
        ),
    );

    // Hooks make saturation, timeouts and failures deterministic; most checks need them. Through
    // a fault that withholds every answer no check sends a request, so neither does the probe.
    if target.adjustments.unobservable().is_none() {
        hooks_on(&target).await?;
    }

    // A standard fault (`--fault trickle`) makes the checks it was chosen for, unless asked.
    let only = match args.fault.as_ref().and_then(plimsoll_fault::standard::of) {
        Some(named) => matrix::checks_under(named, &args.only),
        None => args.only.clone(),
    };
    let checks: Vec<_> = selected(&only, &args.skip).collect();
    let results = run_checks(args, &judging, &checks, &target, partial, |_| {
        contract_result(&reconciliation, allow_overrides)
    })
    .await;
    let report = RunReport { manifest, results };
    print!(
        "{}",
        terminal::summary(&report, args.reports.html.as_deref(), style)
    );
    fault::end(faulted, subject.relay.as_deref());
    Ok(report)
}

/// Whether the target takes test hooks: a hold on the first stage is obeyed, not refused.
async fn hooks_on(target: &Target) -> Result<(), Fatal> {
    let probe = target
        .digitize(Some(&hold_first(target, 1)))
        .await
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    if target.is_error(&probe, target.expected.hooks.disabled_code) {
        return Err(Fatal::Hooks(format!(
            "the target refuses test hooks: start it with {}=1",
            target.expected.hooks.env
        )));
    }
    Ok(())
}

/// What a finished check's verdict is judged against besides the target: the `--baseline`
/// run's figures and the `--waivers`, both read before the first request, so a bad file stops
/// the run at once (exit 2).
pub(crate) struct Judging {
    baseline: Option<Baseline>,
    waivers: Waivers,
}

impl Judging {
    fn of(args: &CheckArgs) -> Result<Judging, Fatal> {
        let usage = |e: &dyn std::fmt::Display| Fatal::Usage(e.to_string());
        let waivers = match &args.waivers {
            Some(path) => Waivers::load(path).map_err(|e| usage(&e))?,
            None => Waivers::default(),
        };
        let baseline = args.baseline.load().map_err(|e| usage(&e))?;
        Ok(Judging { baseline, waivers })
    }

    /// The baseline first (a regression may fail the check), then the check's waiver (which
    /// may waive that failure as any other).
    fn judge(&self, result: &mut CheckResult, args: &CheckArgs, today: time::Date) {
        if let Some(baseline) = &self.baseline {
            baseline.compare(result, args.baseline.fail_on_regression);
        }
        self.waivers.apply_one(result, today, args.strict);
    }
}

/// Runs `checks` in order against `target`, one progress line each (`session` answers the
/// checks that judge the session rather than the target); `--strict` turns skips into failures,
/// then the `--baseline` comparison, then each check's waiver, if any.
async fn run_checks(
    args: &CheckArgs,
    judging: &Judging,
    checks: &[&'static registry::Check],
    target: &Arc<Target>,
    partial: &Partial,
    session: impl Fn(&registry::Check) -> CheckResult,
) -> Vec<CheckResult> {
    let style = args.reports.style();
    let progress = terminal::Progress::new(checks.len(), style.color);
    let mut results = Vec::new();
    let today = crate::waivers::today();
    for check in checks {
        let result = match check.run {
            Run::Session => session(check),
            Run::Target(run) => {
                partial.running(check.id.as_str());
                progress.start(check.id.as_str(), &check.title(&target.expected));
                registry::run(check, run, target).await
            }
        };
        let mut result = if args.strict {
            CheckResult {
                verdict: result.verdict.strict(),
                ..result
            }
        } else {
            result
        };
        judging.judge(&mut result, args, today);
        // One line per finished check: above the spinner on a terminal, plain lines in CI logs.
        progress.line(&terminal::progress_line(&result, style));
        partial.finished(&result);
        results.push(result);
    }
    progress.finish();
    results
}
