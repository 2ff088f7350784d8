//! `--engine locust`: the same rate profile driven by Locust's distributed mode — one master and
//! N worker processes — for more load than one goose process makes.
//!
//! Plimsoll writes the profile as a locustfile and a plan (every number of the run, in
//! `plan.json`), starts the master (`--headless`, CSV output) and the local workers, and reads
//! back what happened: each attempt as the workers recorded it (sent to the master with Locust's
//! custom messages, written to one JSON-lines file), so the verdicts and the prediction are the
//! very ones a goose run gets; and Locust's own CSV counts, as evidence beside them. Workers on
//! other machines may join the same master (`--locust-expect`): they need the same folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::run::{Attempt, Hold, Outcome, RequestTemplate};
use super::run::{RunKind, RunOutput, RunSpec};

/// The Locust release the locustfile is written and tested against (`.ci/run` installs it).
pub const LOCUST_VERSION: &str = "2.47.0";

/// The locustfile every run uses; the numbers come from `plan.json` beside it.
const LOCUSTFILE: &str = include_str!("locustfile.py");

/// Why a Locust run failed, or what it recorded cannot be judged.
#[derive(Debug, thiserror::Error)]
pub enum LocustError {
    /// The profile is the burst, whose waves need goose.
    #[error("the burst profile needs goose (its waves leave from a barrier)")]
    Burst,
    /// The interpreter has no Locust; the message has the install command.
    #[error(
        "--engine locust needs Locust for {python}: `{python} -m pip install locust=={LOCUST_VERSION}` (or set PLIMSOLL_PYTHON)"
    )]
    NotInstalled {
        /// The interpreter asked.
        python: String,
    },
    /// The run's folder could not be made.
    #[error("a folder for the locustfile: {0}")]
    Folder(std::io::Error),
    /// The locustfile or its plan could not be written.
    #[error("writing {name}: {source}")]
    Write {
        /// The file.
        name: &'static str,
        /// Why writing failed.
        source: std::io::Error,
    },
    /// No port was free for the master.
    #[error("a port for the Locust master on {bind}: {source}")]
    Port {
        /// The master's address.
        bind: String,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The master process could not be started.
    #[error("starting the Locust master ({python}): {source}")]
    StartMaster {
        /// The interpreter.
        python: String,
        /// Why it could not start.
        source: std::io::Error,
    },
    /// A worker process could not be started.
    #[error("starting Locust worker {index}: {source}")]
    StartWorker {
        /// The worker's number, from 0.
        index: u32,
        /// Why it could not start.
        source: std::io::Error,
    },
    /// Waiting for the master failed.
    #[error("the Locust master: {0}")]
    Master(std::io::Error),
    /// The master outlived the run and its stop, and was killed.
    #[error("the Locust master did not finish within {} s; its log: {log}", .limit.as_secs())]
    MasterHung {
        /// How long it was given.
        limit: Duration,
        /// The last lines of its log.
        log: String,
    },
    /// The workers' records could not be read.
    #[error("{source}; the master's log: {log}")]
    Records {
        /// Why.
        source: RecordsError,
        /// The last lines of the master's log.
        log: String,
    },
    /// The workers recorded nothing.
    #[error("Locust recorded no attempt; the master's log: {log}")]
    NoAttempt {
        /// The last lines of the master's log.
        log: String,
    },
    /// Locust counted more requests than the workers recorded.
    #[error(
        "Locust counted {counted} requests but its workers recorded only {recorded}: records were lost"
    )]
    Lost {
        /// Requests in Locust's CSV.
        counted: usize,
        /// Attempts the workers recorded.
        recorded: usize,
    },
    /// Locust's CSV has no request count to cross-check the records with.
    #[error("Locust's CSV is unreadable: {summary}")]
    Csv {
        /// What could be made of it.
        summary: String,
    },
}

