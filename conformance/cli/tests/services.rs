//! Services other than the reference one, gated unmodified by contracts of their own. nginx
//! (Debian's package) with `limit_conn` in front of a slow upstream, as `examples/nginx`
//! declares it: the contract it passes with, every other clause reported not applicable with
//! its reason (nginx serves no claim, no metrics and no hook), and configurations that break the
//! contract — one more connection than declared, another refusal status — each failing T1.
//!
//! Everything listens on loopback; every run is bounded in time. Without nginx the tests fail
//! saying how to get it (the test command, `bash ci/test.sh`, installs it).

#[allow(
    dead_code,
    reason = "the shared helpers judge in-process reports; these runs are processes"
)]
mod common;
#[path = "common/nginx.rs"]
mod nginx;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Process, free_port, wait_listening};
use nginx::nginx_binary;
use serde_json::Value;

/// How long the upstream takes to answer: the contract's `hold.at_least_ms`.
const SLOW: Duration = Duration::from_millis(500);

/// The example's files, read from the repository.
fn example(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/nginx")
        .join(file)
}

/// A slow upstream on loopback: every request is answered `200 ok` after [`SLOW`], on a
/// thread of its own, and the connection closed. Returns its address.
fn slow_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer_slowly(stream));
        }
    });
    addr
}

fn answer_slowly(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    std::thread::sleep(SLOW);
    let _ =
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
}

/// nginx from the example's configuration, with `connections` and `status` in place of the
/// contract's, in front of `upstream`. Returns the process and its URL.
fn nginx(dir: &Path, connections: u32, status: u16, upstream: &str) -> (Process, String) {
    let template = std::fs::read_to_string(example("nginx.conf")).unwrap();
    let port = free_port();
    let conf = template
        .replace("@DIR@", &dir.display().to_string())
        .replace("@CONNECTIONS@", &connections.to_string())
        .replace("@STATUS@", &status.to_string())
        .replace("@UPSTREAM@", upstream)
        .replace("@PORT@", &port.to_string());
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let mut child = Command::new(nginx_binary())
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port, "nginx", &mut child);
    (Process(child), format!("http://127.0.0.1:{port}"))
}

/// `plimsoll check --contract examples/nginx/contract.toml --target URL`: its exit code and
/// JSON report. Killed after a minute (a hung run fails the test rather than hanging it).
fn check(dir: &Path, url: &str) -> (Option<i32>, Value) {
    let report = dir.join("report.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
        .args(["check", "--quiet", "--target", url, "--contract"])
        .arg(example("contract.toml"))
        .arg("--json")
        .arg(&report)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("plimsoll check against {url} ran past a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&report).unwrap();
    (status.code(), serde_json::from_str(&text).unwrap())
}

/// Each result's id and verdict, in run order.
fn verdicts(report: &Value) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("id"), s("verdict"))
        })
        .collect()
}

/// nginx as its contract says: T1 judged and passed by the client's clock (two ran at once,
/// the other two refused with 503), every other check not applicable with a reason naming what
/// the contract does not declare — none counted as a pass — and the run exits 0.
#[test]
fn nginx_passes_its_own_contract_and_every_clause_it_does_not_declare_is_not_applicable() {
    let dir = tempfile::tempdir().unwrap();
    let (_nginx, url) = nginx(&dir.path().join("nginx"), 2, 503, &slow_upstream());
    let (code, report) = check(dir.path(), &url);
    let verdicts = verdicts(&report);
    assert_eq!(code, Some(0), "{verdicts:?}");
    let t1 = &report["results"][1];
    assert_eq!(t1["id"], "T1");
    assert_eq!(t1["verdict"], "pass", "{t1}");
    assert!(
        t1["observed"]
            .as_str()
            .unwrap()
            .contains("2 ran at once, 0 queued, 2 refused"),
        "{t1}"
    );
    for result in report["results"].as_array().unwrap().iter().skip(2) {
        assert_eq!(result["verdict"], "not_applicable", "{result}");
        let reason = result["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("declares no"), "{result}");
    }
    assert_eq!(report["results"][0]["verdict"], "not_applicable");
}

/// nginx configured otherwise than its contract says fails T1, saying what the client saw.
#[test]
fn nginx_configured_against_its_contract_fails_t1() {
    let upstream = slow_upstream();
    // (limit_conn, limit_conn_status, what the client sees)
    for (connections, status, seen) in [
        (3, 503, "3 ran at once, 0 queued, 1 refused"),
        (2, 429, "2 otherwise answered"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (_nginx, url) = nginx(&dir.path().join("nginx"), connections, status, &upstream);
        let (code, report) = check(dir.path(), &url);
        let t1 = &report["results"][1];
        assert_eq!(
            code,
            Some(1),
            "limit_conn {connections}, status {status}: {t1}"
        );
        assert_eq!(t1["verdict"], "fail", "{t1}");
        assert!(t1["observed"].as_str().unwrap().contains(seen), "{t1}");
    }
}
