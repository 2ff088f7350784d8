//! The `plimsoll` binary's command line, run as a process. A gate must not pass by accident: a
//! typo in a check id or a wrong `--temp-dir`/`--server-log` path stops the run (exit 2),
//! `--strict` fails a skip, and a target that claims looser values than the contract (behind a
//! loopback proxy that rewrites its `/v1/contract`) fails the `contract` check while every other
//! check keeps the contract's values.

#[path = "cli/proxy.rs"]
mod proxy;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use plimsoll_server::{Config, Embedded};
use plimsoll_spec::Contract;
use serde_json::Value;

#[test]
fn an_unknown_check_id_exits_2_naming_it_and_the_known_ones() {
    for flag in ["--only", "--skip"] {
        let out = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
            .args(["check", flag, "T1,T9", "--quiet"])
            .output()
            .expect("the plimsoll binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains("`T9` is not a check id"),
            "{flag}: {stderr}"
        );
        for known in ["contract", "T1", "R6", "F4", "API"] {
            assert!(
                stderr.contains(known),
                "{flag}: {known} not listed in {stderr}"
            );
        }
    }
}

/// Runs `plimsoll ARGS` off the async runtime, killed after `limit` (a hung run fails the test
/// instead of hanging it).
async fn plimsoll(args: Vec<String>, limit: Duration) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the plimsoll binary runs");
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > limit {
                let _ = child.kill();
                panic!("plimsoll {args:?} ran longer than {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// A reference server with the contract's own values and hooks on: its claim is the contract.
async fn honest_server() -> Embedded {
    let mut config = Config::from_overrides(&[]).unwrap();
    config.hooks_enabled = true;
    Embedded::start(config).await.unwrap()
}

fn result<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no {id} result in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_given_for_temp_dir_or_server_log_that_cannot_be_read_exits_2() {
    let server = honest_server().await;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let a_dir = dir.path().to_str().unwrap();
    for (flag, path) in [
        ("--temp-dir", missing),
        ("--server-log", missing),
        ("--server-log", a_dir),
    ] {
        let out = plimsoll(
            strings(&["check", "--target", &server.url(), flag, path, "--quiet"]),
            Duration::from_secs(30),
        )
        .await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {path}: {stderr}");
        assert!(
            stderr.contains(&format!("{flag} {path}")),
            "{flag}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_turns_a_skip_into_a_failure_with_its_reason() {
    let server = honest_server().await;
    let run = |strict: bool| {
        let mut args = strings(&[
            "check",
            "--target",
            &server.url(),
            "--only",
            "F3",
            "--quiet",
        ]);
        if strict {
            args.push("--strict".into());
        }
        plimsoll(args, Duration::from_secs(60))
    };
    // F3 without --server-log has no evidence: a skip, which passes the run...
    let lenient = run(false).await;
    let stdout = String::from_utf8_lossy(&lenient.stdout);
    assert_eq!(lenient.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("1 skipped"), "{stdout}");
    // ...and fails it under --strict, saying why.
    let strict = run(true).await;
    let stdout = String::from_utf8_lossy(&strict.stdout);
    assert_eq!(strict.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("skipped under --strict: needs --server-log"),
        "{stdout}"
    );
    server.shutdown().await.unwrap();
}

/// The broken service of the issue: it claims `stop_within_ms: 5000` and wide tolerances, and
/// its jobs keep running 2.5 s after the client has gone. With `--allow-overrides` the claim is
/// refused (the contract check fails), B3 and T3 keep the contract's values, and B3 fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looser_claim_is_refused_and_the_checks_keep_the_contracts_values() {
    let contract = Contract::embedded();
    let config = plimsoll_conformance::check::embedded_config(false).unwrap();
    let server = Embedded::start(config).await.unwrap();
    let path = &contract.api.contract.path;
    let mut claim: Value = reqwest::get(format!("{}{path}", server.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    claim["clauses"]["B3"]["value"]["stop_within_ms"] = 5000.into();
    for tolerance in [
        "refusal_latency_ms",
        "timeout_late_ms",
        "retry_after_jitter_ms",
    ] {
        claim["tolerances"][tolerance] = 5000.into();
    }
    let proxy = proxy::Proxy::start(
        &server.url(),
        serde_json::to_vec(&claim).unwrap(),
        Duration::from_millis(2500),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = plimsoll(
        strings(&[
            "check",
            "--target",
            &proxy.url,
            "--allow-overrides",
            "--only",
            "B3,T3",
            "--trials",
            "1",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ]),
        Duration::from_secs(120),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();

    let check = result(&report, "contract");
    assert_eq!(check["verdict"], "fail", "{check}");
    let reason = check["reason"].as_str().unwrap();
    assert!(reason.starts_with("4 claimed value(s) refused"), "{reason}");
    assert!(
        reason.contains("clauses.B3.value.stop_within_ms: 1000 → 5000 — not an overridable field"),
        "{reason}"
    );
    let evidence: Vec<&str> = check["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(
        evidence.contains(&"refused: tolerances.timeout_late_ms: 300 → 5000 — not an overridable field: the contract's own value applies"),
        "{evidence:?}"
    );
    assert!(
        evidence
            .contains(&"adopted: clauses.T2.value.digitize_queue_capacity: 0 → 2 (QUEUE_CAPACITY)"),
        "{evidence:?}"
    );
    let manifest = &report["manifest"];
    assert_eq!(manifest["refused"].as_array().unwrap().len(), 4);
    assert_eq!(manifest["adopted"].as_array().unwrap().len(), 4);

    // What the checks judged by: the contract's bound and tolerances, the adopted queue.
    let effective = &manifest["effective"];
    assert_eq!(
        effective["clauses"]["B3"]["value"]["stop_within_ms"],
        contract.clauses.b3.value.stop_within_ms
    );
    assert_eq!(
        effective["tolerances"],
        serde_json::to_value(&contract.tolerances).unwrap()
    );
    assert_eq!(
        effective["clauses"]["T2"]["value"]["digitize_queue_capacity"],
        2
    );
    let b3 = result(&report, "B3");
    assert!(
        b3["expected"].as_str().unwrap().contains("within 1000 ms"),
        "{b3}"
    );
    assert_eq!(b3["verdict"], "fail", "{b3}");
    let t3 = result(&report, "T3");
    let refusal = format!("within {} ms", contract.tolerances.refusal_latency_ms);
    assert!(t3["expected"].as_str().unwrap().contains(&refusal), "{t3}");

    drop(proxy);
    server.shutdown().await.unwrap();
}

/// A contract endpoint that answers something other than a contract fails the contract check;
/// the run goes on with the contract's own values (exit 1, not 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_claim_fails_the_contract_check_and_the_run_goes_on() {
    let server = honest_server().await;
    let proxy =
        proxy::Proxy::start(&server.url(), b"<html>oops</html>".to_vec(), Duration::ZERO).await;
    let out = plimsoll(
        strings(&[
            "check",
            "--target",
            &proxy.url,
            "--allow-overrides",
            "--only",
            "F2",
            "--quiet",
        ]),
        Duration::from_secs(60),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("✗ contract"), "{stdout}");
    assert!(stdout.contains("is not JSON"), "{stdout}");
    assert!(stdout.contains("✓ F2"), "{stdout}");
    drop(proxy);
    server.shutdown().await.unwrap();
}

/// F3 with the contract's `stack` switched on (LOG_STACK=1, adopted with `--allow-overrides`):
/// every error line of the reference server carries a backtrace, so F3 passes reading its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f3_reads_a_real_log_with_stacks_on() {
    let mut config = Config::from_overrides(&[("LOG_STACK", "1")]).unwrap();
    config.hooks_enabled = true;
    let server = Embedded::start(config).await.unwrap();
    let log = server.log_path();
    let out = plimsoll(
        strings(&[
            "check",
            "--target",
            &server.url(),
            "--allow-overrides",
            "--only",
            "F3",
            "--server-log",
            log.to_str().unwrap(),
            "--strict",
            "--quiet",
        ]),
        Duration::from_secs(60),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("adopted 1 override(s): LOG_STACK=true"),
        "{stdout}"
    );
    assert!(stdout.contains("✓ F3"), "{stdout}");
    server.shutdown().await.unwrap();
}
