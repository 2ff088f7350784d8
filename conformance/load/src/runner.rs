//! The goose side: builds a `GooseAttack` in code (never from the process's arguments), runs
//! it, and records every attempt the way the verdicts need it.
//!
//! Goose users are closed-loop by construction (a user waits for its answer before its next
//! request), so the rate profiles make each user think an exponential time before every
//! attempt and the prediction uses the closed-population formula (Engset). The burst profile
//! lines all users up behind a barrier so each wave really leaves at once.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goose::config::GooseConfiguration;
use goose::prelude::*;
use plimsoll_conformance::remote::body::MAX_REPLY_BYTES;
use plimsoll_fault::rng::SplitMix64;

use super::connection::{Answer, ExchangeError, Target, UserConnection};
use super::run::{
    Attempt, DrainWait, HoldPlan, Outcome, RequestTemplate, RunKind, RunOutput, RunSpec,
    problem_code,
};
use super::stalls::{self, Stall};

/// Counters the progress display reads while the run goes on.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// Attempts sent.
    pub sent: AtomicU64,
    /// Served (the request's success status).
    pub ok: AtomicU64,
    /// Refused with the pool's refusal (its status and body).
    pub refused: AtomicU64,
    /// Anything else: another answer, or none (abandonment the profile planned is not counted).
    pub other: AtomicU64,
    /// Burst waves with an attempt recorded so far: the progress bar's position.
    pub waves_done: AtomicU64,
}

struct Shared {
    t0: Instant,
    /// The request's URI, parsed once.
    uri: http::Uri,
    seed: u64,
    draws: AtomicU64,
    template: RequestTemplate,
    hold: HoldPlan,
    records: Mutex<Vec<Attempt>>,
    live: Arc<LiveCounts>,
    pacing: Pacing,
    /// Each user's idle connections are dropped after this ([`super::run::keep_alive`]).
    keep_alive: Duration,
    /// Think time cut short by the deadline, µs: with the completed thinks it gives the
    /// realised mean think time (the exponential's censored-sample estimate).
    censored_think_us: AtomicU64,
}

enum Pacing {
    /// Think an exponential time before each attempt; no attempt starts after the deadline.
    Rate {
        mean_think_ms: f64,
        deadline: Instant,
    },
    /// All users leave together, once the server is drained.
    Burst {
        arrive: tokio::sync::Barrier,
        leave: tokio::sync::Barrier,
        drain: Box<DrainWait>,
        drain_failed: AtomicBool,
    },
}

/// Why a goose attack did not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum GooseFailure {
    /// goose's own thresholds failed (the metrics its error carries are not kept).
    #[error("goose thresholds failed")]
    Thresholds,
    /// goose could not be configured, or its attack failed.
    #[error("{0}")]
    Goose(GooseError),
    /// The thread goose runs on could not start, or ended without an answer.
    #[error("goose's thread: {0}")]
    Thread(String),
    /// The target's URL or the request's path cannot be sent to.
    #[error("{0}")]
    Target(String),
}

impl From<GooseError> for GooseFailure {
    fn from(e: GooseError) -> GooseFailure {
        match e {
            GooseError::ThresholdsFailed { .. } => GooseFailure::Thresholds,
            other => GooseFailure::Goose(other),
        }
    }
}

/// Abandoned requests set their own timeout; no other exchange may take this long.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The configuration every run shares: users started at once, no controllers, quiet.
pub fn base_configuration(host: &str, users: usize, report: Option<String>) -> GooseConfiguration {
    let mut c = GooseConfiguration::default();
    c.host = Some(host.to_owned());
    c.users = Some(users);
    // All users within about 50 ms: the profiles' clocks start with the first of them.
    c.increase_rate = Some((users * 20).max(1).to_string());
    c.no_telnet = true;
    c.quiet = 1;
    c.no_print_metrics = true;
    c.report_file = report.into_iter().collect();
    c
}

