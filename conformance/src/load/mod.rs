//! `plimsoll load`: goose load profiles judged against the contract and a queueing-theory
//! prediction.
//!
//! The conformance checks prove each clause alone; the profiles prove they hold together under
//! sustained traffic, and that admission admits exactly what it should. Every profile is sized
//! from the contract's `[load]` section relative to capacity, runs goose as a library
//! ([`runner`]), reads `/metrics` throughout ([`scrape`]), predicts the refused fraction
//! ([`prediction`]) and ends in the same [`RunReport`] as `plimsoll check` ([`verdicts`]).

pub mod prediction;
pub mod rng;
pub mod runner;
pub mod scrape;
pub mod verdicts;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use plimsoll_server::Config;
use plimsoll_spec::{Contract, ErrorCode};

use crate::check::{contract_differences, contract_result};
use crate::report;
use crate::session::{self, ContractSource, Fatal, Mode, Subject};
use crate::verdict::{CheckResult, Manifest, RunReport};
use prediction::{Arrivals, Model};
use runner::{Attempt, DrainProbe, HoldPlan, Live, Outcome, RequestTemplate, RunKind, RunSpec};
use scrape::{ProcessSource, Sample, Scraper};
use verdicts::{Expectations, Recovery};

/// The profiles of the contract's `[load]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileName {
    /// Waves of simultaneous requests: admission must be exact.
    Burst,
    /// Below capacity: refusals as predicted, no added latency.
    Steady,
    /// Far past capacity: no collapse, fast refusals, documented statuses only.
    Overload,
    /// Below capacity for long, some clients giving up: resources flat, slots come back.
    Soak,
}

