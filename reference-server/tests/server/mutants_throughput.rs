//! T1 and T3 broken variants (test builds with the `mutants` feature): a pool without its bound,
//! a gauge that hides it, a Retry-After that ignores the load. Each misbehaves as its doc line
//! says; where that is a matter of degree, the reference runs the same scenario beside it.

use plimsoll_server::Mutant;
use plimsoll_spec::{MetricName, Pool};

use super::*;

fn retry_after(headers: &reqwest::header::HeaderMap) -> u64 {
    headers["retry-after"].to_str().unwrap().parse().unwrap()
}

/// The Retry-After of a refusal at light load (nothing has waited) and at heavy load (six
/// refusals each waited 1 to 2 s for the slot), with one worker and no queue. The slot is held
/// 1.6 s so that the last of the six refusals, sent up to 0.6 s after the hold began (six requests
/// on new connections on a crowded machine), still waited over a second: with 1.2 s, a lag of
/// 0.2 s would leave the last refusals under a second and the reference answering 1, as the
/// broken variant does.
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

    let b = tokio::spawn(s.digitize(&image, Some("hold=decode:1600")).send());
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
    let limit = Contract::embedded().pool(Pool::Export).workers as usize;
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
        f64::from(Contract::embedded().pool(Pool::Digitize).workers)
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
