//! B1–B4 over loopback HTTP: the deadline, the memory cap, client disconnects, connection bounds.

use plimsoll_spec::{MetricName, Pool};

use super::*;

#[tokio::test]
async fn b1_deadline_answers_504_on_time_and_frees_the_slot() {
    let s = TestServer::start(&[("DIGITIZE_TIMEOUT_MS", "1000")]).await;
    let start = Instant::now();
    let response = s
        .digitize(&png(80, 60), Some("hold=fill:5000"))
        .send()
        .await
        .unwrap();
    let elapsed = start.elapsed();
    let (status, _, body) = problem(response).await;
    assert_eq!(status, 504);
    assert!(
        elapsed >= Duration::from_millis(1000) && elapsed <= Duration::from_millis(1300),
        "{elapsed:?}"
    );
    assert_eq!(body["code"], "timeout");
    assert_eq!(body["failed_stage"], "fill");
    assert_eq!(body["completed_stages"], serde_json::json!(stages()[..3]));
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(1),
        |v| v == 0.0,
    )
    .await
    .expect("slot back within 1 s of the deadline");
    assert!(s.temp_entries().is_empty(), "{:?}", s.temp_entries());
}

/// The serializer writes the body inside the job (issue 39 made it faster, not streamed): a
/// deadline that passes while it runs is still B1's 504 naming `serialize`, after the five stages
/// before it, and never a 200 with half a design.
#[tokio::test]
async fn b1_a_deadline_passing_during_serialization_is_504_naming_serialize() {
    let s = TestServer::start(&[("DIGITIZE_TIMEOUT_MS", "1000")]).await;
    let (status, _, body) = problem(
        s.digitize(&png(80, 60), Some("hold=serialize:5000"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (504, Some("timeout")));
    assert_eq!(body["failed_stage"], "serialize");
    assert_eq!(body["completed_stages"], serde_json::json!(stages()[..5]));
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(1),
        |v| v == 0.0,
    )
    .await
    .expect("slot back within 1 s of the deadline");
    assert!(s.temp_entries().is_empty(), "{:?}", s.temp_entries());
}

#[tokio::test]
async fn b2_memory_cap_is_503_without_retry_after_and_the_server_survives() {
    let s = TestServer::start(&[]).await;
    let (status, headers, body) = problem(
        s.digitize(&png(80, 60), Some("alloc=2048"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("memory_cap_exceeded"))
    );
    assert!(headers.get("retry-after").is_none());

    // A PNG whose header claims 100000 x 100000 pixels: refused from the header alone.
    let bomb = common::png_claiming(100_000, 100_000);
    let (status, headers, body) = problem(s.digitize(&bomb, None).send().await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("memory_cap_exceeded")),
        "{body}"
    );
    assert_eq!(body["failed_stage"], "decode");
    assert!(headers.get("retry-after").is_none());
    assert_eq!(
        s.digitize(&png(80, 60), None)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn b3_disconnect_stops_the_worker_within_a_second() {
    for hold in ["hold=fill:10000", "hold=decode:10000"] {
        let s = TestServer::start(&[]).await;
        let request = tokio::spawn(s.digitize(&png(80, 60), Some(hold)).send());
        s.wait_metric(
            MetricName::WorkersBusy,
            Some(Pool::Digitize),
            Duration::from_secs(5),
            |v| v == 1.0,
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        request.abort();
        let took = s
            .wait_metric(
                MetricName::WorkersBusy,
                Some(Pool::Digitize),
                Duration::from_secs(2),
                |v| v == 0.0,
            )
            .await
            .expect("worker stopped");
        assert!(
            took < Duration::from_secs(1),
            "{hold}: worker stopped after {took:?}"
        );
        assert_eq!(
            s.metric(MetricName::CancellationsTotal, Some(Pool::Digitize))
                .await,
            1.0
        );
        assert!(s.temp_entries().is_empty(), "{:?}", s.temp_entries());
    }
}

#[tokio::test]
async fn b3_disconnect_while_queued_leaves_the_queue() {
    let s = TestServer::start(&[("WORKER_POOL_SIZE", "1"), ("QUEUE_CAPACITY", "2")]).await;
    let image = png(80, 60);
    let running = tokio::spawn(s.digitize(&image, Some("hold=decode:1500")).send());
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(5),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    let queued = tokio::spawn(s.digitize(&image, None).send());
    s.wait_metric(
        MetricName::QueueDepth,
        Some(Pool::Digitize),
        Duration::from_secs(2),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    queued.abort();
    s.wait_metric(
        MetricName::QueueDepth,
        Some(Pool::Digitize),
        Duration::from_secs(1),
        |v| v == 0.0,
    )
    .await
    .expect("left the queue");
    assert_eq!(
        s.metric(MetricName::CancellationsTotal, Some(Pool::Digitize))
            .await,
        1.0
    );
    assert_eq!(running.await.unwrap().unwrap().status(), 200);
}

#[tokio::test]
async fn b1_b3_a_timeout_is_not_a_cancellation_and_a_disconnect_is_one() {
    let s = TestServer::start(&[("DIGITIZE_TIMEOUT_MS", "600")]).await;
    let cancellations = || s.metric(MetricName::CancellationsTotal, Some(Pool::Digitize));
    let idle = || {
        s.wait_metric(
            MetricName::WorkersBusy,
            Some(Pool::Digitize),
            Duration::from_secs(2),
            |v| v == 0.0,
        )
    };
    let image = png(80, 60);
    let timed_out = s
        .digitize(&image, Some("hold=fill:5000"))
        .send()
        .await
        .unwrap();
    assert_eq!(timed_out.status(), 504);
    idle().await.expect("the timed-out worker stopped");
    assert_eq!(cancellations().await, 0.0, "a 504 is not a cancellation");

    let dropped = tokio::spawn(s.digitize(&image, Some("hold=decode:5000")).send());
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(5),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    dropped.abort();
    idle().await.expect("the cancelled worker stopped");
    assert_eq!(
        cancellations().await,
        1.0,
        "a disconnect is one cancellation"
    );

    let timed_out = s
        .digitize(&image, Some("hold=decode:5000"))
        .send()
        .await
        .unwrap();
    assert_eq!(timed_out.status(), 504);
    idle().await.unwrap();
    assert_eq!(cancellations().await, 1.0);
}

/// Opens `count` connections to `s` at once; every other one sends half a request head.
async fn slowloris(s: &TestServer, count: usize) -> Vec<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt as _;
    let addr = s.server.server().addr;
    let mut conns = Vec::with_capacity(count);
    for i in 0..count {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        if i % 2 == 0 {
            stream
                .write_all(b"POST /v1/digitize HTTP/1.1\r\nHost: x\r\nContent-Type: image/")
                .await
                .unwrap();
        }
        conns.push(stream);
    }
    conns
}

/// Whether the server has closed `stream` (EOF or reset), waiting at most `within`.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 512];
    let until = Instant::now() + within;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

#[tokio::test]
async fn b4_a_slowloris_is_closed_at_the_head_timeout_and_healthz_stays_up() {
    let s = TestServer::start(&[("HEAD_TIMEOUT_MS", "1000"), ("MAX_CONNECTIONS", "300")]).await;
    // More stalled connections than the cap: the ones past it are closed at once.
    let mut conns = slowloris(&s, 400).await;
    let opened = Instant::now();
    let mut closed_early = 0;
    for stream in conns.iter_mut().skip(300) {
        closed_early += usize::from(closed_within(stream, Duration::from_millis(500)).await);
    }
    assert_eq!(
        closed_early, 100,
        "connections past the cap are closed at once"
    );
    // The cap is full of stalled connections; the head timeout empties it.
    let mut still_open = 0;
    for stream in conns.iter_mut().take(300) {
        let left = Duration::from_millis(1400).saturating_sub(opened.elapsed());
        still_open += usize::from(!closed_within(stream, left).await);
    }
    assert_eq!(still_open, 0, "every stalled connection closed by 1.4 s");
    let healthz = s.client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), 200);
}

#[tokio::test]
async fn b4_an_idle_keep_alive_connection_is_closed_and_a_running_request_is_not() {
    let s = TestServer::start(&[("HEAD_TIMEOUT_MS", "500")]).await;
    // A request running longer than the head timeout keeps its connection: the timer only
    // runs while the server waits for a head.
    let started = Instant::now();
    let held = s
        .digitize(&png(80, 60), Some("hold=fill:1200"))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(1200));
    // A fresh connection asks once and then idles: closed at 0.5 s.
    let mut stream = tokio::net::TcpStream::connect(s.server.server().addr)
        .await
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
    }
    let asked = Instant::now();
    assert!(closed_within(&mut stream, Duration::from_millis(900)).await);
    let after = asked.elapsed();
    assert!(
        after >= Duration::from_millis(480),
        "closed after {after:?}"
    );
}
