//! `plimsoll check`: runs the conformance checks against a target (or the embedded reference
//! server) and reports clause by clause.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use plimsoll_server::Config;
use plimsoll_spec::Contract;

use crate::checks;
use crate::report;
pub use crate::session::Fatal;
use crate::session::{self, ContractSource, Mode, Subject};
use crate::target::Target;
use crate::verdict::{CheckResult, Manifest, RunReport, Verdict};

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Base URL of the implementation (default: start the embedded reference server).
    #[arg(long)]
    pub target: Option<String>,
    /// Contract to judge against (default: the embedded spec/contract.toml).
    #[arg(long)]
    pub contract: Option<PathBuf>,
    /// Accept differences between the contract and the target's /v1/contract (judge the target's values).
    #[arg(long)]
    pub allow_overrides: bool,
    /// Embedded server only: keep the contract's real timeouts instead of scaling them down.
    #[arg(long)]
    pub full_timeouts: bool,
    /// Run only these clause ids (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Skip these clause ids (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
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
        ),
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
    let effective = session::effective_contract(&client, &base, contract).await?;
    let differences = contract_differences(contract, &effective);
    let scaled = mode == Mode::Embedded || args.allow_overrides;
    let expected = if scaled {
        serde_json::from_value::<Contract>(effective.clone()).map_err(|e| {
            Fatal::Contract(format!(
                "the target's effective contract does not parse: {e}"
            ))
        })?
    } else {
        contract.clone()
    };
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
        .digitize(Some(&format!(
            "hold={}:1",
            target.expected.stages.digitize[0]
        )))
        .await
        .map_err(Fatal::Unreachable)?;
    if probe.status == 400 && probe.code() == target.expected.hooks.disabled_code.as_str() {
        return Err(Fatal::Hooks(format!(
            "the target refuses test hooks: start it with {}=1",
            target.expected.hooks.env
        )));
    }

    let selected: Vec<&str> = checks::ALL
        .iter()
        .copied()
        .filter(|id| args.only.is_empty() || args.only.iter().any(|o| o.eq_ignore_ascii_case(id)))
        .filter(|id| !args.skip.iter().any(|s| s.eq_ignore_ascii_case(id)))
        .collect();
    let color = !args.quiet && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let progress = report::terminal::Progress::new(selected.len() + 1, color);
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

    let contract_check = contract_result(&differences, scaled);
    print(&contract_check);
    results.push(contract_check);
    for id in selected {
        let title = target
            .expected
            .clause_list()
            .iter()
            .find(|c| c.id.as_str() == id)
            .map(|c| c.title.to_owned())
            .unwrap_or_default();
        progress.start(id, &title);
        let result = checks::run(id, &target).await;
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
            differences,
            scaled,
            effective,
            trials,
            seed: 0,
            started_unix_ms,
        },
        results,
    };
    println!("{}", report::terminal::summary_table(&report, color));
    Ok(report)
}

/// Differences between the contract and a target's effective values. `[load]` holds the load
/// generator's own settings, not promises of the implementation, so it is never compared.
pub fn contract_differences(contract: &Contract, effective: &serde_json::Value) -> Vec<String> {
    let without_load = |v: &serde_json::Value| {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("load");
        }
        v
    };
    let ours = serde_json::to_value(contract).expect("a contract serializes");
    diff(&without_load(&ours), &without_load(effective))
}

/// The `contract` result that opens every run: pass when the values match or differences are
/// allowed (and then listed as evidence).
pub fn contract_result(differences: &[String], scaled: bool) -> CheckResult {
    let started = Instant::now();
    let verdict = if differences.is_empty() || scaled {
        Verdict::Pass
    } else {
        Verdict::Fail(format!(
            "{} value(s) differ from the contract; pass --allow-overrides to judge the target's own values",
            differences.len()
        ))
    };
    CheckResult {
        id: "contract".into(),
        clause: "contract".into(),
        title: "Effective values match the contract".into(),
        expected: "GET /v1/contract equals the contract".into(),
        observed: if differences.is_empty() {
            "identical".into()
        } else {
            format!(
                "{} difference(s){}",
                differences.len(),
                if scaled { " (allowed: scaled run)" } else { "" }
            )
        },
        verdict,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        evidence: differences.to_vec(),
        trials_ms: Vec::new(),
        timeline: Vec::new(),
    }
}

/// Leaf-by-leaf differences between two JSON documents, as `path: expected → actual`.
pub fn diff(expected: &serde_json::Value, actual: &serde_json::Value) -> Vec<String> {
    fn leaves(v: &serde_json::Value, path: String, out: &mut BTreeMap<String, String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    leaves(
                        v,
                        if path.is_empty() {
                            k.clone()
                        } else {
                            format!("{path}.{k}")
                        },
                        out,
                    );
                }
            }
            other => {
                out.insert(path, other.to_string());
            }
        }
    }
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    leaves(expected, String::new(), &mut a);
    leaves(actual, String::new(), &mut b);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            format!(
                "{k}: {} → {}",
                a.get(k).map_or("(absent)", String::as_str),
                b.get(k).map_or("(absent)", String::as_str)
            )
        })
        .collect()
}
