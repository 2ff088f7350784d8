//! T1–T3 over loopback HTTP: the bound, FIFO order, refusals with Retry-After.

use plimsoll_spec::{MetricName, Pool};

use super::*;

#[tokio::test]
async fn t1_t3_fifth_request_is_refused_at_once_with_retry_after() {
    let s = TestServer::start(&[]).await;
    let image = png(120, 90);
    let workers = Contract::embedded().pool(Pool::Digitize).workers as usize;
    let held: Vec<_> = (0..workers)
        .map(|_| tokio::spawn(s.digitize(&image, Some("hold=decode:5000")).send()))
        .collect();
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(5),
        |v| v == workers as f64,
    )
    .await
    .expect("all workers busy");
    let start = Instant::now();
    let response = s.digitize(&image, None).send().await.unwrap();
    let elapsed = start.elapsed();
    let (status, headers, body) = problem(response).await;
    assert_eq!(status, 503);
    assert!(
        elapsed < Duration::from_millis(100),
        "refusal took {elapsed:?}"
    );
    let retry: u64 = headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("delay-seconds");
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    assert_eq!(body["code"], "overloaded");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(
        s.metric(MetricName::WorkersBusy, Some(Pool::Digitize))
            .await,
        workers as f64
    );
    for h in held {
        h.abort();
    }
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(2),
        |v| v == 0.0,
    )
    .await
    .expect("slots released after the clients left");
}

#[tokio::test]
async fn t2_queue_is_served_in_arrival_order() {
    let s = TestServer::start(&[("WORKER_POOL_SIZE", "1"), ("QUEUE_CAPACITY", "3")]).await;
    let image = png(80, 60);
    let first = tokio::spawn(s.digitize(&image, Some("hold=decode:400")).send());
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(5),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut queued = Vec::new();
    for i in 0..3 {
        let request = s.digitize(&image, Some("hold=decode:50"));
        let tx = tx.clone();
        queued.push(tokio::spawn(async move {
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), 200);
            tx.send(i).unwrap();
        }));
        s.wait_metric(
            MetricName::QueueDepth,
            Some(Pool::Digitize),
            Duration::from_secs(2),
            |v| v == (i + 1) as f64,
        )
        .await
        .unwrap();
    }
    // The queue is full now: one more is refused.
    assert_eq!(s.digitize(&image, None).send().await.unwrap().status(), 503);
    assert_eq!(first.await.unwrap().unwrap().status(), 200);
    for q in queued {
        q.await.unwrap();
    }
    let order: Vec<i32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(order, [0, 1, 2]);
}
