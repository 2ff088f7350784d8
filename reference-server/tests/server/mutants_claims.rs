//! Broken variants whose account of the work is wrong (test builds with the `mutants` feature):
//! a body's `request_id`, the `Server-Timing` header, an error log's stage, the contract served
//! at `/v1/contract`. A client or the checks read these, so each must say what happened.

use plimsoll_server::Mutant;
use plimsoll_spec::Pool;

use super::*;

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
    assert_eq!(
        claimed["pools"]["digitize"]["cancellation"]["stop_within_ms"],
        5000
    );
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
        ours.cancellation().stop_within_ms
    );
}
