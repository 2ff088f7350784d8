//! `plimsoll-load`: `plimsoll load`'s goose (or Locust) load profiles judged against the
//! contract and a queueing-theory prediction.
//!
//! Its own crate because load generation is one job with the heaviest dependencies of the
//! checker (goose, and through it its own HTTP stack and command line): the checks build and
//! run without them, and a change to a check does not rebuild them. It sits on
//! `plimsoll-conformance` for what every run shares (the session, the target seen from outside,
//! the verdict model) and ends in the same [`RunReport`] as `plimsoll check`.
//!
//! The conformance checks prove each clause alone; the profiles prove they hold together under
//! sustained traffic, and that admission admits exactly what it should. Every profile is sized
//! from the contract's `[load]` section relative to capacity, runs goose as a library
//! ([`runner`]), reads `/metrics` throughout ([`scrape`]), predicts the refused fraction
//! ([`prediction`]) and ends in the same [`RunReport`] as `plimsoll check` ([`verdicts`]).
//!
//! This crate's root is the run: contract, subject, what the profiles need to know about it
//! ([`Ctx`]), then [`calibrate`], the profile ([`profiles`]) and the verdicts every profile
//! ends with ([`recovery`]).
//!
//! In fleet mode ([`fleet`]) the target is a load balancer: the load goes through it, while
//! each replica behind it is read and judged on its own.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod bench;
mod calibrate;
pub mod connection;
pub mod fleet;
pub mod locust;
pub mod plan;
mod pool;
pub mod prediction;
mod profiles;
mod progress;
mod recovery;
pub mod run;
pub mod runner;
pub mod scrape;
pub mod stalls;
pub mod verdicts;

pub use plan::{EngineName, LoadPlan, ProfileName};

use std::path::PathBuf;
use std::time::Duration;

use plimsoll_spec::Contract;

use plimsoll_conformance::checks::contract::contract_result_under;
use plimsoll_conformance::observe::Observer;
use plimsoll_conformance::remote::Trust;
use plimsoll_conformance::remote::dependency::{Dependencies, Dependency, HoldTicket};
use plimsoll_conformance::remote::process::ProcessSource;
use plimsoll_conformance::session::{self, ContractSource, Fatal, Opening, Partial, Subject};
use plimsoll_conformance::verdict::{CheckResult, RunReport};
use pool::LoadedPool;
use verdicts::{Expectations, HintRange};

/// The load engine: goose in this process, or Locust's master and workers.
#[derive(Debug, Clone)]
pub enum Engine {
    /// goose as a library: its users are tasks of this process.
    Goose,
    /// Locust's master and worker processes, for more load than one process makes (rate profiles
    /// only).
    Locust(locust::LocustEngine),
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

/// Runs `load.profile` against `subject` (an external target, or a server the binary started
/// with the contract's own values), telling `observer` each verdict; the report files are the
/// caller's.
pub async fn execute(
    load: &LoadPlan,
    subject: Subject,
    observer: &dyn Observer,
) -> Result<RunReport, Fatal> {
    init_tracing();
    load.validate()?;
    session::judge(&load.subject, subject, async |source, subject, partial| {
        let process = subject.process(load.subject.pid);
        let run = Run {
            load,
            observer,
            partial,
        };
        run_profile(&run, source, subject, process).await
    })
    .await
}

/// One run of a profile: its plan, who watches it, and what it has finished so far.
struct Run<'a> {
    load: &'a LoadPlan,
    observer: &'a dyn Observer,
    partial: &'a Partial,
}

/// A server the checker sends requests to and reads: its base URL, its metrics exposition when
/// the contract declares one for the loaded pool, and its temp folder when visible.
#[derive(Debug, Clone)]
struct Node {
    base: String,
    metrics_url: Option<String>,
    temp_dir: Option<PathBuf>,
}

impl Node {
    fn new(base: &str, pool: &LoadedPool, temp_dir: Option<PathBuf>) -> Node {
        let base = base.trim_end_matches('/').to_owned();
        Node {
            metrics_url: (pool.gauges.path.as_ref()).map(|path| format!("{base}{path}")),
            base,
            temp_dir,
        }
    }
}

