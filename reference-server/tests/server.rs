//! Every clause of the contract, shown against the reference server over real loopback HTTP.

mod common;

use std::time::{Duration, Instant};

use common::{TestServer, png, problem};
use plimsoll_spec::Contract;

fn stages() -> Vec<String> {
    Contract::embedded()
        .stages
        .digitize
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[tokio::test]
async fn t1_t3_fifth_request_is_refused_at_once_with_retry_after() {
    let s = TestServer::start(&[]).await;
    let image = png(120, 90);
    let workers = Contract::embedded().clauses.t1.value.digitize_workers as usize;
    let held: Vec<_> = (0..workers)
        .map(|_| tokio::spawn(s.digitize(&image, Some("hold=decode:5000")).send()))
        .collect();
    s.wait_metric(
        "plimsoll_workers_busy",
        "digitize",
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
        s.metric("plimsoll_workers_busy", "digitize").await,
        workers as f64
    );
    for h in held {
        h.abort();
    }
    s.wait_metric(
        "plimsoll_workers_busy",
        "digitize",
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
        "plimsoll_workers_busy",
        "digitize",
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
            "plimsoll_queue_depth",
            "digitize",
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
        "plimsoll_workers_busy",
        "digitize",
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
            "plimsoll_workers_busy",
            "digitize",
            Duration::from_secs(5),
            |v| v == 1.0,
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        request.abort();
        let took = s
            .wait_metric(
                "plimsoll_workers_busy",
                "digitize",
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
            s.metric("plimsoll_cancellations_total", "digitize").await,
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
        "plimsoll_workers_busy",
        "digitize",
        Duration::from_secs(5),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    let queued = tokio::spawn(s.digitize(&image, None).send());
    s.wait_metric(
        "plimsoll_queue_depth",
        "digitize",
        Duration::from_secs(2),
        |v| v == 1.0,
    )
    .await
    .unwrap();
    queued.abort();
    s.wait_metric(
        "plimsoll_queue_depth",
        "digitize",
        Duration::from_secs(1),
        |v| v == 0.0,
    )
    .await
    .expect("left the queue");
    assert_eq!(
        s.metric("plimsoll_cancellations_total", "digitize").await,
        1.0
    );
    assert_eq!(running.await.unwrap().unwrap().status(), 200);
}

#[tokio::test]
async fn f1_every_stage_failure_and_panic_has_the_exact_body_and_leaves_nothing() {
    let s = TestServer::start(&[]).await;
    let image = png(80, 60);
    let stages = stages();
    for kind in ["fail", "panic"] {
        for (i, stage) in stages.iter().enumerate() {
            let (status, headers, body) = problem(
                s.digitize(&image, Some(&format!("{kind}={stage}")))
                    .send()
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(status, 503, "{kind}={stage}");
            assert_eq!(body["code"], "stage_failed");
            assert_eq!(body["failed_stage"], stage.as_str());
            assert_eq!(
                body["completed_stages"],
                serde_json::json!(stages[..i]),
                "{kind}={stage}"
            );
            assert_eq!(
                body["request_id"],
                headers["x-request-id"].to_str().unwrap()
            );
            assert!(body["error"].as_str().unwrap().contains(stage.as_str()));
            assert!(headers.get("retry-after").is_none());
            assert!(
                s.temp_entries().is_empty(),
                "{kind}={stage}: {:?}",
                s.temp_entries()
            );
        }
    }
    assert_eq!(s.digitize(&image, None).send().await.unwrap().status(), 200);
    // Export stages fail the same way.
    let design = s
        .digitize(&image, None)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let export_stages: Vec<String> = Contract::embedded()
        .stages
        .export
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (i, stage) in export_stages.iter().enumerate() {
        let r = s
            .client
            .post(s.url("/v1/export?format=dst"))
            .header("content-type", "application/json")
            .header("x-plimsoll-hook", format!("fail={stage}"))
            .body(design.clone())
            .send()
            .await
            .unwrap();
        let (status, _, body) = problem(r).await;
        assert_eq!(
            (status, body["failed_stage"].as_str()),
            (503, Some(stage.as_str()))
        );
        assert_eq!(
            body["completed_stages"],
            serde_json::json!(export_stages[..i])
        );
    }
    assert!(s.temp_entries().is_empty());
}

#[tokio::test]
async fn f2_each_bad_input_gets_400_with_its_code() {
    let s = TestServer::start(&[]).await;
    let good = png(80, 60);
    let url = |q: &str| s.url(&format!("/v1/digitize{q}"));
    let post =
        |u: String, ct: &str, body: Vec<u8>| s.client.post(u).header("content-type", ct).body(body);
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::RgbImage::from_pixel(40, 30, image::Rgb([9, 9, 9]))
        .write_to(&mut jpeg, image::ImageFormat::Jpeg)
        .unwrap();
    let mut corrupt_jpeg = jpeg.into_inner();
    let len = corrupt_jpeg.len();
    corrupt_jpeg.truncate(len / 2);
    let cases: Vec<(&str, reqwest::RequestBuilder, &str)> = vec![
        (
            "truncated png",
            post(url(""), "image/png", good[..good.len() / 2].to_vec()),
            "malformed_image",
        ),
        (
            "corrupt jpeg",
            post(url(""), "image/jpeg", corrupt_jpeg),
            "malformed_image",
        ),
        (
            "gif",
            post(
                url(""),
                "image/png",
                b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec(),
            ),
            "unsupported_format",
        ),
        (
            "random bytes",
            post(
                url(""),
                "image/png",
                (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect(),
            ),
            "unsupported_format",
        ),
        (
            "wrong content type",
            post(url(""), "text/plain", good.clone()),
            "unsupported_format",
        ),
        (
            "empty",
            post(url(""), "image/png", Vec::new()),
            "empty_body",
        ),
        (
            "oversize",
            post(url(""), "image/png", vec![0u8; 33 * 1024 * 1024]),
            "payload_too_large",
        ),
        (
            "density out of range",
            post(url("?density_mm=5"), "image/png", good.clone()),
            "invalid_parameter",
        ),
        (
            "colors not a number",
            post(url("?colors=many"), "image/png", good.clone()),
            "invalid_parameter",
        ),
        (
            "colors not an integer",
            post(url("?colors=3.5"), "image/png", good.clone()),
            "invalid_parameter",
        ),
        (
            "unknown parameter",
            post(url("?density=0.4"), "image/png", good.clone()),
            "invalid_parameter",
        ),
        (
            "bad hook",
            post(url(""), "image/png", good.clone()).header("x-plimsoll-hook", "explode=now"),
            "invalid_parameter",
        ),
        (
            "design not json",
            post(
                s.url("/v1/export"),
                "application/json",
                b"{not json".to_vec(),
            ),
            "malformed_design",
        ),
        (
            "design wrong shape",
            post(
                s.url("/v1/export"),
                "application/json",
                br#"{"format":"x"}"#.to_vec(),
            ),
            "malformed_design",
        ),
        (
            "unknown export format",
            post(
                s.url("/v1/export?format=pes"),
                "application/json",
                b"{}".to_vec(),
            ),
            "invalid_parameter",
        ),
    ];
    for (name, request, code) in cases {
        let (status, headers, body) = problem(request.send().await.unwrap()).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some(code)),
            "{name}: {body}"
        );
        assert_eq!(
            body["request_id"],
            headers["x-request-id"].to_str().unwrap(),
            "{name}"
        );
    }
    let (status, _, body) = problem(s.client.get(s.url("/nowhere")).send().await.unwrap()).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    assert_eq!(s.digitize(&good, None).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn hooks_are_refused_unless_enabled() {
    let s = TestServer::start_with(&[], false, |c| c).await;
    let (status, _, body) = problem(
        s.digitize(&png(40, 30), Some("hold=decode:10"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("hooks_disabled"))
    );
}

#[tokio::test]
async fn f3_every_error_is_one_json_line_with_the_four_fields() {
    let s = TestServer::start(&[("LOG_STACK", "1")]).await;
    let mut ids = Vec::new();
    for hook in ["fail=segment", "panic=fill"] {
        let r = s.digitize(&png(60, 40), Some(hook)).send().await.unwrap();
        ids.push(r.headers()["x-request-id"].to_str().unwrap().to_owned());
    }
    let r = s
        .client
        .post(s.url("/v1/digitize"))
        .body(Vec::new())
        .send()
        .await
        .unwrap();
    ids.push(r.headers()["x-request-id"].to_str().unwrap().to_owned());
    let lines = s.log_lines();
    assert!(!lines.is_empty());
    let parsed: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    for id in &ids {
        let errors: Vec<_> = parsed
            .iter()
            .filter(|v| v["request_id"] == id.as_str() && v.get("error").is_some())
            .collect();
        assert_eq!(errors.len(), 1, "one error line for {id}");
        for field in ["request_id", "stage", "error", "stack"] {
            assert!(
                errors[0].get(field).is_some(),
                "{field} missing: {}",
                errors[0]
            );
        }
    }
    let failed = parsed
        .iter()
        .find(|v| v["request_id"] == ids[0].as_str() && v.get("error").is_some())
        .unwrap();
    assert_eq!(failed["stage"], "segment");
    assert!(
        failed["stack"]
            .as_str()
            .unwrap()
            .contains("plimsoll_server"),
        "LOG_STACK=1 gives a backtrace"
    );
    // Access lines for every request.
    assert!(parsed.iter().filter(|v| v["message"] == "request").count() >= 3);
}

#[tokio::test]
async fn f4_request_ids_are_kept_when_well_formed_and_replaced_otherwise() {
    let s = TestServer::start(&[]).await;
    let r = s
        .client
        .get(s.url("/healthz"))
        .header("x-request-id", "ci-run-7.step:3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "ci-run-7.step:3");
    let r = s
        .client
        .get(s.url("/healthz"))
        .header("x-request-id", "bad id!")
        .send()
        .await
        .unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap();
    assert_ne!(id, "bad id!");
    assert!(Contract::embedded().clauses.f4.value.accepts(id));
    for path in ["/metrics", "/v1/contract", "/missing"] {
        assert!(
            s.client
                .get(s.url(path))
                .send()
                .await
                .unwrap()
                .headers()
                .contains_key("x-request-id"),
            "{path}"
        );
    }
}

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
    for m in &Contract::embedded().observability.metrics {
        let kind = format!("{:?}", m.kind).to_lowercase();
        let base = m.name.registered_name();
        assert!(
            text.contains(&format!("# TYPE {base} {kind}")),
            "{} {kind} missing",
            m.name
        );
    }
    assert_eq!(
        common::metric_value(&text, "plimsoll_workers_limit", "digitize"),
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
    assert_eq!(c.clauses.t1.value.digitize_workers, 3);
    assert_eq!(s.metric("plimsoll_workers_limit", "digitize").await, 3.0);
}

#[tokio::test]
async fn shutdown_drains_in_flight_work_then_cancels_the_rest() {
    let s = TestServer::start(&[]).await;
    let image = png(80, 60);
    let short = tokio::spawn(s.digitize(&image, Some("hold=decode:300")).send());
    s.wait_metric(
        "plimsoll_workers_busy",
        "digitize",
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
    let long = tokio::spawn(s.digitize(&image, Some("hold=decode:30000")).send());
    s.wait_metric(
        "plimsoll_workers_busy",
        "digitize",
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
    assert_eq!(s.metric("plimsoll_temp_files", "").await, 0.0);
    assert!(!jobs.join("plimsoll-job-crashed").exists());
    assert!(jobs.join("unrelated.txt").exists());
}
