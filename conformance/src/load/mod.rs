//! `plimsoll load`: goose load profiles judged against the contract and a queueing-theory
//! prediction.
//!
//! The conformance checks prove each clause alone; the profiles prove they hold together under
//! sustained traffic, and that admission admits exactly what it should. Every profile is sized
//! from the contract's `[load]` section relative to capacity, runs goose as a library
//! ([`runner`]), reads `/metrics` throughout ([`scrape`]), predicts the refused fraction
//! ([`prediction`]) and ends in the same [`RunReport`] as `plimsoll check` ([`verdicts`]).
//!
//! This module is the run: contract, subject, what the profiles need to know about it
//! ([`Ctx`]), then [`calibrate`], the profile ([`profiles`]) and the verdicts every profile
//! ends with ([`recovery`]).

pub mod args;
pub mod bench;
mod calibrate;
pub mod prediction;
mod profiles;
mod progress;
mod recovery;
pub mod rng;
pub mod runner;
pub mod scrape;
pub mod verdicts;

pub use args::{LoadArgs, ProfileName};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plimsoll_server::Config;
use plimsoll_spec::{Contract, ErrorCode};

use crate::check::contract_result;
use crate::checks::contract;
use crate::report;
use crate::session::{self, ContractSource, Fatal, Mode, Subject};
use crate::verdict::{CheckResult, Manifest, RunReport};
use runner::RequestTemplate;
use scrape::ProcessSource;
use verdicts::Expectations;

/// The worker pool every profile loads (and whose gauges it reads).
const POOL: &str = "digitize";

/// The embedded server for load profiles: the contract's own values (queue capacity included,
/// unlike `check`'s, which adds a queue so T2 has something to order), hooks on.
pub fn embedded_config() -> Result<Config, Fatal> {
    let mut config = Config::from_overrides(&[]).map_err(|e| Fatal::Embedded(e.to_string()))?;
    config.hooks_enabled = true;
    Ok(config)
}

/// Goose logs through the `log` crate and installs its own logger unless one exists: set up
/// tracing first (with the log bridge) so goose's per-request warnings stay out of the
/// verdict output unless `PLIMSOLL_LOG` asks for them.
fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_env("PLIMSOLL_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,goose=error"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init();
    });
}

/// `plimsoll load` from the command line; returns the exit code.
pub fn run(args: LoadArgs) -> u8 {
    init_tracing();
    let runtime = match session::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("plimsoll load: cannot start the runtime: {e}");
            return 2;
        }
    };
    let result = runtime.block_on(async {
        match &args.target {
            Some(_) => execute(&args, None).await,
            None => execute(&args, Some(embedded_config()?)).await,
        }
    });
    match result {
        Ok(report) => u8::from(report.failed() > 0),
        Err(e) => {
            eprintln!("plimsoll load: cannot proceed: {e}");
            2
        }
    }
}

/// Runs `args.profile` against `args.target`, or against a server started from `embedded`.
pub async fn execute(args: &LoadArgs, embedded: Option<Config>) -> Result<RunReport, Fatal> {
    init_tracing();
    args.validate()?;
    let source = ContractSource::read(args.contract.as_deref())?;
    let (subject, process) = match embedded {
        Some(config) => (
            Subject::embedded(config).await?,
            ProcessSource::this_process(),
        ),
        None => (
            Subject::external(
                args.target.as_deref().unwrap_or_default(),
                args.temp_dir.clone(),
                None,
            )?,
            ProcessSource::external(args.pid),
        ),
    };
    let result = run_profile(args, &source, &subject, process).await;
    subject.finish().await;
    let report = result?;
    args.reports.write(&report)?;
    Ok(report)
}

/// Everything a profile needs about the target, resolved once.
struct Ctx {
    base: String,
    client: reqwest::Client,
    /// The contract the verdicts hold the target to (its own values where allowed), with the
    /// checker's `[load]` section.
    contract: Contract,
    expect: Expectations,
    template: RequestTemplate,
    metrics_url: String,
    temp_dir: Option<PathBuf>,
    color: bool,
}

impl Ctx {
    /// The contract's `[load]` section: the profiles' sizes and bounds.
    fn section(&self) -> &plimsoll_spec::model::Load {
        &self.contract.load
    }

