//! What every response and endpoint exposes (Server-Timing, /metrics, /v1/contract) and the
//! server's lifecycle (draining shutdown, stale temp dirs).

use plimsoll_spec::{MetricName, Pool};

use super::*;

#[tokio::test]
async fn pipeline_responses_carry_server_timing_and_export_writes_machine_files() {
    let s = TestServer::start(&[]).await;
    let r = s.digitize(&png(120, 90), None).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let timing = r.headers()["server-timing"].to_str().unwrap().to_owned();
    assert!(
        timing.starts_with("queue;dur=") && timing.contains(", run;dur="),
        "{timing}"
    );
    let design = r.bytes().await.unwrap();
    for (format, magic) in [
        ("dst", &b"LA:"[..]),
        ("exp", &b"\x80"[..]),
        ("svg", &b"<svg"[..]),
    ] {
        let r = s
            .client
            .post(s.url(&format!("/v1/export?format={format}")))
            .header("content-type", "application/json")
            .body(design.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{format}");
        assert!(
            r.headers()["content-disposition"]
                .to_str()
                .unwrap()
                .contains(&format!("design.{format}"))
        );
        let bytes = r.bytes().await.unwrap();
        assert!(
            bytes.windows(magic.len()).any(|w| w == magic) && bytes.len() > 16,
            "{format}"
        );
    }
}

/// A design long enough to be written by two threads is sent as its two parts, one after the
/// other: the client still gets one body of the declared `Content-Length` (no chunked encoding),
/// and it is serde_json's rendering of the design it holds, the parts meeting at a comma.
#[tokio::test]
async fn a_design_written_in_two_parts_is_one_body_of_its_content_length() {
    let s = TestServer::start(&[]).await;
    // 600 mm wide: ~200K stitches, past the serializer's two-thread threshold.
    let r = s
        .digitize_at(600.0, &png(120, 90), None)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("transfer-encoding").is_none());
    let length: usize = r.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body = r.bytes().await.unwrap();
    assert_eq!(body.len(), length);
    let design: plimsoll_spec::Design = serde_json::from_slice(&body).unwrap();
    assert!(
        design.stitches.len() > 100_000,
        "{} stitches",
        design.stitches.len()
    );
    assert!(
        serde_json::to_vec(&design).unwrap() == body,
        "not serde_json's text"
    );
}

#[tokio::test]
async fn metrics_expose_exactly_the_contract_names_and_types() {
    let s = TestServer::start(&[]).await;
    let text = s
        .client
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for m in &Contract::embedded().observability().metrics {
        let kind = format!("{:?}", m.kind).to_lowercase();
        let base = m.name.registered_name();
        assert!(
            text.contains(&format!("# TYPE {base} {kind}")),
            "{} {kind} missing",
            m.name
        );
    }
    assert_eq!(
        common::metric_value(&text, MetricName::WorkersLimit, Some(Pool::Digitize)),
        Some(4.0)
    );
}

#[tokio::test]
async fn contract_endpoint_serves_the_effective_values() {
    let s = TestServer::start(&[("WORKER_POOL_SIZE", "3")]).await;
    let c: Contract = s
        .client
        .get(s.url("/v1/contract"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(c.pool(Pool::Digitize).workers, 3);
    assert_eq!(
        s.metric(MetricName::WorkersLimit, Some(Pool::Digitize))
            .await,
        3.0
    );
}

#[tokio::test]
async fn shutdown_drains_in_flight_work_then_cancels_the_rest() {
    let s = TestServer::start(&[]).await;
    let image = png(80, 60);
    let short = tokio::spawn(s.digitize(&image, Some("hold=decode:300")).send());
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(5),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    let workspace = s.server.shutdown_keeping_workspace().await.unwrap();
    assert_eq!(
        short.await.unwrap().unwrap().status(),
        200,
        "in-flight work finished during the drain"
    );
    assert!(
        std::fs::read_dir(workspace.path().join("jobs"))
            .unwrap()
            .next()
            .is_none()
    );

    let s = TestServer::start_with(&[], true, |mut c| {
        c.drain_timeout = Duration::from_millis(100);
        c
    })
    .await;
    let state = s.state().clone();
    let long = tokio::spawn(s.digitize(&image, Some("hold=decode:30000")).send());
    s.wait_metric(
        MetricName::WorkersBusy,
        Some(Pool::Digitize),
        Duration::from_secs(5),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    let started = Instant::now();
    let workspace = s.server.shutdown_keeping_workspace().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let response = long.await.unwrap().unwrap();
    assert_eq!(response.status(), 503, "cancelled at the end of the drain");
    assert_eq!(
        common::metric_value(
            &state.metrics.encode(),
            MetricName::CancellationsTotal,
            Some(Pool::Digitize)
        ),
        Some(0.0),
        "a job the server stopped is not a cancellation"
    );
    assert!(
        std::fs::read_dir(workspace.path().join("jobs"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[tokio::test]
async fn stale_job_dirs_from_a_crash_are_removed_at_start() {
    let workspace = tempfile::tempdir().unwrap();
    let jobs = workspace.path().join("jobs");
    std::fs::create_dir_all(jobs.join("plimsoll-job-crashed/inner")).unwrap();
    std::fs::write(jobs.join("unrelated.txt"), "keep").unwrap();
    let s = TestServer::start_in(workspace, &[], true, |c| c).await;
    assert_eq!(s.metric(MetricName::TempFiles, None).await, 0.0);
    assert!(!jobs.join("plimsoll-job-crashed").exists());
    assert!(jobs.join("unrelated.txt").exists());
}
