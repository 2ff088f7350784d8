//! The `plimsoll` binary's command line, run as a process. A gate must not pass by accident: a
//! typo in a check id or a wrong `--temp-dir`/`--server-log` path stops the run (exit 2),
//! `--strict` fails a skip, and a target that claims looser values than the contract (behind a
//! loopback proxy that rewrites its `/v1/contract`) fails the `contract` check while every other
//! check keeps the contract's values.

#[path = "common/head.rs"]
mod head;
#[path = "cli/init.rs"]
mod init;
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

/// Text with every run of white space one space: what a wrapped paragraph says.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
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
            "F3,F4",
            "--quiet",
        ]);
        if strict {
            args.push("--strict".into());
        }
        plimsoll(args, Duration::from_secs(60))
    };
    // F3 without --server-log has no evidence: a skip, which passes the run (F4 judged)...
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

/// Not applicable is a verdict of its own, never a pass: T2 against a pool without a queue judges
/// nothing, a run that judged nothing exits 2 ("nothing to judge"), `--require` fails a run in
/// which a named check judged nothing, and the JSON and JUnit reports say so with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_applicable_is_counted_apart_and_require_fails_on_it() {
    let server = honest_server().await;
    let dir = tempfile::tempdir().unwrap();
    let run = async |only: &str, require: Option<&str>| {
        let json = dir.path().join("report.json");
        let junit = dir.path().join("report.xml");
        let mut args = strings(&[
            "check",
            "--target",
            &server.url(),
            "--only",
            only,
            "--quiet",
        ]);
        args.extend(strings(&["--json", json.to_str().unwrap()]));
        args.extend(strings(&["--junit", junit.to_str().unwrap()]));
        if let Some(ids) = require {
            args.extend(strings(&["--require", ids]));
        }
        let out = plimsoll(args, Duration::from_secs(60)).await;
        let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let junit = std::fs::read_to_string(&junit).unwrap();
        (out, report, junit)
    };
    // The contract has no queue places: T2 has nothing to order, and nothing else ran.
    let (out, report, junit) = run("T2", None).await;
    let stdout = flat(&String::from_utf8_lossy(&out.stdout));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("nothing to judge"), "{stderr}");
    assert!(
        stdout.contains("1 passed, 1 not applicable, 0 failed"),
        "{stdout}"
    );
    let t2 = result(&report, "T2");
    assert_eq!(t2["verdict"], "not_applicable");
    assert!(t2["reason"].as_str().unwrap().contains("queue"), "{t2}");
    assert!(
        junit.contains("<skipped message=\"not applicable: "),
        "{junit}"
    );
    // With a clause judged beside it, the run passes...
    let (out, _, _) = run("T2,F4", None).await;
    assert_eq!(out.status.code(), Some(0));
    // ...unless the gate requires T2 to be judged.
    let (out, report, _) = run("T2,F4", Some("T2")).await;
    let stdout = flat(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(result(&report, "T2")["verdict"], "fail");
    assert!(
        result(&report, "T2")["reason"]
            .as_str()
            .unwrap()
            .starts_with("required (--require) but not applicable: "),
        "{report}"
    );
    server.shutdown().await.unwrap();
}

/// `--waivers`: a known failure waived passes the gate, an expired waiver fails it, and a waiver
/// for a check that passes is noted (a failure under `--strict`). F3 without `--server-log` is
/// the failure: a skip that `--strict` fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiver_file_changes_the_verdict_of_a_run() {
    let server = honest_server().await;
    let dir = tempfile::tempdir().unwrap();
    let run = async |waivers: &str, strict: bool| {
        let file = dir.path().join("waivers.toml");
        std::fs::write(&file, waivers).unwrap();
        let json = dir.path().join("report.json");
        // F3 is skipped without `--server-log` before it sends anything, `contract` always runs,
        // and F4 (a few requests) is judged beside them, so a run with both waived still has a
        // clause to judge (F2 was that clause: 30 s of CI's shared stage).
        let mut args = strings(&["check", "--target", &server.url(), "--only", "F3,F4"]);
        args.extend(strings(&["--quiet", "--waivers", file.to_str().unwrap()]));
        args.extend(strings(&["--json", json.to_str().unwrap()]));
        if strict {
            args.push("--strict".into());
        }
        let out = plimsoll(args, Duration::from_secs(60)).await;
        let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (out, report)
    };
    let waiver = |check: &str, expires: &str| {
        format!("[[waiver]]\ncheck = \"{check}\"\nreason = \"no log yet\"\nexpires = {expires}\n")
    };

    let (out, report) = run(&waiver("F3", "2999-12-31"), true).await;
    let stdout = flat(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("1 waived"), "{stdout}");
    assert_eq!(result(&report, "F3")["verdict"], "waived");
    assert_eq!(result(&report, "F3")["waiver"]["state"], "applied");

    let (out, report) = run(&waiver("F3", "2000-01-01"), true).await;
    let stdout = flat(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("expired on 2000-01-01"), "{stdout}");
    assert_eq!(result(&report, "F3")["waiver"]["state"], "expired");

    let stale = format!(
        "{}{}",
        waiver("F3", "2999-12-31"),
        waiver("contract", "2999-12-31")
    );
    let (out, report) = run(&stale, false).await;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(result(&report, "contract")["verdict"], "pass");
    assert_eq!(result(&report, "contract")["waiver"]["state"], "unneeded");
    let (out, _) = run(&stale, true).await;
    let stdout = flat(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("pass although waived"), "{stdout}");
    server.shutdown().await.unwrap();
}