/// Runs one profile's goose attack; `t0` is the clock every attempt is stamped against.
pub async fn run(
    spec: RunSpec,
    t0: Instant,
    live: Arc<LiveCounts>,
) -> Result<RunOutput, GooseFailure> {
    let mut config = base_configuration(&spec.host, spec.users, spec.report.clone());
    let pacing = match &spec.kind {
        RunKind::Rate {
            mean_think_ms,
            duration,
        } => {
            // Goose's clock starts once every user runs; users stop attempting at our deadline
            // and idle until goose tells them to exit.
            config.run_time = Some(duration.as_secs_f64().ceil().max(1.0).to_string());
            // Keep goose's own counts comparable with ours: count from the first request.
            config.no_reset_metrics = true;
            Pacing::Rate {
                mean_think_ms: *mean_think_ms,
                deadline: t0 + *duration,
            }
        }
        RunKind::Burst { waves, drain } => {
            config.iterations = Some(*waves);
            Pacing::Burst {
                arrive: tokio::sync::Barrier::new(spec.users),
                leave: tokio::sync::Barrier::new(spec.users),
                drain: drain.clone(),
                drain_failed: AtomicBool::new(false),
            }
        }
    };
    let target = Target::new(&spec.host, &spec.trust).map_err(GooseFailure::Target)?;
    let uri = Target::uri(&spec.template.path).map_err(GooseFailure::Target)?;
    let shared = Arc::new(Shared {
        t0,
        uri,
        seed: spec.seed,
        draws: AtomicU64::new(0),
        template: spec.template,
        hold: spec.hold,
        records: Mutex::new(Vec::new()),
        live,
        pacing,
        keep_alive: spec.keep_alive,
        censored_think_us: AtomicU64::new(0),
    });
    let tx = shared.clone();
    let function: TransactionFunction = Arc::new(move |user| {
        let shared = tx.clone();
        Box::pin(async move { attempt(user, &shared).await })
    });
    let name = shared.template.name.clone();
    let scenario = Scenario::new(&name)
        .register_transaction(own_connection(target, shared.keep_alive))
        .register_transaction(Transaction::new(function).set_name(&name));
    let started = Instant::now();
    let (metrics, stalls) = attack_watched(config, scenario, t0).await?;
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let attempts = std::mem::take(&mut *shared.records.lock().unwrap_or_else(|e| e.into_inner()));
    let drain_failed = match &shared.pacing {
        Pacing::Burst { drain_failed, .. } => drain_failed.load(Ordering::Relaxed),
        Pacing::Rate { .. } => false,
    };
    Ok(RunOutput {
        attempts,
        engine_summary: goose_summary(&metrics),
        elapsed_ms,
        drain_failed,
        censored_think_ms: shared.censored_think_us.load(Ordering::Relaxed) as f64 / 1000.0,
        stalls,
    })
}