    fn print(&self, r: &CheckResult) {
        println!("{}", report::terminal::progress_line(r, self.color));
    }
}

/// What the verdicts expect of the target, from the contract it is held to.
fn expectations(profile: ProfileName, expected: &Contract) -> Expectations {
    let api = &expected.api.digitize;
    let overloaded = expected.error(ErrorCode::Overloaded);
    let openapi = plimsoll_spec::render::openapi(expected);
    let documented: BTreeSet<u16> = openapi["paths"][api.path.as_str()]["post"]["responses"]
        .as_object()
        .map(|m| m.keys().filter_map(|k| k.parse().ok()).collect())
        .unwrap_or_default();
    Expectations {
        profile: profile.as_str(),
        workers: expected.clauses.t1.value.digitize_workers,
        queue: expected.clauses.t2.value.digitize_queue_capacity,
        documented,
        overloaded_status: overloaded.status,
        overloaded_code: overloaded.code.as_str().to_owned(),
        retry_after_min: expected.clauses.t3.value.min_seconds,
        retry_after_max: Duration::from_millis(expected.clauses.b1.value.digitize_timeout_ms)
            .as_secs()
            .max(1),
    }
}

/// The lightest valid request: smallest design, coarsest fill, fewest colours, so the
/// request's time is its hold and the pipeline's own cost stays small.
fn lightest_request(expected: &Contract) -> RequestTemplate {
    let api = &expected.api.digitize;
    let p = &api.params;
    RequestTemplate {
        path: format!(
            "{}?width_mm={}&density_mm={}&colors={}",
            api.path, p.width_mm.min, p.density_mm.max, p.colors.min
        ),
        content_type: api.content_types[0].clone(),
        body: crate::target::sample_png(),
        hook_header: expected.hooks.header.clone(),
        hold_stage: expected.load.hold_stage.as_str().to_owned(),
        request_id_header: expected.observability.request_id_header.clone(),
        server_timing_header: expected.observability.server_timing_header.clone(),
        retry_after_header: expected.clauses.t3.value.retry_after_header.clone(),
    }
}

async fn run_profile(
    args: &LoadArgs,
    source: &ContractSource,
    subject: &Subject,
    process: ProcessSource,
) -> Result<RunReport, Fatal> {
    let contract = &source.contract;
    let base = subject.url.clone();
    let mode = subject.mode();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    let allow_overrides = mode == Mode::Embedded || args.allow_overrides;
    // `[load]` is the checker's own settings: never compared, always ours (reconcile keeps it).
    let reconciliation = session::reconcile(&client, &base, contract, allow_overrides).await?;
    let expected = reconciliation.effective.clone();

    let color = !args.quiet && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let ctx = Ctx {
        metrics_url: format!("{base}{}", expected.api.metrics.path),
        base: base.clone(),
        client,
        expect: expectations(args.profile, &expected),
        template: lightest_request(&expected),
        contract: expected,
        temp_dir: subject.temp_dir.clone(),
        color,
    };

    let mut results = vec![contract_result(&reconciliation, allow_overrides)];
    ctx.print(&results[0]);
    // Also the hooks probe: a target without hooks stops the run here (exit 2).
    let calibration = calibrate::calibrate(&ctx).await?;
    let profile_results = match args.profile {
        ProfileName::Burst => profiles::burst::run(args, &ctx).await?,
        _ => profiles::rate::run(args, &ctx, &calibration, &process).await?,
    };
    results.extend(profile_results);

    let report = RunReport {
        manifest: Manifest {
            tool: format!("plimsoll load --profile {}", args.profile.as_str()),
            version: env!("CARGO_PKG_VERSION").into(),
            target: base,
            mode: mode.as_str().into(),
            contract_hash: source.hash(),
            contract_version: contract.contract.version.clone(),
            differences: contract::differences(&reconciliation),
            scaled: !reconciliation.adopted.is_empty(),
            strict: false,
            effective: serde_json::to_value(&reconciliation.effective)
                .expect("a contract serializes"),
            adopted: reconciliation.adopted,
            refused: reconciliation.refused,
            claim_unreadable: reconciliation.unreadable,
            trials: 1,
            seed: args.seed,
            started_unix_ms,
        },
        results,
    };
    println!("{}", report::terminal::summary_table(&report, color));
    Ok(report)
}