/// `--baseline`: a figure that moved the worse way beyond the noise is flagged, and fails the
/// run with `--fail-on-regression`. The baseline is the run's own report with B5's refusal
/// latency a second below zero: a past no run can match. Against it every run has regressed by
/// over a second, past the threshold (the largest of three robust spreads of the noisier run, a
/// tenth of the baseline's median and 2 ms: 100 ms, unless this run's refusals spread by more
/// than a third of a second). Not relative to the first run: 10 ms off its samples was no
/// regression when the first run met a crowded machine (a median of 9.2 ms) and the next did
/// not (0.5 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_baseline_flags_a_regression_and_fails_it_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let first = plimsoll(
        strings(&[
            "check",
            "--only",
            "B5",
            "--quiet",
            "--json",
            &path("first.json"),
        ]),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(first.status.code(), Some(0));
    let mut report: Value =
        serde_json::from_slice(&std::fs::read(path("first.json")).unwrap()).unwrap();
    assert_eq!(report["manifest"]["report_schema"], 2);
    let figure = &mut report["results"][1]["figures"][0];
    assert_eq!(figure["name"], "refusal latency", "{figure}");
    let samples = figure["samples"].as_array().unwrap().len();
    figure["samples"] = serde_json::json!(vec![-1000.0; samples]);
    std::fs::write(path("baseline.json"), report.to_string()).unwrap();

    let run = async |fail: bool| {
        let mut args = strings(&[
            "check",
            "--only",
            "B5",
            "--quiet",
            "--baseline",
            &path("baseline.json"),
        ]);
        args.extend(strings(&["--json", &path("now.json")]));
        if fail {
            args.push("--fail-on-regression".into());
        }
        let out = plimsoll(args, Duration::from_secs(60)).await;
        let now: Value = serde_json::from_slice(&std::fs::read(path("now.json")).unwrap()).unwrap();
        (out, now)
    };
    let (flagged, now) = run(false).await;
    let stdout = flat(&String::from_utf8_lossy(&flagged.stdout));
    assert_eq!(flagged.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("Against the baseline: 1 figure(s), 1 regressed"),
        "{stdout}"
    );
    assert_eq!(result(&now, "B5")["deltas"][0]["regressed"], true);
    assert_eq!(result(&now, "B5")["verdict"], "pass");

    let (failed, now) = run(true).await;
    let stdout = flat(&String::from_utf8_lossy(&failed.stdout));
    assert_eq!(failed.status.code(), Some(1), "{stdout}");
    let why = result(&now, "B5")["reason"].as_str().unwrap().to_owned();
    assert!(why.starts_with("regressed against the baseline"), "{why}");

    std::fs::write(path("old.json"), r#"{"manifest": {}, "results": []}"#).unwrap();
    let old = plimsoll(
        strings(&["check", "--quiet", "--baseline", &path("old.json")]),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(old.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&old.stderr).contains("report schema 0"));
}

