//! `plimsoll check`: runs the conformance checks against a target (or the embedded reference
//! server) and reports clause by clause.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use plimsoll_server::Config;

use crate::checks::contract;
pub use crate::checks::contract::contract_result;
use crate::checks::pool::hold_first;
use crate::checks::registry::{self, CheckId, Run};
use crate::checks::selected;
use crate::report;
pub use crate::session::Fatal;
use crate::session::{self, ContractSource, Mode, Subject};
use crate::target::Target;
use crate::verdict::{CheckResult, Manifest, RunReport};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct CheckArgs {
    /// Base URL of the implementation (default: start the embedded reference server).
    #[arg(long)]
    pub target: Option<String>,
    /// Contract to judge against (default: the embedded spec/contract.toml).
    #[arg(long)]
    pub contract: Option<PathBuf>,
    /// Adopt the target's /v1/contract values in fields the contract lets a deployment override
    /// (each listed in the report); any other difference is refused and fails `contract`.
    #[arg(long)]
    pub allow_overrides: bool,
    /// Fail every check that skips, with its reason (a gate must not pass on missing evidence).
    /// Checks that do not apply to the target's values still pass, saying so.
    #[arg(long)]
    pub strict: bool,
    /// Embedded server only: keep the contract's real timeouts instead of scaling them down.
    #[arg(long)]
    pub full_timeouts: bool,
    /// Run only these check ids (comma-separated: T1, ..., R6, API); an unknown id is an error.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<CheckId>,
    /// Skip these check ids (comma-separated). The `contract` check always runs.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<CheckId>,
    /// Trials per timing check (default: the contract's tolerances.trials).
    #[arg(long)]
    pub trials: Option<u32>,
    /// The implementation's temp folder, if the checker can see it.
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// The implementation's log file, if the checker can read it.
    #[arg(long)]
    pub server_log: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a JUnit XML report here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write a self-contained HTML report here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// No progress display and colours (also when stdout is not a terminal).
    #[arg(long)]
    pub quiet: bool,
}

/// The overrides the embedded server runs with: timeouts scaled down so the suite is quick,
/// and a small queue so T2 has something to order.
pub fn embedded_overrides(full_timeouts: bool) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![("QUEUE_CAPACITY", "2")];
    if !full_timeouts {
        v.push(("DIGITIZE_TIMEOUT_MS", "2000"));
        v.push(("EXPORT_TIMEOUT_MS", "1000"));
        v.push(("UPLOAD_READ_TIMEOUT_MS", "1000"));
    }
    v
}

/// The embedded server's config: hooks on, scaled values; temp root and log are set at start.
pub fn embedded_config(full_timeouts: bool) -> Result<Config, Fatal> {
    let mut config = Config::from_overrides(&embedded_overrides(full_timeouts))
        .map_err(|e| Fatal::Embedded(e.to_string()))?;
    config.hooks_enabled = true;
    Ok(config)
}

/// `plimsoll check` from the command line; returns the exit code.
pub fn run(args: CheckArgs) -> u8 {
    let runtime = match session::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("plimsoll check: cannot start the runtime: {e}");
            return 2;
        }
    };
    let result = runtime.block_on(async {
        match &args.target {
            Some(_) => execute(&args, None).await,
            None => {
                let config = embedded_config(args.full_timeouts)?;
                execute(&args, Some(config)).await
            }
        }
    });
    match result {
        Ok(report) => u8::from(report.failed() > 0),
        Err(e) => {
            eprintln!("plimsoll check: cannot proceed: {e}");
            2
        }
    }
}

/// Runs the suite against `args.target`, or against a server started from `embedded`.
pub async fn execute(args: &CheckArgs, embedded: Option<Config>) -> Result<RunReport, Fatal> {
    let source = ContractSource::read(args.contract.as_deref())?;
    let subject = match embedded {
        Some(config) => Subject::embedded(config).await?,
        None => Subject::external(
            args.target.as_deref().unwrap_or_default(),
            args.temp_dir.clone(),
            args.server_log.clone(),
        )?,
    };
    let result = run_suite(args, &source, &subject).await;
    subject.finish().await;
    let report = result?;
    report::write_all(
        &report,
        args.json.as_deref(),
        args.junit.as_deref(),
        args.html.as_deref(),
    )?;
    Ok(report)
}

async fn run_suite(
    args: &CheckArgs,
    source: &ContractSource,
    subject: &Subject,
) -> Result<RunReport, Fatal> {
    let contract = &source.contract;
    let base = subject.url.clone();
    let mode = subject.mode();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let client = reqwest::Client::new();
    // The embedded server runs with overrides the checker set itself: adopt them.
    let allow_overrides = mode == Mode::Embedded || args.allow_overrides;
    let reconciliation = session::reconcile(&client, &base, contract, allow_overrides).await?;
    let expected = reconciliation.effective.clone();
    let trials = args.trials.unwrap_or(expected.tolerances.trials);
    let target = Arc::new(Target::new(
        base.clone(),
        expected,
        subject.temp_dir.clone(),
        subject.server_log.clone(),
        trials,
    ));

    // Hooks make saturation, timeouts and failures deterministic; most checks need them.
    let probe = target
        .digitize(Some(&hold_first(&target, 1)))
        .await
        .map_err(Fatal::Unreachable)?;
    if target.is_error(&probe, target.expected.hooks.disabled_code) {
        return Err(Fatal::Hooks(format!(
            "the target refuses test hooks: start it with {}=1",
            target.expected.hooks.env
        )));
    }

    let selected: Vec<_> = selected(&args.only, &args.skip).collect();
    let color = !args.quiet && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let progress = report::terminal::Progress::new(selected.len(), color);
    // One line per finished check: above the spinner on a terminal, plain lines in CI logs.
    let print = |r: &CheckResult| {
        let line = report::terminal::progress_line(r, color);
        if color {
            progress.finish_one(&line)
        } else {
            println!("{line}")
        }
    };
    let mut results = Vec::new();
    for check in selected {
        let result = match check.run {
            Run::Session => contract_result(&reconciliation, allow_overrides),
            Run::Target(run) => {
                progress.start(check.id.as_str(), &check.title(&target.expected));
                registry::run(check, run, &target).await
            }
        };
        let result = if args.strict {
            CheckResult {
                verdict: result.verdict.strict(),
                ..result
            }
        } else {
            result
        };
        print(&result);
        results.push(result);
    }
    progress.finish();

    let report = RunReport {
        manifest: Manifest {
            tool: "plimsoll".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            target: base,
            mode: mode.as_str().into(),
            contract_hash: source.hash(),
            contract_version: contract.contract.version.clone(),
            differences: contract::differences(&reconciliation),
            scaled: !reconciliation.adopted.is_empty(),
            strict: args.strict,
            effective: serde_json::to_value(&reconciliation.effective)
                .expect("a contract serializes"),
            adopted: reconciliation.adopted,
            refused: reconciliation.refused,
            claim_unreadable: reconciliation.unreadable,
            trials,
            seed: 0,
            started_unix_ms,
        },
        results,
    };
    println!("{}", report::terminal::summary_table(&report, color));
    Ok(report)
}
