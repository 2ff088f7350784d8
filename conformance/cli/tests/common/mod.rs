//! What the load and fleet tests share: a lock so no more of them load the machine at once than
//! it holds,
//! `plimsoll serve` in a process of its own, `ci/gate.sh` against it (`gate`), and what they read from a run's report (one
//! verdict by id, which verdicts failed, every verdict in one line each).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use plimsoll_conformance::verdict::{CheckResult, RunReport};

#[allow(
    dead_code,
    reason = "the gate and load tests run the gate; the fleet tests share the rest of `common`"
)]
pub mod gate;
#[allow(
    dead_code,
    reason = "the load tests take one place, the fleet tests every place"
)]
pub mod places;

/// The verdict `id` of the run; a missing one fails the test, naming the ones there are.
pub fn result<'r>(report: &'r RunReport, id: &str) -> &'r CheckResult {
    report
        .results
        .iter()
        .find(|r| r.id.to_string() == id)
        .unwrap_or_else(|| panic!("no verdict {id} in the run:\n{}", why(report)))
}

pub fn failed(report: &RunReport) -> BTreeSet<String> {
    report
        .results
        .iter()
        .filter(|r| r.verdict.is_fail())
        .map(|r| r.id.to_string())
        .collect()
}

pub fn why(report: &RunReport) -> String {
    report
        .results
        .iter()
        .map(|r| {
            format!(
                "{} {}: {} | expected {} | {:?}",
                r.id,
                r.verdict.label(),
                r.observed,
                r.expected,
                r.verdict
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A child process stopped on drop: SIGTERM first (nginx's master then stops its worker, which
/// SIGKILL would leave behind holding the port), SIGKILL after five seconds.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `plimsoll serve` with hooks on, in its own folder, with `extra_env` on top. It binds port 0,
/// so the kernel hands it a free port at once (nothing to race), and says which on stderr.
pub fn serve(dir: &Path, extra_env: &[(&str, &str)]) -> (Process, String) {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_plimsoll"));
    cmd.args(["serve", "--port", "0"])
        .env("PLIMSOLL_TEST_HOOKS", "1")
        .env("PLIMSOLL_TEMP_DIR", dir.join("jobs"))
        .env("PLIMSOLL_LOG_FILE", dir.join("server.log"))
        .env_remove("WORKER_POOL_SIZE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut server = Process(cmd.spawn().unwrap());
    let url = announced(&mut server.0, "plimsoll serve: listening on ");
    (server, url)
}

/// The URL `child` says it listens on, in the stderr line starting with `prefix`; the rest of
/// its stderr is read on a thread of its own (to the end), so the child never blocks on a full
/// pipe. Fails if it exits, or says nothing, within 20 s.
fn announced(child: &mut Child, prefix: &'static str) -> String {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let lines = std::io::BufReader::new(stderr).lines();
        for line in lines.map_while(Result::ok) {
            if let Some(url) = line.strip_prefix(prefix) {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|e| {
            panic!(
                "no `{prefix}URL` on stderr within 20 s ({e}): {:?}",
                child.try_wait()
            )
        })
}
