//! The checker is a CI gate: whatever the target does, the run ends within its bound, the
//! checker's memory stays bounded, and the verdict says why. Each test plays one pathological
//! target (a small server on loopback) and runs the `plimsoll` binary against it as a process,
//! reading its resident memory as it runs. A stop signal ends a run within 2 s, its reports
//! written and marked incomplete.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use plimsoll_conformance::remote::process::proc_rss_bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The checker's resident memory may not pass this against any hostile target (its own
/// footprint is about 30 MB; the bodies it keeps are capped at 16 MB).
const RSS_CEILING_MB: u64 = 200;

/// What a run of the binary came to.
struct Run {
    output: Output,
    took: Duration,
    peak_rss_mb: u64,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
}

fn rss_mb(pid: u32) -> u64 {
    proc_rss_bytes(pid).map_or(0, |b| b as u64 >> 20)
}

/// Runs `plimsoll ARGS`, killed after `limit`; `signal_after` sends SIGTERM that long after
/// the start.
async fn plimsoll(args: &[&str], limit: Duration, signal_after: Option<Duration>) -> Run {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the plimsoll binary runs");
        let started = Instant::now();
        let mut peak = 0;
        let mut signalled = false;
        while child.try_wait().unwrap().is_none() {
            peak = peak.max(rss_mb(child.id()));
            if let Some(after) = signal_after
                && !signalled
                && started.elapsed() >= after
            {
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status();
                signalled = true;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                panic!("plimsoll {args:?} ran longer than {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let took = started.elapsed();
        Run {
            output: child.wait_with_output().unwrap(),
            took,
            peak_rss_mb: peak,
        }
    })
    .await
    .unwrap()
}

/// A target on loopback whose every connection is handled by `serve`.
async fn hostile<F, Fut>(serve: F) -> String
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    url
}

