//! B1–B3 over loopback HTTP: the deadline, the memory cap, client disconnects.

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