/// Why the attempts the workers recorded could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// The file could not be read.
    #[error("the attempts Locust recorded ({}): {source}", .path.display())]
    Read {
        /// The attempts file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// A line is not JSON.
    #[error("a line of {}: {source}", .path.display())]
    Line {
        /// The attempts file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// No record says when the run started.
    #[error("the master recorded no start")]
    NoStart,
}

/// How Locust is run.
#[derive(Debug, Clone)]
pub struct LocustEngine {
    /// The Python interpreter with `locust` installed.
    pub python: String,
    /// Worker processes started here.
    pub workers: u32,
    /// Workers the master waits for before it starts (at least `workers`; the others join from
    /// elsewhere with `locust -f FOLDER/locustfile.py --worker --master-host HOST`).
    pub expect_workers: u32,
    /// The master's address for workers.
    pub bind: String,
}

/// Runs a rate profile on Locust and returns what the verdicts read.
pub async fn run(spec: &RunSpec, engine: &LocustEngine) -> Result<RunOutput, LocustError> {
    let rate = RateSettings::of(spec)?;
    check_installed(engine).await?;
    let folder = write_folder(spec, &rate)?;
    let mut processes = start(spec, engine, &folder, &rate)?;
    let elapsed_ms = wait(&mut processes, &folder, &rate).await?;
    collect(&folder, spec, engine, elapsed_ms)
}

/// The numbers of a rate profile Locust runs, checked once so the later phases need no
/// burst case.
struct RateSettings {
    mean_think_ms: f64,
    duration: Duration,
    mean_hold_ms: f64,
    hold_cap_ms: u64,
    /// How long the stop waits for the requests in flight, s.
    stop_s: u64,
}

impl RateSettings {
    /// Locust drives only the rate profiles: a burst's waves leave from goose's barrier.
    fn of(spec: &RunSpec) -> Result<RateSettings, LocustError> {
        let RunKind::Rate {
            mean_think_ms,
            duration,
        } = &spec.kind
        else {
            return Err(LocustError::Burst);
        };
        let (mean_hold_ms, hold_cap_ms) = match spec.hold.hold {
            Hold::Exponential { mean_ms, cap_ms } => (mean_ms, cap_ms),
            Hold::Fixed { ms } => (ms as f64, ms),
        };
        Ok(RateSettings {
            mean_think_ms: *mean_think_ms,
            duration: *duration,
            mean_hold_ms,
            hold_cap_ms,
            // The stop waits for every request in flight (at most the hold cap, plus margin)
            // rather than killing it.
            stop_s: hold_cap_ms.div_ceil(1000) + 5,
        })
    }
}

/// Fails early, with the install command, when the interpreter has no Locust.
async fn check_installed(engine: &LocustEngine) -> Result<(), LocustError> {
    let installed = Command::new(&engine.python)
        .args(["-c", "import locust"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success());
    if installed {
        return Ok(());
    }
    Err(LocustError::NotInstalled {
        python: engine.python.clone(),
    })
}

/// The run's folder: the locustfile and its plan, and where the workers' records land (kept
/// until the run is read back, then removed).
struct Folder {
    dir: tempfile::TempDir,
    locustfile: PathBuf,
    attempts_file: PathBuf,
}

impl Folder {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The master's log, for an error message.
    fn master_log(&self) -> String {
        tail(&self.path().join("master.log"))
    }
}

/// A refusal as the locustfile tells one from another answer: its status and what its body
/// holds, the same rule `RefusalAnswer::mismatch` applies to goose's answers.
fn refusal_rule(r: &plimsoll_spec::RefusalAnswer) -> serde_json::Value {
    use plimsoll_spec::AnswerBody;
    use plimsoll_spec::model::RefusalBody;
    let body = match &r.body {
        AnswerBody::Problem(code) => {
            serde_json::json!({"pointer": "/code", "value": code.as_str()})
        }
        AnswerBody::Shape(RefusalBody::Json(c)) => {
            serde_json::json!({"pointer": c.pointer, "value": c.value})
        }
        AnswerBody::Shape(RefusalBody::Text(t)) => serde_json::json!({"text": t.text}),
        AnswerBody::Shape(RefusalBody::Contains(c)) => serde_json::json!({"contains": c.contains}),
        AnswerBody::Any => serde_json::json!({}),
    };
    serde_json::json!({"status": r.status, "body": body})
}

/// Writes the locustfile and `plan.json` (every number of the run) into a fresh folder, so
/// workers elsewhere can run the very same profile.
fn write_folder(spec: &RunSpec, rate: &RateSettings) -> Result<Folder, LocustError> {
    let folder = tempfile::Builder::new()
        .prefix("plimsoll-locust-")
        .tempdir()
        .map_err(LocustError::Folder)?;
    let dir = folder.path();
    let t = &spec.template;
    let plan = serde_json::json!({
        "seed": spec.seed,
        "duration_ms": rate.duration.as_secs_f64() * 1000.0,
        "mean_think_ms": rate.mean_think_ms,
        "mean_hold_ms": rate.mean_hold_ms,
        "hold_cap_ms": rate.hold_cap_ms,
        "abandon_fraction": spec.hold.abandon_fraction,
        "pre_hold_ms": spec.hold.pre_hold_ms,
        "fixed_hold": matches!(spec.hold.hold, Hold::Fixed { .. }),
        "name": t.name,
        "method": t.method.as_str(),
        "path": t.path,
        "headers": t.headers.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        "body_hex": t.body.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        "hook": t.hook.as_ref().map(|h| serde_json::json!({"header": h.header, "stage": h.stage})),
        "ok_status": t.ok_status,
        "refusal": t.refusal.as_ref().map(refusal_rule),
        "request_id_header": t.request_id_header,
        "server_timing_header": t.server_timing.as_ref().map(|(header, _)| header.clone()),
        "retry_after_header": t.hint_header,
    });
    let write = |name: &'static str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|source| LocustError::Write { name, source })
    };
    write("locustfile.py", LOCUSTFILE)?;
    write("plan.json", &plan.to_string())?;
    Ok(Folder {
        attempts_file: dir.join("attempts.jsonl"),
        locustfile: dir.join("locustfile.py"),
        dir: folder,
    })
}

/// The master and the local workers while they run, and when the master was started.
struct Processes {
    master: Child,
    workers: Vec<Child>,
    started: Instant,
}

/// Starts the master (headless, CSV output, waiting for every expected worker) and the
/// workers started here.
fn start(
    spec: &RunSpec,
    engine: &LocustEngine,
    folder: &Folder,
    rate: &RateSettings,
) -> Result<Processes, LocustError> {
    let dir = folder.path();
    let port = free_port(&engine.bind)?;
    // Users stop sending at the plan's end; the run lasts a second longer.
    let run_s = rate.duration.as_secs_f64().ceil() as u64 + 1;
    let started = Instant::now();
    let master = locust(&engine.python, &folder.locustfile, dir, "master")
        .args(["--headless", "--master", "--master-bind-host", &engine.bind])
        .args(["--master-bind-port", &port.to_string()])
        .args(["--expect-workers", &engine.expect_workers.to_string()])
        .args(["-u", &spec.users.to_string(), "-r", &spec.users.to_string()])
        .args([
            "-t",
            &format!("{run_s}s"),
            "--stop-timeout",
            &rate.stop_s.to_string(),
        ])
        .args(["--host", &spec.host, "--only-summary"])
        .arg("--csv")
        .arg(dir.join("locust"))
        .env("PLIMSOLL_ATTEMPTS_FILE", &folder.attempts_file)
        .spawn()
        .map_err(|source| LocustError::StartMaster {
            python: engine.python.clone(),
            source,
        })?;
    println!(
        "locust: master on {}:{port} waiting for {} worker(s) ({} started here); locustfile and plan in {}",
        engine.bind,
        engine.expect_workers,
        engine.workers,
        dir.display()
    );
    let mut workers: Vec<Child> = Vec::new();
    for i in 0..engine.workers {
        let worker = locust(
            &engine.python,
            &folder.locustfile,
            dir,
            &format!("worker-{i}"),
        )
        .args(["--worker", "--master-host", &engine.bind])
        .args(["--master-port", &port.to_string()])
        .spawn()
        .map_err(|source| LocustError::StartWorker { index: i, source })?;
        workers.push(worker);
    }
    Ok(Processes {
        master,
        workers,
        started,
    })
}

/// Waits for the master to finish (then the workers, killing stragglers), so nothing outlives
/// the run; the run's length, ms.
async fn wait(p: &mut Processes, folder: &Folder, rate: &RateSettings) -> Result<f64, LocustError> {
    let limit = rate.duration + Duration::from_secs(rate.stop_s + 60);
    let finished = tokio::time::timeout(limit, p.master.wait()).await;
    for w in &mut p.workers {
        if tokio::time::timeout(Duration::from_secs(10), w.wait())
            .await
            .is_err()
        {
            let _ = w.kill().await;
        }
    }
    match finished {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(LocustError::Master(e)),
        Err(_) => {
            let _ = p.master.kill().await;
            return Err(LocustError::MasterHung {
                limit,
                log: folder.master_log(),
            });
        }
    }
    Ok(p.started.elapsed().as_secs_f64() * 1000.0)
}

/// Reads back the workers' records and Locust's CSV counts, cross-checked so a lost record
/// cannot leave the verdicts judging part of the run.
fn collect(
    folder: &Folder,
    spec: &RunSpec,
    engine: &LocustEngine,
    elapsed_ms: f64,
) -> Result<RunOutput, LocustError> {
    let (attempts, censored_think_ms) = read_attempts(&folder.attempts_file, &spec.template)
        .map_err(|source| LocustError::Records {
            source,
            log: folder.master_log(),
        })?;
    if attempts.is_empty() {
        return Err(LocustError::NoAttempt {
            log: folder.master_log(),
        });
    }
    let stats = folder.path().join("locust_stats.csv");
    let (summary, counted) = csv_summary(&stats, engine, &spec.template);
    let summary = cross_checked(summary, counted, attempts.len())?;
    Ok(RunOutput {
        attempts,
        engine_summary: summary,
        elapsed_ms,
        drain_failed: false,
        censored_think_ms,
        // Locust's processes are not watched: its runs leave no attempt out.
        stalls: Vec::new(),
    })
}

/// Locust's count is a cross-check of the records: a record lost on its way to the master
/// would leave the verdicts judging part of the run. Locust may count fewer than were sent
/// (its workers report every few seconds, and the master writes the CSV without waiting for
/// the last report), never more.
fn cross_checked(
    summary: String,
    counted: Option<usize>,
    recorded: usize,
) -> Result<String, LocustError> {
    match counted {
        Some(n) if n <= recorded => Ok(format!(
            "{summary}; the workers recorded {recorded} ({} after Locust's last report)",
            recorded - n
        )),
        Some(counted) => Err(LocustError::Lost { counted, recorded }),
        None => Err(LocustError::Csv { summary }),
    }
}

/// `python -m locust -f FILE`, quiet, its output in `NAME.log` in the run's folder.
fn locust(python: &str, locustfile: &Path, dir: &Path, name: &str) -> Command {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).ok();
    let mut c = Command::new(python);
    c.args(["-m", "locust", "-f"])
        .arg(locustfile)
        .args(["--loglevel", "WARNING"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    match log {
        Some(f) => {
            let err = f.try_clone().map(Stdio::from).unwrap_or(Stdio::null());
            c.stdout(Stdio::from(f)).stderr(err);
        }
        None => {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    c
}

fn free_port(bind: &str) -> Result<u16, LocustError> {
    std::net::TcpListener::bind((bind, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| LocustError::Port {
            bind: bind.to_owned(),
            source,
        })
}

/// The last lines of a log, for an error message.
fn tail(path: &PathBuf) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join(" | ")
}

/// The workers' records: attempts (sent times relative to the run's start as the master saw
/// it) and the think time the end of the run cut short. The locustfile tells a refusal by the
/// template's rule (`refusal_rule`) and records whether the answer was one.
fn read_attempts(
    path: &Path,
    template: &RequestTemplate,
) -> Result<(Vec<Attempt>, f64), RecordsError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecordsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let records: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|source| RecordsError::Line {
            path: path.to_owned(),
            source,
        })?;
    let start = records
        .iter()
        .filter(|r| r["kind"] == "start")
        .filter_map(|r| r["epoch_ms"].as_f64())
        .reduce(f64::min)
        .ok_or(RecordsError::NoStart)?;
    let mut users: HashMap<String, usize> = HashMap::new();
    let mut attempts = Vec::new();
    let mut censored = 0.0;
    for r in &records {
        match r["kind"].as_str() {
            Some("censored") => censored += r["think_ms"].as_f64().unwrap_or(0.0),
            Some("attempt") => {
                let next = users.len();
                let user = *users
                    .entry(r["user"].as_str().unwrap_or_default().to_owned())
                    .or_insert(next);
                let text = |k: &str| r[k].as_str().map(str::to_owned);
                let outcome = match (&r["outcome"], r["outcome"].as_str()) {
                    (v, _) if v.is_u64() => Outcome::Status(v.as_u64().unwrap_or(0) as u16),
                    (_, Some("abandoned")) => Outcome::Abandoned,
                    (_, Some(e)) => Outcome::Error(e.trim_start_matches("error: ").to_owned()),
                    _ => Outcome::Error("no outcome recorded".into()),
                };
                let refused = r["refused"].as_bool().unwrap_or(false);
                attempts.push(Attempt {
                    refused,
                    user,
                    wave: 0,
                    sent_ms: r["sent_epoch_ms"].as_f64().unwrap_or(start) - start,
                    latency_ms: r["latency_ms"].as_f64().unwrap_or(0.0),
                    think_ms: r["think_ms"].as_f64().unwrap_or(0.0),
                    hold_ms: r["hold_ms"].as_u64().unwrap_or(0),
                    abandon_planned: r["abandon_planned"].as_bool().unwrap_or(false),
                    outcome,
                    retry_after: text("retry_after"),
                    code: text("code"),
                    request_id: text("request_id"),
                    timing: r["server_timing"].as_str().and_then(|v| {
                        let (_, entries) = template.server_timing.as_ref()?;
                        plimsoll_conformance::remote::server_timing_of(v, entries)
                    }),
                });
            }
            _ => {}
        }
    }
    attempts.sort_by(|a, b| a.sent_ms.total_cmp(&b.sent_ms));
    Ok((attempts, censored))
}

/// Locust's own counts of the template's requests from its CSV (`locust_stats.csv`), as one
/// evidence line, and its request count.
fn csv_summary(
    path: &Path,
    engine: &LocustEngine,
    template: &RequestTemplate,
) -> (String, Option<usize>) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (format!("Locust wrote no CSV at {}", path.display()), None);
    };
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| header.iter().position(|h| h.trim_matches('"') == name);
    let name = template.name.as_str();
    let row = (lines.find(|l| l.split(',').nth(1).map(|c| c.trim_matches('"')) == Some(name)))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split(',').collect();
    let get = |name: &str| {
        col(name)
            .and_then(|i| cells.get(i))
            .map(|v| v.trim_matches('"').to_owned())
            .unwrap_or_else(|| "?".into())
    };
    let rate = get("Requests/s")
        .parse::<f64>()
        .map_or("?".into(), |r| format!("{r:.1}"));
    let summary = format!(
        "Locust ({} workers) counted {name}: {} requests, {} failures (what Locust calls failures: every answer but {}), median {} ms, p99 {} ms, {rate} req/s",
        engine.expect_workers,
        get("Request Count"),
        get("Failure Count"),
        template.ok_status,
        get("Median Response Time"),
        get("99%"),
    );
    (summary, get("Request Count").parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_says_why_with_the_masters_log() {
        let missing = LocustError::NotInstalled {
            python: "python3".into(),
        };
        assert_eq!(
            missing.to_string(),
            format!(
                "--engine locust needs Locust for python3: `python3 -m pip install locust=={LOCUST_VERSION}` (or set PLIMSOLL_PYTHON)"
            )
        );
        let hung = LocustError::MasterHung {
            limit: Duration::from_secs(75),
            log: "a | b".into(),
        };
        assert_eq!(
            hung.to_string(),
            "the Locust master did not finish within 75 s; its log: a | b"
        );
        let records = LocustError::Records {
            source: RecordsError::NoStart,
            log: "a".into(),
        };
        assert_eq!(
            records.to_string(),
            "the master recorded no start; the master's log: a"
        );
        let lost = cross_checked("s".into(), Some(5), 3).unwrap_err();
        assert_eq!(
            lost.to_string(),
            "Locust counted 5 requests but its workers recorded only 3: records were lost"
        );
    }
}