/// Everything a profile needs about the target, resolved once.
struct Ctx<'o> {
    /// Where the load goes: the server, or the balancer in front of the replicas.
    target: Node,
    /// Fleet mode: the replicas behind the balancer, each read and judged on its own (empty:
    /// one server, which is `target`).
    replicas: Vec<Node>,
    /// Fleet mode: how the balancer picks a replica (the prediction's model).
    balancer: Option<prediction::Balancer>,
    client: reqwest::Client,
    /// The authorities `--ca-file` adds, for the users' own connections.
    trust: Trust,
    /// The contract the verdicts hold the target to (its own values where allowed), with the
    /// checker's `[load]` section.
    contract: Contract,
    expect: Expectations,
    /// The pool the load goes to: its request, its answers, its series.
    pool: LoadedPool,
    /// Shows the profile's progress bar (on an interactive stderr).
    progress: bool,
    /// Told each verdict as it is reached.
    observer: &'o dyn Observer,
}

impl Ctx<'_> {
    /// The servers whose `/metrics` are read and whose pools must drain: the replicas in fleet
    /// mode, else the target.
    fn watched(&self) -> Vec<&Node> {
        if self.replicas.is_empty() {
            vec![&self.target]
        } else {
            self.replicas.iter().collect()
        }
    }

    /// The fleet the prediction models, in fleet mode.
    fn fleet(&self) -> Option<prediction::Fleet> {
        self.balancer.map(|balancer| prediction::Fleet {
            replicas: self.replicas.len() as u32,
            balancer,
        })
    }

    /// How many replicas share the load (1 without a balancer).
    fn replica_count(&self) -> u32 {
        self.fleet().map_or(1, |f| f.replicas)
    }

    /// The contract's `[load]` section: the profiles' sizes and bounds.
    fn section(&self) -> &plimsoll_spec::model::Load {
        &self.contract.load
    }

    /// A verdict reached.
    fn print(&self, r: &CheckResult) {
        self.observer.finished(r);
    }
}

/// What the verdicts expect of the target, from the pool it loads.
fn expectations(profile: ProfileName, pool: &LoadedPool) -> Expectations {
    let t = &pool.template;
    Expectations {
        profile: profile.as_str(),
        pool: pool.name.clone(),
        workers: pool.spec.workers,
        queue: pool.places(),
        documented: pool.documented.clone(),
        ok_status: t.ok_status,
        refusal: t.refusal.as_ref().map(plimsoll_spec::RefusalAnswer::words),
        hint: pool
            .hint
            .clone()
            .map(|(header, allowed)| HintRange { header, allowed }),
        busy_declared: pool.gauges.busy.is_some(),
        temp_declared: pool.gauges.temp_files.is_some(),
    }
}

/// The pool `load` asks for under `expected`, with the profile's nominal hold (what a played
/// dependency gives every call).
fn loaded_pool(load: &LoadPlan, expected: &Contract) -> Result<LoadedPool, Fatal> {
    let nominal_hold_ms = load.profile.nominal_hold_ms(&expected.load);
    LoadedPool::choose(expected, load.pool.as_deref(), nominal_hold_ms)
}

/// The dependency a pool holds by, listening where its contract says for the whole run and
/// answering every call after the pool's hold (until the ticket is dropped); None for a pool
/// held otherwise.
async fn play_dependency(pool: &LoadedPool) -> Result<Option<Played>, Fatal> {
    let Some(declared) = &pool.dependency else {
        return Ok(None);
    };
    let dependency = Dependencies::default()
        .get(declared)
        .await
        .map_err(|e| Fatal::Usage(e.to_string()))?;
    let hold = Duration::from_millis(pool.own_hold_ms.unwrap_or_default());
    let ticket = dependency.hold(hold);
    Ok(Some((dependency, ticket)))
}

/// A dependency the checker plays, and its hold open for the run.
type Played = (std::sync::Arc<Dependency>, HoldTicket);