/// Reads a request head (or gives up), so the answer comes after the request.
async fn read_head(stream: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    let mut seen = Vec::new();
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 64 << 10 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// Runs a check against `url` and judges the bounds every hostile run must keep.
async fn check_against(url: &str, timeout_s: u64) -> Run {
    let timeout = timeout_s.to_string();
    let run = plimsoll(
        &["check", "--target", url, "--quiet", "--timeout", &timeout],
        Duration::from_secs(timeout_s + 10),
        None,
    )
    .await;
    // The figures docs/benchmarks.md reports.
    println!(
        "hostile target: exit {:?} after {:.2} s, checker peak RSS {} MB: {}",
        run.output.status.code(),
        run.took.as_secs_f64(),
        run.peak_rss_mb,
        run.stderr().trim()
    );
    assert!(
        run.took <= Duration::from_secs(timeout_s + 2),
        "took {:?} with --timeout {timeout_s}\n{}",
        run.took,
        run.stderr()
    );
    assert!(
        run.peak_rss_mb <= RSS_CEILING_MB,
        "the checker reached {} MB\n{}",
        run.peak_rss_mb,
        run.stderr()
    );
    assert!(
        matches!(run.output.status.code(), Some(1 | 2)),
        "exit {:?}\n{}{}",
        run.output.status.code(),
        run.stdout(),
        run.stderr()
    );
    run
}

/// The run could not proceed (exit 2) and its one line says `why`.
fn cannot_proceed(run: &Run, why: &str) {
    assert_eq!(run.output.status.code(), Some(2), "{}", run.stderr());
    assert!(run.stderr().contains(why), "says `{why}`: {}", run.stderr());
}

#[tokio::test]
async fn a_target_that_accepts_and_never_answers_stops_at_the_timeout_saying_so() {
    let url = hostile(|stream| async move {
        tokio::time::sleep(Duration::from_secs(120)).await;
        drop(stream);
    })
    .await;
    let run = check_against(&url, 4).await;
    cannot_proceed(&run, "--timeout");
    assert_eq!(
        run.stderr().lines().count(),
        1,
        "one line: {}",
        run.stderr()
    );
}

#[tokio::test]
async fn a_target_that_answers_garbage_is_unreachable_in_one_line() {
    let url = hostile(|mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream
            .write_all(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02garbage\r\n\r\n")
            .await;
    })
    .await;
    let run = check_against(&url, 20).await;
    cannot_proceed(&run, "unreachable");
    cannot_proceed(&run, "invalid HTTP");
    assert!(run.took < Duration::from_secs(5), "{:?}", run.took);
}

#[tokio::test]
async fn a_target_that_answers_one_byte_a_second_is_bounded() {
    let url = hostile(|mut stream| async move {
        read_head(&mut stream).await;
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}" {
            if stream.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
    .await;
    let run = check_against(&url, 5).await;
    cannot_proceed(&run, "--timeout");
}

#[tokio::test]
async fn endless_and_huge_bodies_cost_the_checker_a_bounded_amount() {
    // Every answer is a chunked body that never ends, as fast as loopback takes it.
    let url = hostile(|mut stream| async move {
        read_head(&mut stream).await;
        let chunk = format!("{:x}\r\n{}\r\n", 1 << 16, "x".repeat(1 << 16));
        if stream
            .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await
            .is_err()
        {
            return;
        }
        while stream.write_all(chunk.as_bytes()).await.is_ok() {}
    })
    .await;
    let run = check_against(&url, 30).await;
    cannot_proceed(&run, "16 MB");
}

#[tokio::test]
async fn a_head_of_100_mb_is_refused_by_the_checker_not_read() {
    let url = hostile(|mut stream| async move {
        read_head(&mut stream).await;
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nX-Filler: ").await;
        let filler = vec![b'a'; 1 << 20];
        for _ in 0..100 {
            if stream.write_all(&filler).await.is_err() {
                return;
            }
        }
    })
    .await;
    let run = check_against(&url, 20).await;
    cannot_proceed(&run, "too large");
}

#[tokio::test]
async fn a_deeply_nested_contract_claim_is_unreadable_not_a_crash() {
    // `/v1/contract` is 100 000 nested arrays; everything else is 404.
    let url = hostile(|mut stream| async move {
        let mut buf = vec![0u8; 8192];
        let n = stream.read(&mut buf).await.unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        let body = if head.starts_with("GET /v1/contract") {
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))
        } else {
            String::new()
        };
        let status = if body.is_empty() { "404 Not Found" } else { "200 OK" };
        let _ = stream
            .write_all(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
    })
    .await;
    let run = check_against(&url, 20).await;
    let all = format!("{}{}", run.stdout(), run.stderr());
    assert!(!all.contains("panicked"), "{all}");
    assert!(!all.contains("overflow"), "{all}");
}

/// A target that answers every request `200` with `body(path)` and closes the connection after
/// it (no keep-alive, as Python's `http.server` and HTTP/1.0 stacks do).
async fn closing_after_each_answer(body: fn(&str) -> Vec<u8>) -> String {
    hostile(move |mut stream| async move {
        let mut buf = vec![0u8; 8192];
        let n = stream.read(&mut buf).await.unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
        let body = body(&path);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        if stream.write_all(head.as_bytes()).await.is_ok() {
            let _ = stream.write_all(&body).await;
        }
    })
    .await
}

#[tokio::test]
async fn a_target_that_closes_after_every_answer_is_judged_within_the_timeout() {
    let url = closing_after_each_answer(|_| b"{}".to_vec()).await;
    let run = check_against(&url, 20).await;
    let all = format!("{}{}", run.stdout(), run.stderr());
    assert!(!all.contains("panicked"), "{all}");
}

#[tokio::test]
async fn a_metrics_page_of_50_mb_is_cut_at_the_body_cap() {
    let url = closing_after_each_answer(|path| {
        if path == "/metrics" {
            vec![b'#'; 50 << 20]
        } else {
            b"{}".to_vec()
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let json = json.to_str().unwrap();
    let args = ["check", "--target", &url, "--quiet", "--only", "T1"];
    let run = plimsoll(
        &[&args[..], &["--timeout", "20", "--json", json]].concat(),
        Duration::from_secs(30),
        None,
    )
    .await;
    println!(
        "hostile target: exit {:?} after {:.2} s, checker peak RSS {} MB",
        run.output.status.code(),
        run.took.as_secs_f64(),
        run.peak_rss_mb,
    );
    assert!(run.took <= Duration::from_secs(22), "took {:?}", run.took);
    assert!(run.peak_rss_mb <= RSS_CEILING_MB, "{} MB", run.peak_rss_mb);
    assert_eq!(
        run.output.status.code(),
        Some(1),
        "{}{}",
        run.stdout(),
        run.stderr()
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let t1 = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "T1")
        .unwrap();
    let why = t1["reason"].as_str().unwrap_or_default();
    assert!(why.contains("GET /metrics: the body passed 16 MB"), "{t1}");
}

/// A free loopback address (bound and released: the checker binds it next).
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// What a hostile relay bridge does once it has dialled the checker's relay.
#[derive(Clone, Copy, Debug)]
enum Bridge {
    /// Reads every frame and answers none.
    Silent,
    /// Sends one 100 MB text frame.
    Huge,
    /// Answers every frame with text that is no relay frame, and binary garbage.
    Malformed,
}

/// Runs the relay checks in bridge mode against a bridge that dials the checker's relay and
/// then misbehaves as `bridge` says.
async fn bridge_run(bridge: Bridge, timeout_s: u64) -> Run {
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;

    let relay = free_addr();
    let upstream = free_addr();
    let url = format!("ws://{relay}/");
    let dialler = tokio::spawn(async move {
        // Dial until the checker listens, then misbehave until the run ends.
        let ws = loop {
            if let Ok((ws, _)) = tokio_tungstenite::connect_async(&url).await {
                break ws;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let (mut tx, mut rx) = ws.split();
        match bridge {
            Bridge::Silent => while let Some(Ok(_)) = rx.next().await {},
            Bridge::Huge => {
                let _ = tx.send(Message::text("x".repeat(100 << 20))).await;
                while let Some(Ok(_)) = rx.next().await {}
            }
            Bridge::Malformed => {
                while let Some(Ok(_)) = rx.next().await {
                    let _ = tx.send(Message::text("{not a relay frame")).await;
                    let _ = tx.send(Message::binary(vec![0xff; 1024])).await;
                }
            }
        }
    });
    let timeout = timeout_s.to_string();
    let run = plimsoll(
        &[
            "check",
            "--relay-listen",
            &relay,
            "--upstream-listen",
            &upstream,
            "--quiet",
            "--timeout",
            &timeout,
        ],
        Duration::from_secs(timeout_s + 10),
        None,
    )
    .await;
    dialler.abort();
    println!(
        "hostile bridge {bridge:?}: exit {:?} after {:.2} s, checker peak RSS {} MB: {}",
        run.output.status.code(),
        run.took.as_secs_f64(),
        run.peak_rss_mb,
        run.stderr().trim()
    );
    assert!(
        run.took <= Duration::from_secs(timeout_s + 2),
        "{bridge:?}: took {:?}",
        run.took
    );
    assert!(
        run.peak_rss_mb <= RSS_CEILING_MB,
        "{bridge:?}: the checker reached {} MB",
        run.peak_rss_mb
    );
    assert!(
        matches!(run.output.status.code(), Some(1 | 2)),
        "{bridge:?}: exit {:?}\n{}{}",
        run.output.status.code(),
        run.stdout(),
        run.stderr()
    );
    let all = format!("{}{}", run.stdout(), run.stderr());
    assert!(!all.contains("panicked"), "{all}");
    run
}

#[tokio::test]
async fn a_bridge_that_dials_and_goes_silent_fails_within_the_timeout() {
    bridge_run(Bridge::Silent, 30).await;
}

#[tokio::test]
async fn a_bridge_that_sends_a_100_mb_frame_costs_the_checker_a_bounded_amount() {
    bridge_run(Bridge::Huge, 30).await;
}

#[tokio::test]
async fn a_bridge_that_sends_malformed_frames_fails_within_the_timeout() {
    bridge_run(Bridge::Malformed, 30).await;
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_stops_a_check_within_2_s_and_writes_its_reports_marked_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let junit = dir.path().join("report.xml");
    let html = dir.path().join("report.html");
    let (json_s, junit_s, html_s) = (
        json.to_str().unwrap(),
        junit.to_str().unwrap(),
        html.to_str().unwrap(),
    );
    let signal_after = Duration::from_secs(8);
    let run = plimsoll(
        &[
            "check", "--quiet", "--json", json_s, "--junit", junit_s, "--html", html_s,
        ],
        Duration::from_secs(60),
        Some(signal_after),
    )
    .await;
    assert!(
        run.took <= signal_after + Duration::from_secs(2),
        "stopped {:?} after the signal\n{}",
        run.took.saturating_sub(signal_after),
        run.stderr()
    );
    assert_eq!(run.output.status.code(), Some(2), "{}", run.stderr());
    assert!(run.stderr().contains("SIGTERM"), "{}", run.stderr());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON report is written"))
            .unwrap();
    let why = report["manifest"]["incomplete"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("SIGTERM"), "{report}");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report is written");
    assert!(xml.contains("the run is incomplete"), "{xml}");
    let page = std::fs::read_to_string(&html).expect("the HTML report is written");
    assert!(page.contains("Incomplete"), "the HTML report says so");
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_stops_a_load_run_within_2_s() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("load.json");
    let signal_after = Duration::from_secs(6);
    let run = plimsoll(
        &[
            "load",
            "--profile",
            "steady",
            "--duration",
            "60",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(60),
        Some(signal_after),
    )
    .await;
    assert!(
        run.took <= signal_after + Duration::from_secs(2),
        "stopped {:?} after the signal\n{}",
        run.took.saturating_sub(signal_after),
        run.stderr()
    );
    assert_eq!(run.output.status.code(), Some(2), "{}", run.stderr());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON report is written"))
            .unwrap();
    assert!(
        report["manifest"]["incomplete"]
            .as_str()
            .is_some_and(|why| why.contains("SIGTERM")),
        "{report}"
    );
}