impl ProfileName {
    pub fn as_str(self) -> &'static str {
        match self {
            ProfileName::Burst => "burst",
            ProfileName::Steady => "steady",
            ProfileName::Overload => "overload",
            ProfileName::Soak => "soak",
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// The profile to run.
    #[arg(long, value_enum)]
    pub profile: ProfileName,
    /// Base URL of the implementation (default: start the embedded reference server).
    #[arg(long)]
    pub target: Option<String>,
    /// Contract to judge against (default: the embedded spec/contract.toml).
    #[arg(long)]
    pub contract: Option<PathBuf>,
    /// Judge the target's own effective values (GET /v1/contract) where they differ from the contract.
    #[arg(long)]
    pub allow_overrides: bool,
    /// Seconds of load (default: the profile's duration_s; burst runs its waves instead).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Burst waves (default: the profile's waves).
    #[arg(long)]
    pub waves: Option<u32>,
    /// Closed-loop users (default: the contract's load.users, more for large pools).
    #[arg(long)]
    pub users: Option<u32>,
    /// Seed of every random draw (think times, holds, abandonment).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The implementation's process id, to read its memory and open files from /proc (soak).
    #[arg(long)]
    pub pid: Option<u32>,
    /// The implementation's temp folder, if the checker can see it.
    #[arg(long)]
    pub temp_dir: Option<PathBuf>,
    /// Write goose's own report here (.html, .json or .md).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Write the JSON verdict report here.
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

impl LoadArgs {
    /// Arguments for running `profile` against the embedded server with every default.
    pub fn new(profile: ProfileName) -> LoadArgs {
        LoadArgs {
            profile,
            target: None,
            contract: None,
            allow_overrides: false,
            duration: None,
            waves: None,
            users: None,
            seed: 1,
            pid: None,
            temp_dir: None,
            report: None,
            json: None,
            junit: None,
            html: None,
            quiet: true,
        }
    }
}

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
    let source = ContractSource::read(args.contract.as_deref())?;
    if let Some(path) = &args.report {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        if !matches!(ext, "html" | "htm" | "json" | "md") {
            return Err(Fatal::Contract(format!(
                "--report {}: goose writes .html, .json or .md",
                path.display()
            )));
        }
    }

    let (subject, process) = match embedded {
        Some(config) => {
            let process = ProcessSource::Proc {
                pid: std::process::id(),
                embedded: true,
            };
            (Subject::embedded(config).await?, process)
        }
        None => {
            let process = match args.pid {
                Some(pid) if std::path::Path::new(&format!("/proc/{pid}/status")).exists() => {
                    ProcessSource::Proc {
                        pid,
                        embedded: false,
                    }
                }
                Some(pid) => {
                    ProcessSource::Unavailable(format!("/proc/{pid} is not readable here"))
                }
                None => ProcessSource::Metrics,
            };
            let target = args.target.as_deref().unwrap_or_default();
            (
                Subject::external(target, args.temp_dir.clone(), None),
                process,
            )
        }
    };
    let result = run_profile(args, &source, &subject, process).await;
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

/// Everything a profile needs about the target, resolved once.
struct Ctx {
    base: String,
    client: reqwest::Client,
    expected: Contract,
    x: Expectations,
    template: RequestTemplate,
    metrics_url: String,
    temp_dir: Option<PathBuf>,
    color: bool,
}

impl Ctx {
    fn load(&self) -> &plimsoll_spec::model::Load {
        &self.expected.load
    }

    fn print(&self, r: &CheckResult) {
        println!("{}", report::terminal::progress_line(r, self.color));
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
    let temp_dir = subject.temp_dir.clone();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    let effective = session::effective_contract(&client, &base, contract).await?;
    // The load profiles are the checker's settings, not the service's: never diffed, always ours.
    let differences = contract_differences(contract, &effective);
    let mut theirs = effective.clone();
    if let Some(map) = theirs.as_object_mut() {
        map.remove("load");
    }
    let scaled = mode == Mode::Embedded || args.allow_overrides;
    let mut expected = if scaled {
        // A target's /v1/contract may leave `load` out; it is replaced by ours below anyway.
        serde_json::from_value::<Contract>(theirs.clone()).map_err(|e| {
            Fatal::Contract(format!(
                "the target's effective contract does not parse: {e}"
            ))
        })?
    } else {
        contract.clone()
    };
    expected.load = contract.load.clone();

    let api = &expected.api.digitize;
    let overloaded = expected.error(ErrorCode::Overloaded);
    let openapi = plimsoll_spec::render::openapi(&expected);
    let documented: BTreeSet<u16> = openapi["paths"][api.path.as_str()]["post"]["responses"]
        .as_object()
        .map(|m| m.keys().filter_map(|k| k.parse().ok()).collect())
        .unwrap_or_default();
    let x = Expectations {
        profile: args.profile.as_str(),
        workers: expected.clauses.t1.value.digitize_workers,
        queue: expected.clauses.t2.value.digitize_queue_capacity,
        documented,
        overloaded_status: overloaded.status,
        overloaded_code: overloaded.code.as_str().to_owned(),
        retry_after_min: expected.clauses.t3.value.min_seconds,
        retry_after_max: Duration::from_millis(expected.clauses.b1.value.digitize_timeout_ms)
            .as_secs()
            .max(1),
    };
    // The lightest valid request: smallest design, coarsest fill, fewest colours, so the
    // request's time is its hold and the pipeline's own cost stays small.
    let p = &api.params;
    let path = format!(
        "{}?width_mm={}&density_mm={}&colors={}",
        api.path, p.width_mm.min, p.density_mm.max, p.colors.min
    );
    let template = RequestTemplate {
        path,
        content_type: api.content_types[0].clone(),
        body: crate::target::sample_png(),
        hook_header: expected.hooks.header.clone(),
        hold_stage: expected.load.hold_stage.as_str().to_owned(),
        request_id_header: expected.observability.request_id_header.clone(),
        server_timing_header: expected.observability.server_timing_header.clone(),
        retry_after_header: expected.clauses.t3.value.retry_after_header.clone(),
    };
    let color = !args.quiet && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let ctx = Ctx {
        metrics_url: format!("{base}{}", expected.api.metrics.path),
        base: base.clone(),
        client,
        expected,
        x,
        template,
        temp_dir,
        color,
    };

    let mut results = vec![contract_result(&differences, scaled)];
    ctx.print(&results[0]);
    // Also the hooks probe: a target without hooks stops the run here (exit 2).
    let calibration = calibrate(&ctx).await?;
    let profile_results = match args.profile {
        ProfileName::Burst => run_burst(args, &ctx).await?,
        _ => run_rate(args, &ctx, &calibration, &process).await?,
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
            differences,
            scaled,
            effective,
            trials: 1,
            seed: args.seed,
            started_unix_ms,
        },
        results,
    };
    println!("{}", report::terminal::summary_table(&report, color));
    Ok(report)
}

/// The pipeline's own cost per request, measured before the load so capacity and the
/// abandonment timing account for it.
struct Calibration {
    /// Median Server-Timing `run` of a request with no hold (client latency if absent).
    service_ms: f64,
    /// Median client latency of such a request: when an abandoning client's hold has begun.
    latency_ms: f64,
}

async fn calibrate(ctx: &Ctx) -> Result<Calibration, Fatal> {
    let t = &ctx.template;
    let (mut runs, mut latencies) = (Vec::new(), Vec::new());
    for i in 0..8 {
        let sent = Instant::now();
        let response = ctx
            .client
            .post(format!("{}{}", ctx.base, t.path))
            .header("content-type", t.content_type.as_str())
            .header(t.hook_header.as_str(), format!("hold={}:0", t.hold_stage))
            .body(t.body.clone())
            .send()
            .await
            .map_err(|e| Fatal::Unreachable(format!("{}: {e}", ctx.base)))?;
        let status = response.status().as_u16();
        let timing = response
            .headers()
            .get(t.server_timing_header.as_str())
            .and_then(|v| v.to_str().ok())
            .and_then(crate::target::parse_server_timing);
        let body = response.bytes().await.unwrap_or_default();
        if status != 200 {
            let code = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["code"].as_str().map(str::to_owned))
                .unwrap_or_default();
            if status == 400 && code == ctx.expected.hooks.disabled_code.as_str() {
                return Err(Fatal::Hooks(format!(
                    "the target refuses test hooks: start it with {}=1",
                    ctx.expected.hooks.env
                )));
            }
            return Err(Fatal::Unreachable(format!(
                "calibration request {} was answered {status} {code}; the target must be idle and accept {}",
                i + 1,
                t.path
            )));
        }
        let latency = sent.elapsed().as_secs_f64() * 1000.0;
        latencies.push(latency);
        runs.push(timing.map_or(latency, |(_, run)| run));
    }
    Ok(Calibration {
        service_ms: verdicts::percentile(&runs, 50.0).unwrap_or(0.0),
        latency_ms: verdicts::percentile(&latencies, 50.0).unwrap_or(0.0),
    })
}

/// A progress bar on an interactive stderr, fed from the live counters.
struct Ticker {
    stop: tokio_util::sync::CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

impl Ticker {
    fn start(
        enabled: bool,
        total: u64,
        unit: &'static str,
        live: Arc<Live>,
        max_busy: Arc<std::sync::atomic::AtomicU64>,
    ) -> Option<Ticker> {
        use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
        if !enabled || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return None;
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let template = format!("{{spinner}} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        let stop = tokio_util::sync::CancellationToken::new();
        let token = stop.clone();
        let started = Instant::now();
        let handle = tokio::spawn(async move {
            loop {
                let pos = if unit == "waves" {
                    live.waves_done.load(Ordering::Relaxed)
                } else {
                    started.elapsed().as_secs().min(total)
                };
                bar.set_position(pos);
                bar.set_message(format!(
                    "sent {} · ok {} · refused {} · other {} · busy max {}",
                    live.sent.load(Ordering::Relaxed),
                    live.ok.load(Ordering::Relaxed),
                    live.refused.load(Ordering::Relaxed),
                    live.other.load(Ordering::Relaxed),
                    f64::from_bits(max_busy.load(Ordering::Relaxed))
                ));
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                }
            }
            bar.finish_and_clear();
        });
        Some(Ticker { stop, handle })
    }

