//! F1–F4 over loopback HTTP: stage failures, invalid input, hooks, error logs, request ids.

use super::*;

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
        .pool(Pool::Export)
        .stages
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
            "repeated parameter",
            post(url("?colors=4&colors=4"), "image/png", good.clone()),
            "invalid_parameter",
        ),
        (
            "format in capitals",
            post(
                s.url("/v1/export?format=SVG"),
                "application/json",
                b"{}".to_vec(),
            ),
            "invalid_parameter",
        ),
        (
            "bad hook",
            post(url(""), "image/png", good.clone()).header("x-plimsoll-hook", "explode=now"),
            "invalid_parameter",
        ),
        (
            "hook not text",
            post(url(""), "image/png", good.clone()).header(
                "x-plimsoll-hook",
                reqwest::header::HeaderValue::from_bytes(b"fail=decode\xc2\x84").unwrap(),
            ),
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
    // The content is judged in the first stage (rule `image-format`), the query before it.
    let gif = post(url(""), "image/png", b"GIF89a\x01\x00;".to_vec());
    let (_, _, body) = problem(gif.send().await.unwrap()).await;
    assert_eq!(body["failed_stage"], "decode", "{body}");
    assert_eq!(body["completed_stages"], serde_json::json!([]), "{body}");
    let repeated = post(url("?colors=4&colors=4"), "image/png", good.clone());
    let (_, _, body) = problem(repeated.send().await.unwrap()).await;
    assert!(body.get("failed_stage").is_none(), "{body}");
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
    // One line per request: an error's line also says what its access line would have.
    for id in &ids {
        let lines: Vec<_> = parsed
            .iter()
            .filter(|v| v["request_id"] == id.as_str())
            .collect();
        assert_eq!(lines.len(), 1, "one line for {id}: {lines:?}");
        let line = lines[0];
        assert_eq!(
            (&line["method"], &line["path"]),
            (&"POST".into(), &"/v1/digitize".into())
        );
        assert!(line["status"].as_u64().is_some_and(|s| s >= 400), "{line}");
        assert!(line["duration_ms"].as_f64().is_some(), "{line}");
        assert!(
            line["code"].is_string() && line["pool"] == "digitize",
            "{line}"
        );
    }
    // A success keeps its access line.
    let r = s.client.get(s.url("/healthz")).send().await.unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let ok: Vec<serde_json::Value> = s
        .log_lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["request_id"] == id.as_str())
        .collect();
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert_eq!(
        (&ok[0]["message"], &ok[0]["status"]),
        (&"request".into(), &200.into())
    );
    assert!(ok[0].get("error").is_none());
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
    assert!(Contract::embedded().clauses().f4.value.accepts(id));
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
