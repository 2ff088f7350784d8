//! Each broken variant of the HTTP side misbehaves as its doc line says (test builds with the
//! `mutants` feature). Where the misbehaviour is a matter of degree, the reference server runs
//! the same scenario beside it, so the test shows the difference rather than a number.

use plimsoll_server::Mutant;
use plimsoll_spec::{MetricName, Pool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

async fn start(mutant: Option<Mutant>, overrides: &[(&str, &str)]) -> TestServer {
    TestServer::start_with(overrides, true, |c| match mutant {
        Some(m) => c.with_mutant(m),
        None => c,
    })
    .await
}

async fn busy(s: &TestServer, pool: Pool, want: f64, within: Duration) -> Option<Duration> {
    s.wait_metric(MetricName::WorkersBusy, Some(pool), within, |v| v == want)
        .await
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> u64 {
    headers["retry-after"].to_str().unwrap().parse().unwrap()
}

/// The Retry-After of a refusal at light load (nothing has waited) and at heavy load (six
/// refusals each waited ~1.2 s for the slot), with one worker and no queue.
async fn retry_after_at_two_loads(s: &TestServer) -> (u64, u64) {
    let image = png(80, 60);
    let a = tokio::spawn(s.digitize(&image, Some("hold=decode:200")).send());
    busy(s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    let (status, headers, _) = problem(s.digitize(&image, None).send().await.unwrap()).await;
    assert_eq!(status, 503);
    let light = retry_after(&headers);
    assert_eq!(a.await.unwrap().unwrap().status(), 200);

    let b = tokio::spawn(s.digitize(&image, Some("hold=decode:1200")).send());
    busy(s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    for _ in 0..6 {
        assert_eq!(s.digitize(&image, None).send().await.unwrap().status(), 503);
    }
    assert_eq!(b.await.unwrap().unwrap().status(), 200);
    let c = tokio::spawn(s.digitize(&image, Some("hold=decode:5000")).send());
    busy(s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    let (status, headers, _) = problem(s.digitize(&image, None).send().await.unwrap()).await;
    assert_eq!(status, 503);
    let heavy = retry_after(&headers);
    c.abort();
    (light, heavy)
}

#[tokio::test]
async fn constant_retry_after_ignores_the_load() {
    let one = [("WORKER_POOL_SIZE", "1"), ("QUEUE_CAPACITY", "0")];
    let reference = retry_after_at_two_loads(&start(None, &one).await).await;
    assert_eq!(reference, (1, 2), "the reference tracks the load");
    let s = start(Some(Mutant::ConstantRetryAfter), &one).await;
    assert_eq!(retry_after_at_two_loads(&s).await, (1, 1));
}

/// How long a request queued behind a 500 ms job, then holding `fill`, takes to get its 504
/// (timeout 1 s, one worker, one queue place).
async fn queued_timeout(mutant: Option<Mutant>) -> Duration {
    let s = start(
        mutant,
        &[
            ("WORKER_POOL_SIZE", "1"),
            ("QUEUE_CAPACITY", "1"),
            ("DIGITIZE_TIMEOUT_MS", "1000"),
        ],
    )
    .await;
    let image = png(80, 60);
    let first = tokio::spawn(s.digitize(&image, Some("hold=decode:500")).send());
    busy(&s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    let sent = Instant::now();
    let (status, _, body) = problem(
        s.digitize(&image, Some("hold=fill:5000"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let took = sent.elapsed();
    assert_eq!((status, body["failed_stage"].as_str()), (504, Some("fill")));
    assert_eq!(first.await.unwrap().unwrap().status(), 200);
    took
}

#[tokio::test]
async fn deadline_from_start_does_not_count_the_queue() {
    let reference = queued_timeout(None).await;
    assert!(reference < Duration::from_millis(1300), "{reference:?}");
    let late = queued_timeout(Some(Mutant::DeadlineFromStart)).await;
    assert!(
        late >= Duration::from_millis(1400) && late < Duration::from_millis(1900),
        "504 after {late:?}: the ~500 ms queued were not counted"
    );
}

#[tokio::test]
async fn gauge_drops_on_disconnect_while_the_job_keeps_its_slot() {
    let s = start(
        Some(Mutant::GaugeDropsOnDisconnect),
        &[("WORKER_POOL_SIZE", "1")],
    )
    .await;
    let image = png(80, 60);
    let started = Instant::now();
    let dropped = tokio::spawn(s.digitize(&image, Some("hold=decode:2000")).send());
    busy(&s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    dropped.abort();
    busy(&s, Pool::Digitize, 0.0, Duration::from_millis(300))
        .await
        .expect("the gauge drops at once");
    assert_eq!(
        s.metric(MetricName::CancellationsTotal, Some(Pool::Digitize))
            .await,
        1.0
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _, body) = problem(s.digitize(&image, None).send().await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("overloaded")),
        "the job still holds its slot"
    );
    assert_eq!(s.state().digitize.load().0, 1);
    assert_eq!(
        s.metric(MetricName::WorkersBusy, Some(Pool::Digitize))
            .await,
        0.0
    );
    // At its natural end the slot comes back; the gauge stays at 0.
    while s.state().digitize.load().0 != 0 {
        assert!(started.elapsed() < Duration::from_secs(4), "never stopped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "ran to its end"
    );
    assert_eq!(
        s.metric(MetricName::WorkersBusy, Some(Pool::Digitize))
            .await,
        0.0
    );
    assert_eq!(s.digitize(&image, None).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn slot_leak_honest_gauge_hides_the_leaked_slot() {
    let s = start(
        Some(Mutant::SlotLeakHonestGauge),
        &[("WORKER_POOL_SIZE", "1")],
    )
    .await;
    let image = png(80, 60);
    let dropped = tokio::spawn(s.digitize(&image, Some("hold=decode:5000")).send());
    busy(&s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    dropped.abort();
    busy(&s, Pool::Digitize, 0.0, Duration::from_secs(1))
        .await
        .expect("the gauge says the slot came back");
    // The worker has stopped (temp dir gone), yet its slot never comes back.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(s.temp_entries().is_empty(), "{:?}", s.temp_entries());
    for _ in 0..3 {
        let (status, _, body) = problem(s.digitize(&image, None).send().await.unwrap()).await;
        assert_eq!((status, body["code"].as_str()), (503, Some("overloaded")));
    }
    assert_eq!(s.state().digitize.load(), (1, 0));
    assert_eq!(
        s.metric(MetricName::WorkersBusy, Some(Pool::Digitize))
            .await,
        0.0
    );
}

#[tokio::test]
async fn export_unbounded_runs_every_export_at_once() {
    let s = start(Some(Mutant::ExportUnbounded), &[]).await;
    let design = s
        .digitize(&png(80, 60), None)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let limit = Contract::embedded().clauses.t1.value.export_workers as usize;
    let n = limit + 2;
    let exports: Vec<_> = (0..n)
        .map(|_| {
            tokio::spawn(
                s.client
                    .post(s.url("/v1/export?format=dst"))
                    .header("content-type", "application/json")
                    .header("x-plimsoll-hook", "hold=parse:800")
                    .body(design.clone())
                    .send(),
            )
        })
        .collect();
    busy(&s, Pool::Export, n as f64, Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("{n} exports never ran at once (limit {limit})"));
    for e in exports {
        assert_eq!(e.await.unwrap().unwrap().status(), 200);
    }
    // The digitize pool keeps its bound.
    assert_eq!(
        s.metric(MetricName::WorkersLimit, Some(Pool::Digitize))
            .await,
        f64::from(Contract::embedded().clauses.t1.value.digitize_workers)
    );
}

#[tokio::test]
async fn body_id_mismatch_on_503_and_504_only() {
    let s = start(
        Some(Mutant::BodyIdMismatch),
        &[("WORKER_POOL_SIZE", "1"), ("DIGITIZE_TIMEOUT_MS", "500")],
    )
    .await;
    let image = png(80, 60);
    let id = |h: &reqwest::header::HeaderMap| h["x-request-id"].to_str().unwrap().to_owned();
    let (status, headers, body) = problem(
        s.digitize(&image, Some("hold=fill:3000"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 504);
    assert_ne!(body["request_id"], id(&headers).as_str());
    busy(&s, Pool::Digitize, 0.0, Duration::from_secs(2))
        .await
        .unwrap();
    let held = tokio::spawn(s.digitize(&image, Some("hold=decode:400")).send());
    busy(&s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    let (status, headers, body) = problem(s.digitize(&image, None).send().await.unwrap()).await;
    assert_eq!(status, 503);
    assert_ne!(body["request_id"], id(&headers).as_str());
    held.await.unwrap().unwrap();
    let empty = s
        .client
        .post(s.url("/v1/digitize"))
        .header("content-type", "image/png")
        .send()
        .await
        .unwrap();
    let (status, headers, body) = problem(empty).await;
    assert_eq!(status, 400);
    assert_eq!(body["request_id"], id(&headers).as_str());
}

/// Timeout, stage failure, stage panic and a disconnect, in that order; after each, the job
/// dirs left in the temp root.
async fn leftovers(mutant: Mutant) -> Vec<usize> {
    let s = start(Some(mutant), &[("DIGITIZE_TIMEOUT_MS", "800")]).await;
    let image = png(80, 60);
    let idle = || busy(&s, Pool::Digitize, 0.0, Duration::from_secs(2));
    let mut left = Vec::new();
    for hook in ["hold=fill:3000", "fail=fill", "panic=fill"] {
        s.digitize(&image, Some(hook)).send().await.unwrap();
        idle().await.unwrap();
        left.push(s.temp_entries().len());
    }
    let dropped = tokio::spawn(s.digitize(&image, Some("hold=decode:5000")).send());
    busy(&s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    dropped.abort();
    idle().await.unwrap();
    left.push(s.temp_entries().len());
    left
}

#[tokio::test]
async fn leak_temp_on_timeout_keeps_only_a_timed_out_jobs_dir() {
    assert_eq!(leftovers(Mutant::LeakTempOnTimeout).await, [1, 1, 1, 1]);
}

#[tokio::test]
async fn leak_temp_on_panic_keeps_only_a_panicked_jobs_dir() {
    assert_eq!(leftovers(Mutant::LeakTempOnPanic).await, [0, 0, 1, 1]);
}

#[tokio::test]
async fn memory_cap_too_low_refuses_what_the_contract_allows() {
    let cap = Contract::embedded().clauses.b2.value.memory_cap_mb;
    let hook = format!("alloc={}", cap * 6 / 10);
    let image = png(80, 60);
    let reference = start(None, &[]).await;
    assert_eq!(
        reference
            .digitize(&image, Some(&hook))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let s = start(Some(Mutant::MemoryCapTooLow), &[]).await;
    let (status, _, body) = problem(s.digitize(&image, Some(&hook)).send().await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("memory_cap_exceeded"))
    );
}

#[tokio::test]
async fn no_server_timing_on_any_response() {
    let s = start(Some(Mutant::NoServerTiming), &[]).await;
    let r = s.digitize(&png(80, 60), None).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("server-timing").is_none());
    let design = r.bytes().await.unwrap();
    let r = s
        .client
        .post(s.url("/v1/export?format=svg"))
        .header("content-type", "application/json")
        .body(design)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("server-timing").is_none());
    assert!(r.headers().contains_key("x-request-id"));
}

#[tokio::test]
async fn wrong_log_stage_names_another_stage_than_the_body() {
    let s = start(Some(Mutant::WrongLogStage), &[]).await;
    let (status, headers, body) = problem(
        s.digitize(&png(80, 60), Some("fail=fill"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, body["failed_stage"].as_str()), (503, Some("fill")));
    let id = headers["x-request-id"].to_str().unwrap();
    let line: serde_json::Value = s
        .log_lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["request_id"] == id && v.get("error").is_some())
        .expect("an error line");
    assert_eq!(line["stage"], "sequence");
}

/// Starts a digitize whose body never finishes arriving (100 of 1000 declared bytes).
async fn stalled_upload(s: &TestServer) -> tokio::net::TcpStream {
    let addr = s.server.server().addr;
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/digitize HTTP/1.1\r\nHost: {addr}\r\nContent-Type: image/png\r\nContent-Length: 1000\r\n\r\n"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&png(80, 60)[..100]).await.unwrap();
    tcp
}

async fn status_line(tcp: &mut tokio::net::TcpStream, within: Duration) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(within, tcp.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn upload_holds_slot_lets_a_stalled_body_block_the_worker() {
    let one = [
        ("WORKER_POOL_SIZE", "1"),
        ("UPLOAD_READ_TIMEOUT_MS", "1000"),
    ];
    let image = png(80, 60);
    let reference = start(None, &one).await;
    let mut stalled = stalled_upload(&reference).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        reference
            .digitize(&image, None)
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "the reference reads bodies before admission"
    );
    assert!(
        status_line(&mut stalled, Duration::from_secs(2))
            .await
            .contains("408")
    );

    let s = start(Some(Mutant::UploadHoldsSlot), &one).await;
    let mut stalled = stalled_upload(&s).await;
    busy(&s, Pool::Digitize, 1.0, Duration::from_secs(1))
        .await
        .expect("the stalled upload holds the slot");
    let (status, _, body) = problem(s.digitize(&image, None).send().await.unwrap()).await;
    assert_eq!((status, body["code"].as_str()), (503, Some("overloaded")));
    assert!(
        status_line(&mut stalled, Duration::from_secs(2))
            .await
            .contains("408")
    );
    busy(&s, Pool::Digitize, 0.0, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(s.digitize(&image, None).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn contract_claims_looser_and_a_disconnected_job_runs_on() {
    let s = start(Some(Mutant::ContractClaimsLooser), &[]).await;
    let ours = Contract::embedded();
    let claimed: serde_json::Value = s
        .client
        .get(s.url("/v1/contract"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(claimed["clauses"]["B3"]["value"]["stop_within_ms"], 5000);
    let t = &ours.tolerances;
    for (name, ours) in [
        ("refusal_latency_ms", t.refusal_latency_ms),
        ("timeout_late_ms", t.timeout_late_ms),
        ("retry_after_jitter_ms", t.retry_after_jitter_ms),
        ("metrics_poll_interval_ms", t.metrics_poll_interval_ms),
    ] {
        assert_eq!(claimed["tolerances"][name], ours * 50, "{name}");
    }

    let image = png(80, 60);
    let dropped = tokio::spawn(s.digitize(&image, Some("hold=decode:10000")).send());
    busy(&s, Pool::Digitize, 1.0, Duration::from_secs(5))
        .await
        .unwrap();
    dropped.abort();
    let stopped = busy(&s, Pool::Digitize, 0.0, Duration::from_secs(4))
        .await
        .expect("stopped within the claimed bound");
    assert!(
        stopped >= Duration::from_millis(2300) && stopped < Duration::from_millis(3500),
        "stopped {stopped:?} after the disconnect (contract: {} ms)",
        ours.clauses.b3.value.stop_within_ms
    );
}

#[tokio::test]
async fn clamped_busy_gauge_hides_an_unbounded_pool() {
    let s = start(Some(Mutant::ClampedBusyGauge), &[("WORKER_POOL_SIZE", "2")]).await;
    let image = png(80, 60);
    let held: Vec<_> = (0..4)
        .map(|_| tokio::spawn(s.digitize(&image, Some("hold=decode:1000")).send()))
        .collect();
    let start = Instant::now();
    while s.state().digitize.load().0 < 4 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "never ran 4 at once"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        s.metric(MetricName::WorkersBusy, Some(Pool::Digitize))
            .await,
        2.0
    );
    assert_eq!(
        s.metric(MetricName::WorkersLimit, Some(Pool::Digitize))
            .await,
        2.0
    );
    for h in held {
        assert_eq!(h.await.unwrap().unwrap().status(), 200);
    }
}
