//! The relay bridge (R1–R6) over a real loopback WebSocket. The client is a minimal RFC 6455
//! implementation (text frames, masked) so the server crate needs no WebSocket client dependency.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::TestServer;
use plimsoll_server::state::AppState;
use plimsoll_spec::relay::{
    RELAY_ERROR, RELAY_REQUEST, RELAY_RESPONSE, RelayRequest, RelayResponse,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOOK: &str = "x-plimsoll-hook";

/// One WebSocket message as the client sees it.
#[derive(Debug)]
enum Msg {
    Text(String),
    Binary,
    Close,
}

struct Ws {
    tcp: TcpStream,
    buf: Vec<u8>,
    mask_seed: u32,
}

impl Ws {
    async fn connect(server: &TestServer) -> Ws {
        let addr = server.server.server().addr;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "GET /v1/relay HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 1024];
            let n = tcp.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed during the handshake");
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "no upgrade: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
            "{head}"
        );
        buf.drain(..end);
        Ws {
            tcp,
            buf,
            mask_seed: 0x1234_5678,
        }
    }

    async fn send_raw(&mut self, opcode: u8, payload: &[u8]) {
        let mut frame = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= 0xFFFF => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        self.mask_seed = self
            .mask_seed
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        let mask = self.mask_seed.to_be_bytes();
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.tcp.write_all(&frame).await.unwrap();
    }

    async fn send(&mut self, text: &str) {
        self.send_raw(0x1, text.as_bytes()).await;
    }

    async fn fill(&mut self, n: usize) -> bool {
        while self.buf.len() < n {
            let mut chunk = [0u8; 16384];
            match self.tcp.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
            }
        }
        true
    }

    /// The next data or close message (pings and pongs skipped); `Close` also when the TCP
    /// connection ends.
    async fn recv(&mut self) -> Msg {
        let mut message = Vec::new();
        let mut kind = 0u8;
        loop {
            if !self.fill(2).await {
                return Msg::Close;
            }
            let (fin, opcode) = (self.buf[0] & 0x80 != 0, self.buf[0] & 0x0F);
            assert_eq!(self.buf[1] & 0x80, 0, "server frames are never masked");
            let (len, header) = match self.buf[1] & 0x7F {
                126 => {
                    if !self.fill(4).await {
                        return Msg::Close;
                    }
                    (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                }
                127 => {
                    if !self.fill(10).await {
                        return Msg::Close;
                    }
                    let b: [u8; 8] = self.buf[2..10].try_into().unwrap();
                    (u64::from_be_bytes(b) as usize, 10)
                }
                n => (n as usize, 2),
            };
            if !self.fill(header + len).await {
                return Msg::Close;
            }
            let payload: Vec<u8> = self.buf.drain(..header + len).skip(header).collect();
            match opcode {
                0x8 => return Msg::Close,
                0x9 | 0xA => continue,
                0x0 => message.extend(payload),
                _ => {
                    kind = opcode;
                    message = payload;
                }
            }
            if fin {
                return if kind == 0x1 {
                    Msg::Text(String::from_utf8(message).expect("text messages are UTF-8"))
                } else {
                    Msg::Binary
                };
            }
        }
    }

    async fn recv_within(&mut self, limit: Duration) -> Option<Msg> {
        tokio::time::timeout(limit, self.recv()).await.ok()
    }

    async fn frame(&mut self, limit: Duration) -> RelayResponse {
        match self.recv_within(limit).await {
            Some(Msg::Text(t)) => serde_json::from_str(&t).unwrap_or_else(|e| panic!("{e}: {t}")),
            other => panic!("expected a frame, got {other:?}"),
        }
    }
}

fn envelope(id: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    serde_json::to_string(&RelayRequest {
        kind: RELAY_REQUEST.to_owned(),
        request_id: id.to_owned(),
        method: method.to_owned(),
        path: path.to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.to_owned(),
    })
    .unwrap()
}

/// `GET /healthz`, held `ms` by the relay worker.
fn held(id: &str, ms: u64) -> String {
    let hook = format!("hold=relay:{ms}");
    let headers: &[(&str, &str)] = if ms > 0 { &[(HOOK, &hook)] } else { &[] };
    envelope(id, "GET", "/healthz", headers, "")
}