/// The broken service of the issue: it claims `stop_within_ms: 5000` and wide tolerances, and
/// its jobs keep running 2.5 s after the client has gone. With `--allow-overrides` the claim is
/// refused (the contract check fails), B3 and T3 keep the contract's values, and B3 fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looser_claim_is_refused_and_the_checks_keep_the_contracts_values() {
    let contract = Contract::embedded();
    let config = plimsoll::embedded::check_config(false).unwrap();
    let server = Embedded::start(config).await.unwrap();
    let path = &contract.api().contract.path;
    let mut claim: Value = reqwest::get(format!("{}{path}", server.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    claim["pools"]["digitize"]["cancellation"]["stop_within_ms"] = 5000.into();
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
        reason.contains(
            "pools.digitize.cancellation.stop_within_ms: 1000 → 5000 — not an overridable field"
        ),
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
        evidence.contains(&"adopted: pools.digitize.queue.capacity: 0 → 2 (QUEUE_CAPACITY)"),
        "{evidence:?}"
    );
    let manifest = &report["manifest"];
    assert_eq!(manifest["refused"].as_array().unwrap().len(), 4);
    assert_eq!(
        manifest["adopted"].as_array().unwrap().len(),
        plimsoll_conformance::check::embedded_overrides(false).len()
    );

    // What the checks judged by: the contract's bound and tolerances, the adopted queue.
    let effective = &manifest["effective"];
    assert_eq!(
        effective["pools"]["digitize"]["cancellation"]["stop_within_ms"],
        contract.cancellation().stop_within_ms
    );
    assert_eq!(
        effective["tolerances"],
        serde_json::to_value(&contract.tolerances).unwrap()
    );
    assert_eq!(effective["pools"]["digitize"]["queue"]["capacity"], 2);
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
    // The reason is wrapped in the summary, never cut.
    assert!(flat(&stdout).contains("is not JSON"), "{stdout}");
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
        stdout.contains("\n  adopted from its claim: stack on\n"),
        "{stdout}"
    );
    assert!(stdout.contains("✓ F3"), "{stdout}");
    server.shutdown().await.unwrap();
}

/// The terminal report of a real embedded run, end to end: a header saying what is checked
/// (the embedded server's address and every value it was scaled to), one line per check that
/// fits 100 columns and ends in its duration, the counts, and one line of next steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_check_prints_what_it_checks_one_line_per_check_and_the_next_steps() {
    let out = plimsoll(
        strings(&["check", "--only", "T1"]),
        Duration::from_secs(120),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stderr.is_empty(), "no spinner off a terminal: {stderr}");
    let all: Vec<&str> = stdout.lines().collect();
    // The scaled values may wrap onto indented continuation lines; read them as one.
    let wrapped = all[2..]
        .iter()
        .take_while(|l| l.starts_with("    "))
        .count();
    let scaled_text = all[1..2 + wrapped]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    let mut lines = vec![all[0], ""];
    lines.extend_from_slice(&all[2 + wrapped..]);
    assert_eq!(lines.len(), 10, "{stdout}");

    let address = lines[0]
        .strip_prefix("Checking the embedded reference server on 127.0.0.1:")
        .unwrap_or_else(|| panic!("{stdout}"));
    address.parse::<u16>().expect("a port");
    let scaled = scaled_text.strip_prefix("scaled: ").expect("scaled values");
    assert_eq!(
        scaled.split(", ").count(),
        plimsoll_conformance::check::embedded_overrides(false).len(),
        "one item per override: {scaled}"
    );
    assert!(scaled.contains("digitize timeout "), "{scaled}");
    assert!(
        lines[2].starts_with("  contract ") && lines[2].ends_with("per timing check, strict off"),
        "{}",
        lines[2]
    );
    assert_eq!(lines[3], "");

    for (line, id) in lines[4..6].iter().zip(["contract", "T1"]) {
        assert!(line.starts_with(&format!("✓ {id} ")), "{line}");
        assert!(line.chars().count() <= 100, "{line}");
        let seconds = line
            .strip_suffix(" s")
            .and_then(|rest| rest.rsplit(' ').next())
            .unwrap_or_else(|| panic!("no duration: {line}"));
        let decimals = seconds.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(
            seconds.parse::<f64>().is_ok() && (1..=2).contains(&decimals),
            "{line}"
        );
    }
    assert_eq!(lines[6], "");
    assert!(
        lines[7].starts_with("2 passed, 0 failed, 0 skipped in "),
        "{}",
        lines[7]
    );
    assert_eq!(lines[8], "");
    assert!(
        lines[9].starts_with("Next: --html report.html") && lines[9].contains("--target URL"),
        "{}",
        lines[9]
    );
}

