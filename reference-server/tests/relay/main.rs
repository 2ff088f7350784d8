//! The relay bridge (R1–R6) over a real loopback WebSocket. The client is a minimal RFC 6455
//! implementation (text frames, masked) so the server crate needs no WebSocket client dependency.

#[path = "../common/mod.rs"]
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

mod concurrency;
mod dialling;
mod errors;
mod lifecycle;
mod mutants;
mod streaming;

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

#[test]
fn the_contract_keeps_the_relay_values_the_tests_assume() {
    let c = plimsoll_spec::Contract::embedded();
    assert!(c.pool(plimsoll_spec::Pool::Relay).workers >= 2);
    assert_eq!(c.api().relay.path, "/v1/relay");
    assert_eq!(c.hooks().header.to_ascii_lowercase(), HOOK);
}