/// Every frame until each of `ids` has its final one, with arrival times.
struct Received {
    frames: Vec<(Instant, RelayResponse)>,
    done: HashMap<String, Instant>,
    order: Vec<String>,
}

impl Received {
    fn of(&self, id: &str) -> Vec<&RelayResponse> {
        self.frames
            .iter()
            .map(|(_, f)| f)
            .filter(|f| f.request_id == id)
            .collect()
    }

    fn body(&self, id: &str) -> Vec<u8> {
        let frames = self.of(id);
        let joined: String = frames.iter().map(|f| f.body_chunk.as_str()).collect();
        if frames[0]
            .headers
            .get("content-transfer-encoding")
            .map(String::as_str)
            == Some("base64")
        {
            STANDARD.decode(&joined).unwrap()
        } else {
            joined.into_bytes()
        }
    }
}

async fn receive(ws: &mut Ws, ids: &[String], limit: Duration) -> Received {
    let deadline = Instant::now() + limit;
    let wanted: HashSet<&String> = ids.iter().collect();
    let mut r = Received {
        frames: Vec::new(),
        done: HashMap::new(),
        order: Vec::new(),
    };
    while r.done.len() < wanted.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = ws.frame(left).await;
        let at = Instant::now();
        assert!(wanted.contains(&frame.request_id), "unknown id: {frame:?}");
        assert!(
            !r.done.contains_key(&frame.request_id),
            "frame after final: {frame:?}"
        );
        if frame.r#final {
            r.done.insert(frame.request_id.clone(), at);
            r.order.push(frame.request_id.clone());
        }
        r.frames.push((at, frame));
    }
    r
}

/// Samples the relay pool's (busy, queued) every millisecond until stopped; returns the maxima.
fn sample_pool(state: AppState) -> (Arc<AtomicBool>, tokio::task::JoinHandle<(usize, usize)>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut max = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                let (busy, queued) = state.relay.load();
                max = (max.0.max(busy), max.1.max(queued));
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            max
        }
    });
    (stop, handle)
}