/// `--help` of every subcommand in one layout: the purpose, the usage, `Options:` and the
/// option groups, then `Exit codes:` and `Example:` last; `-h` and `--help` alike.
#[test]
fn every_subcommand_help_has_one_layout_with_exit_codes_and_an_example() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
            .args(args)
            .output()
            .expect("the plimsoll binary runs");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    for command in [
        "check",
        "load",
        "docs",
        "serve",
        "init",
        "contract upgrade",
        "contract lint",
        "discover",
    ] {
        let words: Vec<&str> = command.split(' ').collect();
        let text = help(&[&words[..], &["--help"]].concat());
        assert_eq!(
            text,
            help(&[&words[..], &["-h"]].concat()),
            "{command}: one help, not two"
        );
        let headings: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with(' ') && l.ends_with(':') && *l != "Arguments:")
            .collect();
        assert_eq!(headings[0], "Options:", "{command}: {headings:?}");
        assert_eq!(
            headings[headings.len() - 2..],
            ["Exit codes:", "Example:"],
            "{command}: {headings:?}"
        );
        let purpose = text.lines().next().unwrap();
        assert!(!purpose.is_empty() && !purpose.ends_with(':'), "{purpose}");
        assert!(
            text.contains(&format!("\nUsage: plimsoll {command} ")),
            "{text}"
        );
        assert!(text.contains("\n  0  "), "{command}: exit code 0 explained");
        assert!(text.contains("\n  2  "), "{command}: exit code 2 explained");
        assert!(
            text.contains(&format!("\n  plimsoll {command}"))
                || text.contains(&format!(" plimsoll {command} ")),
            "{command}: an example"
        );
        for line in text.lines() {
            assert!(line.chars().count() <= 100, "{command}: {line}");
        }
    }
}

/// `plimsoll docs --contract FILE` renders any service's contract: nginx's pools, rate limit and
/// refusals, and each check judged or not applicable with why — decided as a run decides; with
/// `--out` and `--check` it compares, and an edited document is stale (exit 1).
#[test]
fn docs_renders_any_contract_with_what_check_judges_of_it() {
    let contract =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx/contract.toml");
    let docs = |extra: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_plimsoll"))
            .arg("docs")
            .arg("--contract")
            .arg(&contract)
            .args(extra)
            .output()
            .expect("the plimsoll binary runs")
    };
    let out = docs(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "# nginx limit_conn in front of a slow upstream (nginx-limit-conn 1.0.0)",
        "| `slow` | `GET /slow` | 2 | 0, unordered |",
        "| `api` | `GET /api` | 5/s | 3 | `delay` | per client address | `rate_limited` |",
        "Refusal `rate_limited`: 429 with a body containing `\"<title>429 Too Many Requests</title>\"`, no hint, its connection kept.",
        "| T4 | Rate limit | judged |",
        "| B1 | Deadline | judged |",
        "| B2 | Memory cap | not applicable: the contract declares no request over a memory cap",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("CONTRACT.md");
    let check = [
        std::ffi::OsStr::new("--out"),
        file.as_os_str(),
        "--check".as_ref(),
    ];
    assert_eq!(docs(&check).status.code(), Some(1), "missing is stale");
    assert_eq!(docs(&check[..2]).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert_eq!(docs(&check).status.code(), Some(0), "fresh");
    std::fs::write(&file, text.replace("5/s", "6/s")).unwrap();
    assert_eq!(docs(&check).status.code(), Some(1), "edited is stale");
}

/// Another service's contract without `--target` would judge the embedded reference server by
/// a contract it does not implement: the run refuses, saying to give the service's URL.
#[test]
fn check_with_another_services_contract_needs_its_target() {
    let contract =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nginx/contract.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
        .args(["check", "--quiet", "--contract"])
        .arg(&contract)
        .output()
        .expect("the plimsoll binary runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("give that service's URL with --target"),
        "{said}"
    );
}

/// The JSON report's published schema is the checked-in one and the layout the binary writes: a
/// run's report (its manifest with the adopted values of the embedded server) validates, and a
/// report of another layout version or with a verdict it does not know does not. (The gate
/// test validates the suite's whole clean run against it too.)
#[test]
fn the_json_report_validates_against_its_published_schema() {
    let schema = plimsoll_conformance::verdict::report_schema();
    let checked_in: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(plimsoll_conformance::verdict::REPORT_SCHEMA_PATH),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(schema, checked_in, "regenerate with `plimsoll docs`");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_plimsoll"))
        .args(["check", "--only", "contract,T2", "--quiet", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // The run over time: T2's requests, all to the digitize pool, binned as its own series.
    let pools = report["series"]["pools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = pools.iter().filter_map(|p| p["pool"].as_str()).collect();
    assert_eq!(names, ["digitize"], "{}", report["series"]);
    let sent: u64 = pools[0]["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["sent"].as_u64().unwrap())
        .sum();
    let lanes = report["results"][1]["timeline"].as_array().unwrap().len();
    assert_eq!(sent, lanes as u64, "every lane of T2 counted once");
    report["manifest"]["report_schema"] = 1.into();
    assert!(!validator.is_valid(&report), "another layout version");
    report["manifest"]["report_schema"] = plimsoll_conformance::verdict::REPORT_SCHEMA.into();
    report["results"][0]["verdict"] = "maybe".into();
    assert!(!validator.is_valid(&report), "an unknown verdict");
}
