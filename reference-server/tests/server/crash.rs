//! A crash (`kill -9`) in the middle of jobs leaves their temp dirs behind; the next start removes
//! them, and the restarted server works. The server runs as a process of its own
//! (`plimsoll-reference-server`), on loopback, with every wait bounded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use plimsoll_engine::temp::JOB_DIR_PREFIX;

use super::common::metric_value;
use super::png;

const BIN: &str = env!("CARGO_BIN_EXE_plimsoll-reference-server");

/// The server process; killed (SIGKILL) when dropped, so a failing test leaves none behind.
struct Process {
    child: Child,
    url: String,
}

impl Process {
    /// Starts the server with hooks on, its temp root `jobs` and its log `log`; returns once it
    /// listens.
    fn start(jobs: &Path, log: &Path) -> Process {
        let mut child = Command::new(BIN)
            .arg("127.0.0.1:0")
            .env("PLIMSOLL_TEST_HOOKS", "1")
            .env("PLIMSOLL_TEMP_DIR", jobs)
            .env("PLIMSOLL_LOG_FILE", log)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start plimsoll-reference-server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut process = Process {
            child,
            url: String::new(),
        };
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the server did not say where it listens within 20 s");
        process.url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        process
    }

    /// `kill -9`, and wait for the process to be gone.
    fn kill_9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The job directories under `jobs`.
fn job_dirs(jobs: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(jobs)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(JOB_DIR_PREFIX))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn after_kill_9_in_the_middle_of_jobs_a_restart_leaves_nothing_behind() {
    let workspace = tempfile::tempdir().unwrap();
    let jobs = workspace.path().join("jobs");
    let log = workspace.path().join("server.log");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let image = png(60, 40);
    let digitize = |url: &str, hook: Option<&str>| {
        let r = client
            .post(format!("{url}/v1/digitize?width_mm=40"))
            .header("content-type", "image/png")
            .body(image.clone());
        match hook {
            Some(h) => r.header("x-plimsoll-hook", h),
            None => r,
        }
    };

    // Three jobs held in their first stage: each has its temp dir, with a file in it.
    let mut first = Process::start(&jobs, &log);
    let held: Vec<_> = (0..3)
        .map(|_| tokio::spawn(digitize(&first.url, Some("hold=decode:60000")).send()))
        .collect();
    let started = Instant::now();
    while job_dirs(&jobs).len() < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "3 held jobs, {} temp dirs",
            job_dirs(&jobs).len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for dir in job_dirs(&jobs) {
        std::fs::write(dir.join("partial.bin"), [0u8; 4096]).unwrap();
    }
    std::fs::write(jobs.join("unrelated.txt"), "not a job's").unwrap();

    first.kill_9();
    let left = job_dirs(&jobs);
    assert_eq!(
        left.len(),
        3,
        "kill -9 gives the server no chance to clean up"
    );
    for request in held {
        let answer = tokio::time::timeout(Duration::from_secs(10), request)
            .await
            .expect("a held request ends when its server dies")
            .unwrap();
        assert!(
            answer.is_err(),
            "no answer from a killed server: {answer:?}"
        );
    }

    // Restart on the same temp root: the crash's dirs are gone before it listens.
    let second = Process::start(&jobs, &log);
    assert_eq!(job_dirs(&jobs), Vec::<PathBuf>::new());
    assert!(
        jobs.join("unrelated.txt").exists(),
        "only job dirs are removed"
    );
    let health = client
        .get(format!("{}/healthz", second.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let done = digitize(&second.url, None).send().await.unwrap();
    assert_eq!(done.status(), 200, "{:?}", done.text().await);
    let metrics = client
        .get(format!("{}/metrics", second.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        metric_value(&metrics, plimsoll_spec::MetricName::TempFiles, None),
        Some(0.0)
    );
    assert_eq!(job_dirs(&jobs), Vec::<PathBuf>::new());

    // The restart says what it removed: the three dirs by name.
    let names: Vec<String> = left
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let noted = text.lines().any(|l| {
            l.contains("removed stale job directories") && names.iter().all(|n| l.contains(n))
        });
        if noted {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no start-up line naming {names:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(second);
}
