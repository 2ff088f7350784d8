//! What is not a good envelope, or fails as HTTP, is answered on the socket, which stays open.

use super::*;

#[tokio::test]
async fn malformed_messages_get_an_error_frame_and_the_socket_stays_open() {
    let s = TestServer::start(&[]).await;
    let mut ws = Ws::connect(&s).await;
    let cases = [
        ("", "{not json".to_owned()),
        (
            "t1",
            r#"{"type":"relay-http-response","request_id":"t1"}"#.to_owned(),
        ),
        (
            "m1",
            r#"{"type":"relay-http-request","request_id":"m1","path":"/healthz"}"#.to_owned(),
        ),
        ("p1", envelope("p1", "GET", "healthz", &[], "")),
        (
            "h1",
            envelope("h1", "GET", "/healthz", &[("bad header", "x")], ""),
        ),
        ("", envelope("", "GET", "/healthz", &[], "")),
        (
            "nt1",
            r#"{"request_id":"nt1","method":"GET","path":"/healthz"}"#.to_owned(),
        ),
    ];
    for (id, text) in &cases {
        ws.send(text).await;
        let f = ws.frame(Duration::from_secs(2)).await;
        assert_eq!(f.kind, RELAY_ERROR, "{text}");
        assert_eq!(&f.request_id, id);
        assert_eq!(f.code.as_deref(), Some("invalid_parameter"));
        assert_eq!((f.status, f.seq, f.r#final), (400, 0, true));
        assert!(!f.body_chunk.is_empty());
    }
    ws.send_raw(0x2, b"\x00\x01").await;
    let f = ws.frame(Duration::from_secs(2)).await;
    assert_eq!(f.kind, RELAY_ERROR);
    ws.send(&held("still-open", 0)).await;
    let f = ws.frame(Duration::from_secs(2)).await;
    assert_eq!((f.request_id.as_str(), f.status), ("still-open", 200));
    // Each `relay-error` has its one error line (rule `relay-error`), under the message's id.
    let lines: Vec<serde_json::Value> = s
        .log_lines()
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for id in ["t1", "m1", "p1", "h1", "nt1"] {
        let of: Vec<&serde_json::Value> = lines.iter().filter(|v| v["request_id"] == id).collect();
        assert_eq!(of.len(), 1, "{id}: {of:?}");
        assert_eq!(
            (
                &of[0]["stage"],
                &of[0]["code"],
                of[0]["error"].as_str().map(str::is_empty)
            ),
            (&"relay".into(), &"invalid_parameter".into(), Some(false)),
            "{id}"
        );
        assert!(of[0].get("stack").is_some(), "{id}");
    }
}

#[tokio::test]
async fn a_relayed_digitize_takes_a_base64_image_and_an_http_error_is_a_response_frame() {
    let s = TestServer::start(&[]).await;
    let mut ws = Ws::connect(&s).await;
    let png = STANDARD.encode(common::png(64, 48));
    ws.send(&envelope(
        "dig",
        "POST",
        "/v1/digitize?width_mm=40",
        &[
            ("content-type", "image/png"),
            ("content-transfer-encoding", "base64"),
            (HOOK, "hold=relay:20;hold=decode:20"),
        ],
        &png,
    ))
    .await;
    ws.send(&envelope("nf", "GET", "/nowhere", &[], "")).await;
    let r = receive(
        &mut ws,
        &["dig".into(), "nf".into()],
        Duration::from_secs(10),
    )
    .await;
    let design: plimsoll_spec::Design = serde_json::from_slice(&r.body("dig")).unwrap();
    assert!(design.stitch_count > 0);
    let nf = r.of("nf")[0];
    assert_eq!((nf.kind.as_str(), nf.status), (RELAY_RESPONSE, 404));
    let problem: serde_json::Value = serde_json::from_slice(&r.body("nf")).unwrap();
    assert_eq!(problem["code"], "not_found");
}

#[tokio::test]
async fn hook_headers_are_refused_like_the_http_api_when_hooks_are_off() {
    let s = TestServer::start_with(&[], false, |c| c).await;
    let mut ws = Ws::connect(&s).await;
    ws.send(&held("h", 100)).await;
    ws.send(&envelope(
        "bad",
        "GET",
        "/healthz",
        &[(HOOK, "hold=relay")],
        "",
    ))
    .await;
    let r = receive(&mut ws, &["h".into(), "bad".into()], Duration::from_secs(2)).await;
    for id in ["h", "bad"] {
        assert_eq!(r.of(id)[0].status, 400);
        let problem: serde_json::Value = serde_json::from_slice(&r.body(id)).unwrap();
        assert_eq!(problem["code"], "hooks_disabled");
        // One F3 line each: the relay's own refusal ("h", never routed) and the API's ("bad").
        let request_id = problem["request_id"].as_str().unwrap();
        let lines: Vec<serde_json::Value> = s
            .log_lines()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["request_id"] == request_id)
            .collect();
        assert_eq!(lines.len(), 1, "{id}: {lines:?}");
        assert_eq!(
            (&lines[0]["stage"], &lines[0]["status"]),
            (&"request".into(), &400.into())
        );
    }
    assert_eq!(s.state().relay.load(), (0, 0), "refused before admission");
}

#[tokio::test]
async fn an_invalid_hook_is_a_400_response_frame() {
    let s = TestServer::start(&[]).await;
    let mut ws = Ws::connect(&s).await;
    ws.send(&envelope(
        "bad",
        "GET",
        "/healthz",
        &[(HOOK, "hold=relay"), ("X-Request-Id", "trace-7")],
        "",
    ))
    .await;
    // A byte outside visible ASCII is refused by the grammar, not read as an empty header.
    ws.send(&envelope(
        "accent",
        "GET",
        "/healthz",
        &[(HOOK, "hold=relay:5\u{e9}")],
        "",
    ))
    .await;
    let ids = ["bad".to_owned(), "accent".to_owned()];
    let r = receive(&mut ws, &ids, Duration::from_secs(2)).await;
    for id in &ids {
        let problem: serde_json::Value = serde_json::from_slice(&r.body(id)).unwrap();
        assert_eq!(
            (r.of(id)[0].status, problem["code"].as_str()),
            (400, Some("invalid_parameter")),
            "{id}"
        );
    }
    // Answered as the HTTP API answers it (rule `relay-hooks`): the envelope's well-formed id,
    // in the body and the frame's headers, with the problem's content type.
    let frame = r.of("bad")[0];
    let problem: serde_json::Value = serde_json::from_slice(&r.body("bad")).unwrap();
    assert_eq!(problem["request_id"], "trace-7");
    assert_eq!(frame.headers["x-request-id"], "trace-7");
    assert_eq!(frame.headers["content-type"], "application/problem+json");
}

#[tokio::test]
async fn a_plain_get_of_the_relay_endpoint_is_426_with_upgrade_websocket() {
    let s = TestServer::start(&[]).await;
    let response = s.client.get(s.url("/v1/relay")).send().await.unwrap();
    let (status, headers, body) = common::problem(response).await;
    assert_eq!(status, 426);
    assert_eq!(headers["upgrade"], "websocket");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(body["code"], "upgrade_required");
    assert_eq!(body["status"], 426);
    assert_eq!(
        body["request_id"],
        headers["x-request-id"].to_str().unwrap()
    );
    let contract = plimsoll_spec::Contract::embedded();
    let spec = contract.error(plimsoll_spec::ErrorCode::UpgradeRequired);
    assert_eq!(
        (spec.status, body["title"].as_str()),
        (426, Some(spec.title.as_str()))
    );

    // Relayed, the same request is the same answer (there is no upgrade inside a socket).
    let mut ws = Ws::connect(&s).await;
    ws.send(&envelope("plain", "GET", "/v1/relay", &[], ""))
        .await;
    let f = ws.frame(Duration::from_secs(2)).await;
    assert_eq!((f.kind.as_str(), f.status), (RELAY_RESPONSE, 426));
    assert_eq!(f.headers["upgrade"], "websocket");
}