/// Waits (bounded) until the relay pool is back to (busy, queued).
async fn pool_settles(state: &AppState, want: (usize, usize), limit: Duration) {
    let start = Instant::now();
    while state.relay.load() != want {
        assert!(
            start.elapsed() < limit,
            "relay pool at {:?}, want {want:?}",
            state.relay.load()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test]
async fn relays_a_request_and_answers_with_one_frame_matched_by_id() {
    let s = TestServer::start(&[]).await;
    let mut ws = Ws::connect(&s).await;
    ws.send(&envelope(
        "one",
        "GET",
        "/healthz",
        &[("x-request-id", "trace-1")],
        "",
    ))
    .await;
    let f = ws.frame(Duration::from_secs(5)).await;
    assert_eq!(f.kind, RELAY_RESPONSE);
    assert_eq!(
        (f.request_id.as_str(), f.seq, f.status, f.r#final),
        ("one", 0, 200, true)
    );
    assert_eq!(f.body_chunk, "ok\n");
    assert_eq!(f.headers["x-request-id"], "trace-1");
    assert!(f.code.is_none());
    // The relayed request went through the server's own middleware: it is in the access log.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        s.log_lines()
            .iter()
            .any(|l| l.contains("trace-1") && l.contains("/healthz")),
        "{:?}",
        s.log_lines()
    );
}

#[tokio::test]
async fn a_fast_request_completes_while_a_slow_one_is_in_flight() {
    let s = TestServer::start(&[]).await;
    let mut ws = Ws::connect(&s).await;
    let sent = Instant::now();
    ws.send(&held("slow", 800)).await;
    ws.send(&held("fast", 0)).await;
    let r = receive(
        &mut ws,
        &["slow".into(), "fast".into()],
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(r.order, ["fast", "slow"]);
    let fast = r.done["fast"] - sent;
    let slow = r.done["slow"] - sent;
    assert!(fast < Duration::from_millis(300), "fast took {fast:?}");
    assert!(slow >= Duration::from_millis(800), "slow took {slow:?}");
}

#[tokio::test]
async fn shuffled_holds_complete_out_of_order_each_id_exactly_once() {
    let s = TestServer::start(&[]).await;
    let mut ws = Ws::connect(&s).await;
    let holds = [350u64, 50, 250, 0, 400, 150, 300, 100];
    let ids = ids("r3", holds.len());
    let sent = Instant::now();
    for (id, ms) in ids.iter().zip(holds) {
        ws.send(&envelope(
            id,
            "GET",
            "/healthz",
            &[
                (HOOK, &format!("hold=relay:{ms}")),
                ("x-request-id", &format!("echo-{id}")),
            ],
            "",
        ))
        .await;
    }
    let r = receive(&mut ws, &ids, Duration::from_secs(5)).await;
    assert_eq!(r.frames.len(), ids.len(), "one frame each");
    let mut by_hold: Vec<(u64, &String)> = holds.iter().copied().zip(&ids).collect();
    by_hold.sort();
    let expected: Vec<&String> = by_hold.iter().map(|(_, id)| *id).collect();
    assert_eq!(r.order.iter().collect::<Vec<_>>(), expected);
    for (id, ms) in ids.iter().zip(holds) {
        let f = r.of(id)[0];
        assert_eq!(f.headers["x-request-id"], format!("echo-{id}"));
        assert!(r.done[id] - sent >= Duration::from_millis(ms));
    }
}

#[tokio::test]
async fn overflow_queues_fifo_and_never_runs_more_than_the_limit() {
    let s = TestServer::start(&[("RELAY_CONCURRENCY", "3")]).await;
    let n = 3;
    assert_eq!(s.metric("plimsoll_workers_limit", "relay").await, n as f64);
    let mut ws = Ws::connect(&s).await;
    let ids = ids("r4", 3 * n);
    let (stop, sampler) = sample_pool(s.state().clone());
    for id in &ids {
        ws.send(&held(id, 250)).await;
    }
    let r = receive(&mut ws, &ids, Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    let (max_busy, max_queued) = sampler.await.unwrap();
    assert_eq!(max_busy, n, "busy workers");
    assert!(
        max_queued >= n,
        "the overflow waited in the queue ({max_queued})"
    );
    // Equal holds: completions come in waves of n, in send order wave by wave.
    for (w, wave) in r.order.chunks(n).enumerate() {
        let got: HashSet<&String> = wave.iter().collect();
        let want: HashSet<&String> = ids[w * n..(w + 1) * n].iter().collect();
        assert_eq!(got, want, "wave {w}");
    }
    assert!(r.frames.iter().all(|(_, f)| f.status == 200));
    pool_settles(s.state(), (0, 0), Duration::from_millis(200)).await;
}

#[tokio::test]
async fn long_bodies_stream_as_gapless_frames_that_reassemble_exactly() {
    let s = TestServer::start(&[]).await;
    let max = s
        .server
        .state()
        .config
        .contract
        .clauses
        .r5
        .value
        .max_frame_body_bytes as usize;
    let contract = s
        .client
        .get(s.url("/v1/contract"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(
        contract.len() > max,
        "the contract body is {} bytes",
        contract.len()
    );
    let design = serde_json::to_string(&zigzag(6000)).unwrap();
    let export = |format: &str| {
        s.client
            .post(s.url(&format!("/v1/export?format={format}")))
            .header("content-type", "application/json")
            .body(design.clone())
            .send()
    };
    let dst = export("dst").await.unwrap().bytes().await.unwrap();
    let svg = export("svg").await.unwrap().bytes().await.unwrap();
    assert!(dst.len() * 4 / 3 > max && svg.len() > max);

    let mut ws = Ws::connect(&s).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let hold = [(HOOK, "hold=relay:50")];
        let json = [
            ("content-type", "application/json"),
            (HOOK, "hold=relay:50"),
        ];
        for (kind, text) in [
            (
                "contract",
                envelope(&format!("contract-{i}"), "GET", "/v1/contract", &hold, ""),
            ),
            (
                "dst",
                envelope(
                    &format!("dst-{i}"),
                    "POST",
                    "/v1/export?format=dst",
                    &json,
                    &design,
                ),
            ),
            (
                "svg",
                envelope(
                    &format!("svg-{i}"),
                    "POST",
                    "/v1/export?format=svg",
                    &json,
                    &design,
                ),
            ),
        ] {
            // Two exports of each format: four at once is the export pool's size (no queue).
            if kind == "contract" || i < 2 {
                ids.push(format!("{kind}-{i}"));
                ws.send(&text).await;
            }
        }
    }
    let r = receive(&mut ws, &ids, Duration::from_secs(10)).await;
    for id in &ids {
        let frames = r.of(id);
        assert_eq!(frames[0].status, 200, "{id}: {}", frames[0].body_chunk);
        assert!(frames.len() > 1, "{id}: {} frame(s)", frames.len());
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.seq, i as u64, "{id}");
            assert_eq!(f.r#final, i + 1 == frames.len(), "{id}");
            assert_eq!(
                f.headers.is_empty(),
                i > 0,
                "{id}: headers on the first frame only"
            );
            assert!(
                f.body_chunk.len() <= max,
                "{id}: chunk of {}",
                f.body_chunk.len()
            );
            assert_eq!(f.status, 200);
        }
        let want: &[u8] = match id.split('-').next().unwrap() {
            "contract" => &contract,
            "dst" => &dst,
            _ => &svg,
        };
        assert_eq!(r.body(id), want, "{id}");
    }
    assert_eq!(
        r.of("dst-0")[0].headers["content-transfer-encoding"],
        "base64"
    );
    assert!(
        !r.of("svg-0")[0]
            .headers
            .contains_key("content-transfer-encoding")
    );
}

/// A valid design of `n` stitches (one thread, a zigzag inside 100 x 100 mm).
fn zigzag(n: usize) -> plimsoll_spec::Design {
    use plimsoll_spec::{Design, Extents, Stitch, StitchCommand, Thread};
    let mut stitches: Vec<Stitch> = (0..n)
        .map(|i| Stitch {
            x: (i % 1000) as i32,
            y: if i % 2 == 0 {
                0
            } else {
                37 + (i / 1000) as i32 * 10
            },
            cmd: StitchCommand::Stitch,
        })
        .collect();
    stitches.push(Stitch {
        x: 0,
        y: 0,
        cmd: StitchCommand::End,
    });
    Design {
        format: plimsoll_spec::design::DESIGN_FORMAT.to_owned(),
        width_mm: 100.0,
        height_mm: 100.0,
        threads: vec![Thread {
            color: "#112233".to_owned(),
        }],
        extents: Extents {
            min_x: 0,
            min_y: 0,
            max_x: 1000,
            max_y: 1000,
        },
        stitch_count: n as u64,
        stitches,
    }
}

#[tokio::test]
async fn a_dropped_socket_releases_every_slot_and_a_new_socket_works_at_once() {
    let s = TestServer::start(&[]).await;
    let n = s
        .server
        .state()
        .config
        .contract
        .clauses
        .r1
        .value
        .relay_concurrency as usize;
    let state = s.state().clone();
    let mut ws = Ws::connect(&s).await;
    // n held plus two queued behind them.
    for id in ids("orphan", n + 2) {
        ws.send(&held(&id, 400)).await;
    }
    let start = Instant::now();
    while state.relay.load() != (n, 2) {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            state.relay.load()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    drop(ws);
    let mut again = Ws::connect(&s).await;
    // The queued orphans leave the queue as soon as the socket is seen gone.
    let start = Instant::now();
    while state.relay.load().1 != 0 {
        assert!(
            start.elapsed() < Duration::from_millis(200),
            "{:?}",
            state.relay.load()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let sent = Instant::now();
    again.send(&held("after", 0)).await;
    let r = receive(&mut again, &["after".into()], Duration::from_secs(3)).await;
    let took = r.done["after"] - sent;
    assert!(took < Duration::from_millis(600), "{took:?}");
    assert_eq!(r.of("after")[0].status, 200);
    // The orphans finished and gave their slots back.
    pool_settles(&state, (0, 0), Duration::from_millis(200)).await;
    let health = s.client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    // n dropped after running, 2 left the queue, 1 delivered.
    let counted = s
        .wait_metric(
            "plimsoll_requests_total",
            "relay",
            Duration::from_secs(1),
            |v| v == n as f64 + 3.0,
        )
        .await;
    assert!(
        counted.is_some(),
        "{}",
        s.metric("plimsoll_requests_total", "relay").await
    );
}

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
        &[(HOOK, "hold=relay")],
        "",
    ))
    .await;
    let r = receive(&mut ws, &["bad".into()], Duration::from_secs(2)).await;
    let problem: serde_json::Value = serde_json::from_slice(&r.body("bad")).unwrap();
    assert_eq!(
        (r.of("bad")[0].status, problem["code"].as_str()),
        (400, Some("invalid_parameter"))
    );
}

#[tokio::test]
async fn server_shutdown_cancels_a_relay_hold_and_closes_the_socket() {
    let s = TestServer::start(&[("PLIMSOLL_DRAIN_TIMEOUT_MS", "50")]).await;
    let state = s.state().clone();
    let mut ws = Ws::connect(&s).await;
    ws.send(&held("long", 60_000)).await;
    while state.relay.load().0 == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let started = Instant::now();
    state.shutdown.cancel();
    assert!(matches!(
        ws.recv_within(Duration::from_secs(2)).await,
        Some(Msg::Close)
    ));
    while state.relay.load().0 != 0 {
        assert!(started.elapsed() < Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    s.server.shutdown().await.unwrap();
}

#[cfg(feature = "mutants")]
mod mutants {
    use super::*;
    use plimsoll_server::Mutant;

    async fn start(mutant: Mutant) -> TestServer {
        TestServer::start_with(&[("RELAY_CONCURRENCY", "3")], true, |c| {
            c.with_mutant(mutant)
        })
        .await
    }

    #[tokio::test]
    async fn serial_dispatch_blocks_the_fast_request() {
        let s = start(Mutant::RelaySerial).await;
        let mut ws = Ws::connect(&s).await;
        ws.send(&held("slow", 300)).await;
        ws.send(&held("fast", 0)).await;
        let r = receive(
            &mut ws,
            &["slow".into(), "fast".into()],
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(r.order, ["slow", "fast"]);
    }

    #[tokio::test]
    async fn unbounded_pool_runs_everything_at_once() {
        let s = start(Mutant::RelayUnbounded).await;
        let mut ws = Ws::connect(&s).await;
        let ids = ids("u", 9);
        let (stop, sampler) = sample_pool(s.state().clone());
        for id in &ids {
            ws.send(&held(id, 200)).await;
        }
        receive(&mut ws, &ids, Duration::from_secs(5)).await;
        stop.store(true, Ordering::Relaxed);
        assert_eq!(sampler.await.unwrap().0, 9);
    }

    #[tokio::test]
    async fn split_frames_are_not_parseable() {
        let s = start(Mutant::RelaySplitFrames).await;
        let mut ws = Ws::connect(&s).await;
        ws.send(&envelope("c", "GET", "/v1/contract", &[], ""))
            .await;
        let Some(Msg::Text(t)) = ws.recv_within(Duration::from_secs(2)).await else {
            panic!("no message");
        };
        assert!(serde_json::from_str::<RelayResponse>(&t).is_err(), "{t}");
    }

    #[tokio::test]
    async fn leaked_slots_stay_busy_after_a_drop() {
        let s = start(Mutant::RelayLeakSlot).await;
        let state = s.state().clone();
        let mut ws = Ws::connect(&s).await;
        for id in ids("leak", 3) {
            ws.send(&held(&id, 100)).await;
        }
        while state.relay.load().0 != 3 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        drop(ws);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(state.relay.load().0, 3);
    }
}

#[test]
fn the_contract_keeps_the_relay_values_the_tests_assume() {
    let c = plimsoll_spec::Contract::embedded();
    let r = &c.clauses;
    assert!(r.r1.value.relay_concurrency >= 2);
    assert_eq!(c.api.relay.path, "/v1/relay");
    assert_eq!(c.hooks.header.to_ascii_lowercase(), HOOK);
}