    async fn finish(ticker: Option<Ticker>) {
        if let Some(t) = ticker {
            t.stop.cancel();
            let _ = t.handle.await;
        }
    }
}

async fn temp_files_now(ctx: &Ctx) -> Option<f64> {
    scrape::read_metrics(&ctx.client, &ctx.metrics_url, "digitize")
        .await
        .ok()?
        .temp_files
}

/// Goose's report path as a string, when asked for.
fn report_path(args: &LoadArgs) -> Option<String> {
    args.report.as_ref().map(|p| p.display().to_string())
}

async fn run_burst(args: &LoadArgs, ctx: &Ctx) -> Result<Vec<CheckResult>, Fatal> {
    let l = ctx.load();
    let b = &l.burst;
    let (c, k) = (ctx.x.workers as usize, ctx.x.queue as usize);
    let mut per_wave = c * b.factor as usize;
    if per_wave <= c + k {
        // Too few to overflow workers + queue: send as many again as there are workers.
        per_wave = c + k + c;
    }
    let waves = args.waves.unwrap_or(b.waves).max(1) as usize;
    println!(
        "plimsoll load burst: {waves} waves of {per_wave} requests at once (hold {} ms) against {}; expecting {} admitted per wave",
        b.hold_ms,
        ctx.base,
        c + k
    );
    let temp_before = temp_files_now(ctx).await;
    let t0 = Instant::now();
    let scraper = Scraper::spawn(
        ctx.client.clone(),
        ctx.metrics_url.clone(),
        "digitize".into(),
        Duration::from_millis(l.scrape_interval_ms),
        t0,
        ProcessSource::Unavailable("not read in burst".into()),
    );
    let live = Arc::new(Live::default());
    let ticker = Ticker::start(
        ctx.color,
        waves as u64,
        "waves",
        live.clone(),
        scraper.max_busy.clone(),
    );
    let drain = DrainProbe {
        client: ctx.client.clone(),
        metrics_url: ctx.metrics_url.clone(),
        pool: "digitize".into(),
        timeout: Duration::from_millis(
            b.hold_ms * 2 + ctx.expected.clauses.b3.value.stop_within_ms + 3000,
        ),
        poll: Duration::from_millis(l.scrape_interval_ms.min(10)),
    };
    let spec = RunSpec {
        host: ctx.base.clone(),
        users: per_wave,
        seed: args.seed,
        template: ctx.template.clone(),
        hold: HoldPlan {
            mean_ms: None,
            cap_ms: b.hold_ms,
            abandon_fraction: 0.0,
            pre_hold_ms: 0.0,
        },
        report: report_path(args),
        kind: RunKind::Burst { waves, drain },
    };
    let outcome = runner::run(spec, t0, live).await;
    Ticker::finish(ticker).await;
    let (samples, scrape_errors) = scraper.finish().await;
    let out = outcome
        .map_err(|e| Fatal::Unreachable(format!("the load generator (goose) failed: {e}")))?;
    let elapsed = out.elapsed_ms;

    let mut main = verdicts::burst(
        &ctx.x,
        &out.attempts,
        per_wave,
        b.hold_ms,
        ctx.expected.tolerances.refusal_latency_ms,
        out.drain_failed,
    );
    main.duration_ms = elapsed;
    main.evidence.push(goose_summary(&out.goose));
    ctx.print(&main);
    let mut results = vec![main];
    results.extend(
        common(
            ctx,
            &out.attempts,
            &samples,
            &scrape_errors,
            Ending {
                must_reach: true,
                temp_before,
                temp_allowance: 0,
                longest_hold_ms: b.hold_ms,
                elapsed_ms: elapsed,
            },
        )
        .await,
    );
    Ok(results)
}

/// How a profile's run ended, for the verdicts every profile shares.
struct Ending {
    /// The profile saturates the pool: the busy gauge must reach the limit.
    must_reach: bool,
    temp_before: Option<f64>,
    temp_allowance: u64,
    /// The longest hold a request of the profile could ask for.
    longest_hold_ms: u64,
    elapsed_ms: f64,
}

/// Verdicts every profile ends with: statuses, the busy gauge, recovery.
async fn common(
    ctx: &Ctx,
    attempts: &[Attempt],
    samples: &[Sample],
    scrape_errors: &[String],
    end: Ending,
) -> Vec<CheckResult> {
    let mut statuses = verdicts::statuses(&ctx.x, attempts);
    statuses.duration_ms = end.elapsed_ms;
    let mut busy = verdicts::busy_limit(&ctx.x, samples, scrape_errors, end.must_reach);
    busy.duration_ms = end.elapsed_ms;
    for r in [&statuses, &busy] {
        ctx.print(r);
    }
    let started = Instant::now();
    let rec = recover(ctx, end.temp_before, end.longest_hold_ms).await;
    let mut recovery = verdicts::recovery(&ctx.x, &rec, end.temp_allowance);
    recovery.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    ctx.print(&recovery);
    vec![statuses, busy, recovery]
}

/// After the load: wait for the pool to drain, read temp files, then send workers + queue
/// held requests at once; all must be admitted (no slot was lost to an abandoned request).
async fn recover(ctx: &Ctx, temp_before: Option<f64>, longest_hold_ms: u64) -> Recovery {
    let l = ctx.load();
    // Every request still running ends within its hold, or within the cancellation bound of
    // its client leaving; the margin covers a slow machine.
    let limit = Duration::from_millis(
        longest_hold_ms + ctx.expected.clauses.b3.value.stop_within_ms + 1000,
    );
    let started = Instant::now();
    let mut rec = Recovery {
        temp_before,
        ..Recovery::default()
    };
    while started.elapsed() < limit {
        if let Ok(v) = scrape::read_metrics(&ctx.client, &ctx.metrics_url, "digitize").await {
            rec.last_busy = v.busy;
            rec.temp_after = v.temp_files;
            if v.busy.unwrap_or(0.0) == 0.0 && v.depth.unwrap_or(0.0) == 0.0 {
                rec.drained_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(l.scrape_interval_ms)).await;
    }
    // Temp dirs go just before a slot is given back; a moment later they must be gone.
    tokio::time::sleep(Duration::from_millis(50)).await;
    if let Some(t) = temp_files_now(ctx).await {
        rec.temp_after = Some(t);
    }
    rec.temp_dir_after = scrape::temp_entries(&ctx.temp_dir);

    let t = &ctx.template;
    let n = (ctx.x.workers + ctx.x.queue) as usize;
    let hold = l.burst.hold_ms;
    let sends = (0..n).map(|_| {
        ctx.client
            .post(format!("{}{}", ctx.base, t.path))
            .header("content-type", t.content_type.as_str())
            .header(
                t.hook_header.as_str(),
                format!("hold={}:{hold}", t.hold_stage),
            )
            .body(t.body.clone())
            .send()
    });
    let replies = futures_util::future::join_all(sends).await;
    rec.probe_sent = n;
    for r in replies {
        match r {
            Ok(resp) if resp.status().as_u16() == 200 => rec.probe_admitted += 1,
            Ok(resp) => {
                let status = resp.status().as_u16();
                let id = resp
                    .headers()
                    .get(t.request_id_header.as_str())
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("(no id)")
                    .to_owned();
                rec.probe_problems.push(format!("probe {id}: {status}"));
            }
            Err(e) => rec.probe_problems.push(format!("probe: {e}")),
        }
    }
    rec
}

fn goose_summary(m: &goose::metrics::GooseMetrics) -> String {
    let mut parts: Vec<String> = m
        .requests
        .iter()
        .map(|(name, r)| {
            let mut codes: Vec<String> = r
                .status_code_counts
                .iter()
                .map(|(s, n)| format!("{s}: {n}"))
                .collect();
            codes.sort();
            format!(
                "goose counted {name}: {} ok, {} failed ({})",
                r.success_count,
                r.fail_count,
                codes.join(", ")
            )
        })
        .collect();
    parts.sort();
    parts.join("; ")
}

/// The rate profiles: steady, overload, soak.
async fn run_rate(
    args: &LoadArgs,
    ctx: &Ctx,
    cal: &Calibration,
    process: &ProcessSource,
) -> Result<Vec<CheckResult>, Fatal> {
    let l = ctx.load();
    let (factor, mean_hold_ms, duration_s, abandon) = match args.profile {
        ProfileName::Steady => (
            l.steady.load_factor,
            l.steady.mean_hold_ms,
            l.steady.duration_s,
            0.0,
        ),
        ProfileName::Overload => (
            l.overload.load_factor,
            l.overload.mean_hold_ms,
            l.overload.duration_s,
            0.0,
        ),
        ProfileName::Soak => (
            l.soak.load_factor,
            l.soak.mean_hold_ms,
            l.soak.duration_s,
            l.soak.cancel_fraction,
        ),
        ProfileName::Burst => unreachable!("burst has its own runner"),
    };
    let duration = Duration::from_secs_f64(args.duration.unwrap_or(duration_s as f64).max(1.0));
    let (c, k) = (ctx.x.workers, ctx.x.queue);
    // Capacity counts the pipeline's own time on top of the hold.
    let service_s = (mean_hold_ms as f64 + cal.service_ms) / 1000.0;
    let capacity = f64::from(c) / service_s;
    let target_rate = factor * capacity;
    let mut users = match args.users {
        Some(n) => n.max(1),
        None => l.users.max(8 * (c + k)),
    };
    let mut think = prediction::think_for_rate(c, k, users, service_s, target_rate);
    while think.is_none() && users < 1 << 16 {
        users *= 2;
        think = prediction::think_for_rate(c, k, users, service_s, target_rate);
    }
    let think_s = think.ok_or_else(|| {
        Fatal::Contract(format!("{target_rate:.0} attempts/s cannot be generated"))
    })?;
    println!(
        "plimsoll load {}: {factor} x capacity ({capacity:.1}/s = {c} workers / ({mean_hold_ms} ms hold + {:.1} ms pipeline)) = {target_rate:.1} attempts/s from {users} users thinking {:.0} ms on average, for {:.0} s against {}",
        args.profile.as_str(),
        cal.service_ms,
        think_s * 1000.0,
        duration.as_secs_f64(),
        ctx.base
    );

    // Far below the deadline, whatever the target's timeout.
    let hold_cap_ms = (mean_hold_ms * u64::from(l.max_hold_factor))
        .min(ctx.expected.clauses.b1.value.digitize_timeout_ms / 2);
    let temp_before = temp_files_now(ctx).await;
    let t0 = Instant::now();
    let scraper = Scraper::spawn(
        ctx.client.clone(),
        ctx.metrics_url.clone(),
        "digitize".into(),
        Duration::from_millis(l.scrape_interval_ms),
        t0,
        process.clone(),
    );
    let live = Arc::new(Live::default());
    let ticker = Ticker::start(
        ctx.color,
        duration.as_secs(),
        "s",
        live.clone(),
        scraper.max_busy.clone(),
    );
    let spec = RunSpec {
        host: ctx.base.clone(),
        users: users as usize,
        seed: args.seed,
        template: ctx.template.clone(),
        hold: HoldPlan {
            mean_ms: Some(mean_hold_ms as f64),
            cap_ms: hold_cap_ms,
            abandon_fraction: abandon,
            pre_hold_ms: cal.latency_ms,
        },
        report: report_path(args),
        kind: RunKind::Rate {
            mean_think_ms: think_s * 1000.0,
            duration,
        },
    };
    let outcome = runner::run(spec, t0, live).await;
    Ticker::finish(ticker).await;
    let (samples, scrape_errors) = scraper.finish().await;
    let out = outcome
        .map_err(|e| Fatal::Unreachable(format!("the load generator (goose) failed: {e}")))?;
    let elapsed = out.elapsed_ms;
    let run_ms = duration.as_secs_f64() * 1000.0;

    // The measurement window: after warm-up, to the end (no attempt starts after it).
    let warm = l.warm_up_ms as f64;
    let window: Vec<&Attempt> = out.attempts.iter().filter(|a| a.sent_ms >= warm).collect();
    let window_s = (run_ms - warm).max(1.0) / 1000.0;
    let judged: Vec<&&Attempt> = window
        .iter()
        .filter(|a| !a.abandon && (a.status() == Some(200) || ctx.x.is_refusal(a)))
        .collect();
    let ok: Vec<&&Attempt> = judged
        .iter()
        .copied()
        .filter(|a| a.status() == Some(200))
        .collect();
    let refused = judged.len() - ok.len();
    // The model is fed what the run really did: the users' realised mean think time (every
    // completed think plus the last ones the deadline cut short, over the number completed:
    // the exponential's censored-sample estimate; the recorded thinks alone would be a biased
    // sample) and the mean time an admitted request held its slot (Server-Timing `run`, else
    // its latency), which includes the pipeline's own cost.
    let runs: Vec<f64> = ok
        .iter()
        .map(|a| a.timing.map_or(a.latency_ms, |(_, run)| run))
        .collect();
    let measured_service_s = if runs.is_empty() {
        service_s
    } else {
        runs.iter().sum::<f64>() / runs.len() as f64 / 1000.0
    };
    let completed: f64 = out.attempts.iter().map(|a| a.think_ms).sum();
    let measured_think_s = if out.attempts.is_empty() {
        think_s
    } else {
        (completed + out.censored_think_ms) / out.attempts.len() as f64 / 1000.0
    };
    let model = Model {
        workers: c,
        queue: k,
        mean_service_s: measured_service_s,
        arrivals: Arrivals::Closed {
            users,
            mean_think_s: measured_think_s,
        },
    };
    let iv = prediction::interval(&model, judged.len(), l.sigma, args.seed);
    let open = model.open_loop_equivalent();
    let attempts_rate = window.len() as f64 / window_s;
    let evidence = vec![
        format!(
            "attempts {attempts_rate:.1}/s in the window (target {target_rate:.1}/s, model {:.1}/s); realised mean think {:.1} ms (planned {:.1}); mean service {:.1} ms (hold mean {mean_hold_ms} + calibrated pipeline {:.1})",
            model.attempt_rate(),
            measured_think_s * 1000.0,
            think_s * 1000.0,
            measured_service_s * 1000.0,
            cal.service_ms
        ),
        format!(
            "an open-loop Poisson stream at the same rate would see {:.1}% refused ({}); goose's users are closed-loop, hence {}",
            open.blocking() * 100.0,
            open.formula(),
            model.formula()
        ),
        format!(
            "window: attempts sent after {warm:.0} ms of {run_ms:.0} ms; {} excluded (abandoned or other answers)",
            window.len() - judged.len()
        ),
        goose_summary(&out.goose),
    ];

    let mut results = Vec::new();
    let slice_from = warm.max(run_ms / 2.0);
    let push = |mut r: CheckResult, results: &mut Vec<CheckResult>| {
        r.duration_ms = elapsed;
        ctx.print(&r);
        results.push(r);
    };
    match args.profile {
        ProfileName::Steady | ProfileName::Overload => {
            let mut r = verdicts::refusals(&ctx.x, &model, &iv, refused, &out.attempts, evidence);
            r.timeline = verdicts::lanes(&out.attempts, slice_from, 120, &ctx.x);
            println!(
                "prediction ({}, {}): refused {:.1}% ± {:.1}% ({}σ); measured {:.1}% of {} attempts",
                model.formula(),
                model.describe(),
                iv.predicted * 100.0,
                (iv.high - iv.predicted) * 100.0,
                iv.z,
                100.0 * refused as f64 / judged.len().max(1) as f64,
                judged.len()
            );
            push(r, &mut results);
        }
        _ => {}
    }
    match args.profile {
        ProfileName::Steady => {
            push(
                verdicts::latency(&ctx.x, &window, l.steady.latency_overhead_p99_ms),
                &mut results,
            );
        }
        ProfileName::Overload => {
            push(
                verdicts::goodput(
                    &ctx.x,
                    &model,
                    judged.len() as f64 / window_s,
                    ok.len(),
                    window_s,
                    l.overload.goodput_fraction,
                    l.sigma,
                ),
                &mut results,
            );
            let mut r = verdicts::refusal_latency(&ctx.x, &window, l.overload.refusal_p99_ms);
            r.timeline = verdicts::lanes(&out.attempts, slice_from, 120, &ctx.x);
            push(r, &mut results);
        }
        ProfileName::Soak => {
            let so = &l.soak;
            let skip = match process {
                ProcessSource::Unavailable(why) => Some(why.clone()),
                _ => None,
            };
            let series = |f: fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
                samples
                    .iter()
                    .filter_map(|s| f(s).map(|v| (s.t_ms, v)))
                    .collect()
            };
            // Resources settle once the users have opened their connections: from the time 90 %
            // of them had their first answer (the last few add a connection each, well within
            // the allowance; waiting for all would take θ·ln N).
            let mut first = std::collections::BTreeMap::new();
            for a in &out.attempts {
                let end = a.sent_ms + a.latency_ms;
                first
                    .entry(a.user)
                    .and_modify(|t: &mut f64| *t = t.min(end))
                    .or_insert(end);
            }
            let firsts: Vec<f64> = first.into_values().collect();
            let settled_ms = verdicts::percentile(&firsts, 90.0)
                .unwrap_or(warm)
                .max(warm);
            let rss = series(|s| s.rss_bytes);
            let fds = series(|s| s.fds);
            let missing = |name: &str, v: &Vec<(f64, f64)>| {
                skip.clone().or_else(|| {
                    (v.is_empty() && *process == ProcessSource::Metrics).then(|| {
                        format!("no --pid given and the target exposes no {name} in /metrics")
                    })
                })
            };
            let mut r = verdicts::flat(
                &ctx.x,
                verdicts::Resource {
                    suffix: "rss",
                    title: "Resident memory stays flat",
                    unit: "MB",
                    scale: 1024.0 * 1024.0,
                    allowed: so.rss_growth_mb,
                },
                verdicts::growth(&rss, settled_ms, run_ms),
                missing(scrape::RSS_METRIC, &rss),
            );
            r.evidence.push(format!("read from {}", process.describe()));
            push(r, &mut results);
            let mut r = verdicts::flat(
                &ctx.x,
                verdicts::Resource {
                    suffix: "fds",
                    title: "Open file descriptors stay flat",
                    unit: "fds",
                    scale: 1.0,
                    allowed: so.fd_growth,
                },
                verdicts::growth(&fds, settled_ms, run_ms),
                missing(scrape::FDS_METRIC, &fds),
            );
            r.evidence.push(format!("read from {}", process.describe()));
            push(r, &mut results);
            let temp = series(|s| s.temp_files);
            let mut r = verdicts::flat(
                &ctx.x,
                verdicts::Resource {
                    suffix: "temp-files",
                    title: "Temp files stay flat while running",
                    unit: "files",
                    scale: 1.0,
                    allowed: so.temp_files_growth + u64::from(c + k),
                },
                verdicts::growth(&temp, settled_ms, run_ms),
                temp.is_empty()
                    .then(|| "no plimsoll_temp_files in /metrics".to_owned()),
            );
            r.expected = format!(
                "in flight only: growth ≤ {} (workers + queue) from the settled start to the end; after the drain back to the start (+{})",
                so.temp_files_growth + u64::from(c + k),
                so.temp_files_growth
            );
            let abandoned = out
                .attempts
                .iter()
                .filter(|a| a.outcome == Outcome::Abandoned)
                .count();
            r.evidence
                .push(format!("{abandoned} requests abandoned by their clients"));
            push(r, &mut results);
        }
        ProfileName::Burst => {}
    }
    let temp_allowance = if args.profile == ProfileName::Soak {
        l.soak.temp_files_growth
    } else {
        0
    };
    let must_reach = args.profile == ProfileName::Overload;
    results.extend(
        common(
            ctx,
            &out.attempts,
            &samples,
            &scrape_errors,
            Ending {
                must_reach,
                temp_before,
                temp_allowance,
                longest_hold_ms: hold_cap_ms,
                elapsed_ms: elapsed,
            },
        )
        .await,
    );
    Ok(results)
}