/// The run's client, the authorities it trusts (`--ca-file`, for the users' own connections
/// too) and its opening: the target's claim reconciled with the contract, and the manifest of
/// a load run.
async fn open(
    load: &LoadPlan,
    source: &ContractSource,
    subject: &Subject,
) -> Result<(reqwest::Client, Trust, Opening), Fatal> {
    if load.subject.ca_file.is_some() && load.engine == EngineName::Locust {
        // Locust's users are Python's, with Python's trust store: a run would be all errors.
        return Err(Fatal::Usage(
            "--ca-file is for goose's users (the default engine); Locust's trust its own store"
                .into(),
        ));
    }
    let trust = Trust::load(load.subject.ca_file.as_deref()).map_err(Fatal::Usage)?;
    let client = (trust.apply(reqwest::Client::builder()))
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    // `[load]` is the checker's own settings: never compared, always ours (reconcile keeps it).
    let tool = fleet::tool_name(load);
    // In fleet mode the claim is read from the first replica, not through the balancer (which
    // would hand it to any of them); every replica's own claim is judged below.
    let first_replica = match load.replica.first() {
        Some(first) => Some(Subject::external(first, None, None)?),
        None => None,
    };
    let claimant = first_replica.as_ref().unwrap_or(subject);
    let mut opening = session::open(&client, tool, &load.subject, source, claimant).await?;
    let manifest = &mut opening.manifest;
    manifest.seed = load.seed;
    manifest.target = subject.url.clone();
    manifest.mode = subject.mode().as_str().into();
    Ok((client, trust, opening))
}

/// The `contract` result: the target's claim against the contract, or in fleet mode each
/// replica's.
async fn contract_results(
    ctx: &Ctx<'_>,
    source: &ContractSource,
    reconciliation: &plimsoll_spec::Reconciliation,
    allow_overrides: bool,
) -> Result<Vec<CheckResult>, Fatal> {
    if ctx.replicas.is_empty() {
        let one = contract_result_under(&ctx.contract, reconciliation, allow_overrides);
        return Ok(vec![one]);
    }
    fleet::contract_results(ctx, source, reconciliation, allow_overrides).await
}

async fn run_profile(
    run: &Run<'_>,
    source: &ContractSource,
    subject: &Subject,
    process: ProcessSource,
) -> Result<RunReport, Fatal> {
    let (load, partial) = (run.load, run.partial);
    let baseline = load
        .baseline
        .load()
        .map_err(|e| Fatal::Usage(e.to_string()))?;
    let (client, trust, opening) = open(load, source, subject).await?;
    let Opening {
        reconciliation,
        allow_overrides,
        manifest,
    } = opening;
    partial.begin(&manifest);
    let expected = reconciliation.effective.clone();
    let pool = loaded_pool(load, &expected)?;

    run.observer.header(&manifest);
    let _played = play_dependency(&pool).await?;
    let ctx = Ctx {
        target: Node::new(&subject.url, &pool, subject.temp_dir.clone()),
        replicas: load
            .replica
            .iter()
            .map(|url| Node::new(url, &pool, None))
            .collect(),
        balancer: load.balancer,
        client,
        trust,
        expect: expectations(load.profile, &pool),
        pool,
        contract: expected,
        progress: load.progress,
        observer: run.observer,
    };

    let mut results = contract_results(&ctx, source, &reconciliation, allow_overrides).await?;
    for r in &results {
        ctx.print(r);
        partial.finished(r);
    }
    partial.running(&format!("the {} profile", load.profile.as_str()));
    // Also the hooks probe: a target without hooks stops the run here (exit 2). In fleet mode
    // every replica is probed directly first, so one without hooks is named.
    for replica in &ctx.replicas {
        calibrate::calibrate(&ctx, replica).await?;
    }
    let calibration = calibrate::calibrate(&ctx, &ctx.target).await?;
    let profiled = match load.profile {
        ProfileName::Burst => profiles::burst::run(load, &ctx).await?,
        _ => profiles::rate::run(load, &ctx, &calibration, &process).await?,
    };
    results.extend(profiled.results);
    let mut series = profiled.series;
    if let Some(baseline) = &baseline {
        for r in &mut results {
            baseline.compare(r, load.baseline.fail_on_regression);
        }
        baseline.beside(&mut series);
    }

    let report = RunReport {
        manifest,
        results,
        series: Some(series),
    };
    run.observer.summary(&report);
    Ok(report)
}
