//! B1–B3 broken variants and the cleanup after a bound fires (test builds with the `mutants`
//! feature): a deadline that skips the queue, a disconnect that frees the gauge but not the slot,
//! a memory cap set too low, a slow upload holding a worker, temp dirs kept. Each misbehaves as
//! its doc line says; where that is a matter of degree, the reference runs the same scenario
//! beside it.

use plimsoll_server::Mutant;
use plimsoll_spec::{MetricName, Pool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// How long a request queued behind a 700 ms job, then holding `fill`, takes to get its 504
/// (timeout 1 s, one worker, one queue place). It is sent once the gauge shows the first job
/// running, some time into its hold (polling `/metrics`: tens of milliseconds, more on a crowded
/// machine), so it queues for 700 ms less that lag: a deadline counted from the job's start
/// answers 1700 ms less the lag after it was sent. With a 500 ms job, a lag over 100 ms would put
/// the broken variant under the 1400 ms the test asks of it.
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
    let first = tokio::spawn(s.digitize(&image, Some("hold=decode:700")).send());
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
        late >= Duration::from_millis(1400) && late < Duration::from_millis(2200),
        "504 after {late:?}: the ~700 ms queued were not counted"
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
    let cap = Contract::embedded()
        .pool_spec(Pool::Digitize)
        .memory_cap_mb
        .unwrap_or_default();
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