/// Runs the attack on goose's runtime with the runtime's stalls watched throughout
/// ([`crate::stalls`], timed against `t0`): goose's metrics and the stalls seen.
async fn attack_watched(
    config: GooseConfiguration,
    scenario: Scenario,
    t0: Instant,
) -> Result<(GooseMetrics, Vec<Stall>), GooseFailure> {
    let stalls = Arc::new(Mutex::new(Vec::new()));
    let watched = stalls.clone();
    let metrics = on_goose_runtime(move || async move {
        let watch = tokio::spawn(stalls::watch(t0, watched));
        let attack =
            GooseAttack::initialize_with_config(config).map(|a| a.register_scenario(scenario));
        let metrics = match attack {
            Ok(attack) => attack.execute().await,
            Err(e) => Err(e),
        };
        watch.abort();
        Ok(metrics?)
    })
    .await?;
    let seen = std::mem::take(&mut *stalls.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((metrics, seen))
}

/// Runs the goose attack `attack` makes on a runtime of its own, started on a thread of its
/// own, with a worker thread per core: every goose user, driving its own connection
/// ([`UserConnection`]), and goose's own bookkeeping run there, apart from the command's runtime.
///
/// Each user's task does all of its exchange's work (no connection task to wake), so users
/// spread over the workers as wrk's connections over its threads: `bench_loadgen` measured the
/// same users at a median 0.80 of wrk's rate on one current-thread runtime and 0.88 on two
/// workers (docs/benchmarks.md). The profiles ask for a few hundred requests a second, far
/// below either. If the caller stops waiting (the run is cut short), the attack is dropped with
/// its runtime, so no user outlives the run.
pub(crate) async fn on_goose_runtime<T, F, Fut>(attack: F) -> Result<T, GooseFailure>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, GooseFailure>> + 'static,
    T: Send + 'static,
{
    let (answer, answered) = tokio::sync::oneshot::channel();
    // Dropped with this future: the attack's thread then stops.
    let (_keep_going, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("goose-attack".into())
        .spawn(move || {
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
            let result = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name("goose")
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(async move {
                    tokio::select! {
                        result = attack() => Some(result),
                        _ = stopped => None,
                    }
                }),
                Err(e) => Some(Err(GooseFailure::Thread(format!("no runtime: {e}")))),
            };
            if let Some(result) = result {
                let _ = answer.send(result);
            }
        })
        .map_err(|e| GooseFailure::Thread(e.to_string()))?;
    answered
        .await
        .unwrap_or_else(|_| Err(GooseFailure::Thread("it ended without an answer".into())))
}

/// The transaction that gives each user its own connection to `target`
/// ([`UserConnection`]), idle connections dropped after `keep_alive`, before a conforming
/// server may close them: run once, when the user starts.
pub(crate) fn own_connection(target: Target, keep_alive: Duration) -> Transaction {
    let function: TransactionFunction = Arc::new(move |user| {
        let connection = UserConnection::new(target.clone(), keep_alive);
        Box::pin(async move {
            user.set_session_data(connection);
            Ok(())
        })
    });
    Transaction::new(function).set_on_start()
}

/// The user's own connection, which [`own_connection`] set when it started.
pub(crate) fn connection_of(
    user: &mut GooseUser,
) -> Result<&mut UserConnection, Box<TransactionError>> {
    user.get_session_data_mut::<UserConnection>()
        .ok_or_else(|| {
            Box::new(TransactionError::Custom(
                "the user has no connection".into(),
            ))
        })
}

/// One goose transaction: (think or line up), send, read, record.
async fn attempt(user: &mut GooseUser, shared: &Shared) -> TransactionResult {
    let index = shared.draws.fetch_add(1, Ordering::Relaxed);
    let mut rng = SplitMix64::stream(shared.seed, index);
    let wave = user.get_iterations();
    let Some(think_ms) = pace(shared, &mut rng).await else {
        return Ok(());
    };
    let (hold_ms, abandon_after) = shared.hold.draw(&mut rng);
    let request = shared.template.http_request(&shared.uri, hold_ms);
    shared.live.sent.fetch_add(1, Ordering::Relaxed);
    let sent = Instant::now();
    let sent_ms = (sent - shared.t0).as_secs_f64() * 1000.0;
    let limit = abandon_after.unwrap_or(REQUEST_TIMEOUT);
    let answer = match request {
        Ok(request) => {
            (connection_of(user)?)
                .exchange(request, MAX_REPLY_BYTES, limit)
                .await
        }
        Err(e) => Err(ExchangeError::Send(format!(
            "the request could not be built: {e}"
        ))),
    };
    let took = sent.elapsed();
    let mut record = Attempt {
        user: user.weighted_users_index,
        wave,
        sent_ms,
        latency_ms: took.as_secs_f64() * 1000.0,
        think_ms,
        hold_ms,
        abandon_planned: abandon_after.is_some(),
        outcome: Outcome::Error(String::new()),
        retry_after: None,
        code: None,
        refused: false,
        request_id: None,
        timing: None,
    };
    let expected = match answer {
        Ok(answer) => read_answer(shared, &mut record, answer),
        Err(e) => no_answer(shared, &mut record, &e),
    };
    let failure = (!expected).then(|| failure_tag(&record));
    let status = record.status();
    keep(shared, record, wave);
    // goose's own report counts the pool's refusals and planned abandonment as expected.
    let t = &shared.template;
    user.record_custom_request_duration(
        t.method.as_str(),
        &t.name,
        took,
        expected,
        status,
        failure.as_deref(),
    )
    .await
}

/// Waits before an attempt as the profile paces it (a think, or the burst's barrier), so the
/// attempts arrive as the prediction assumes; the think drawn, or `None` when this user's
/// profile is over.
async fn pace(shared: &Shared, rng: &mut SplitMix64) -> Option<f64> {
    match &shared.pacing {
        Pacing::Rate {
            mean_think_ms,
            deadline,
        } => {
            let think_ms = rng.exponential(*mean_think_ms);
            let think = Duration::from_secs_f64(think_ms / 1000.0);
            let now = Instant::now();
            if now + think >= *deadline {
                // This think would end past the profile: the user is done. Sleep to the end
                // (a redraw would favour short thinks and crowd the last moments), then idle in
                // short naps so goose's exit is noticed soon.
                let rest = deadline.saturating_duration_since(now);
                shared
                    .censored_think_us
                    .fetch_add(rest.as_micros() as u64, Ordering::Relaxed);
                tokio::time::sleep(rest.max(Duration::from_millis(50))).await;
                return None;
            }
            tokio::time::sleep(think).await;
            Some(think_ms)
        }
        Pacing::Burst {
            arrive,
            leave,
            drain,
            drain_failed,
        } => {
            if arrive.wait().await.is_leader() && !drain.wait().await {
                drain_failed.store(true, Ordering::Relaxed);
            }
            leave.wait().await;
            Some(0.0)
        }
    }
}

/// Reads an HTTP answer into `record` (status, and for any other than the served one its code,
/// whether it is the pool's refusal, and its headers), so the verdicts see what the client saw;
/// whether it is an expected answer (served or refused).
fn read_answer(shared: &Shared, record: &mut Attempt, answer: Answer) -> bool {
    let t = &shared.template;
    let header = |name: &str| {
        (answer.headers.get(name))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    record.timing = t.server_timing(&answer.headers);
    match &answer.body {
        Ok(body) => {
            record.outcome = Outcome::Status(answer.status);
            if answer.status != t.ok_status {
                record.code = problem_code(body);
                record.refused = t.refused(answer.status, body);
                record.request_id = t.request_id_header.as_deref().and_then(header);
                record.retry_after = t.hint_header.as_deref().and_then(header);
            }
        }
        Err(e) => record.outcome = Outcome::Error(e.to_string()),
    }
    count_answer(shared, record)
}

/// Counts an answer for the progress display: served, refused with the pool's refusal, or
/// other; whether it is an expected answer.
fn count_answer(shared: &Shared, record: &Attempt) -> bool {
    let live = &shared.live;
    if record.status() == Some(shared.template.ok_status) {
        live.ok.fetch_add(1, Ordering::Relaxed);
        true
    } else if record.refused {
        live.refused.fetch_add(1, Ordering::Relaxed);
        true
    } else {
        live.other.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// Records an attempt that got no answer: planned abandonment is expected, anything else is
/// an error the verdicts name.
fn no_answer(shared: &Shared, record: &mut Attempt, e: &ExchangeError) -> bool {
    if record.abandon_planned && e.is_timeout() {
        record.outcome = Outcome::Abandoned;
        true
    } else {
        record.outcome = Outcome::Error(e.to_string());
        shared.live.other.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// The tag goose's report files an unexpected attempt under.
fn failure_tag(record: &Attempt) -> String {
    match &record.outcome {
        Outcome::Status(s) => format!("{s} {}", record.code.clone().unwrap_or_default())
            .trim_end()
            .to_owned(),
        Outcome::Error(e) => e.clone(),
        Outcome::Abandoned => String::new(),
    }
}

/// Keeps the record for the verdicts and, in a burst, moves the progress display's wave on.
fn keep(shared: &Shared, record: Attempt, wave: usize) {
    shared
        .records
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(record);
    if let Pacing::Burst { .. } = shared.pacing {
        shared
            .live
            .waves_done
            .fetch_max(wave as u64 + 1, Ordering::Relaxed);
    }
}

/// goose's own counts per request name, as one evidence line.
fn goose_summary(m: &GooseMetrics) -> String {
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
