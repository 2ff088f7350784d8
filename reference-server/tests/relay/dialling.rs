//! The bridge the way seed 003 runs it: it dials its relay. Here the test plays the relay (a
//! WebSocket listener on loopback) and, where it matters, the slow local handler (an HTTP
//! upstream that counts the requests it is serving on its own clock), so what is judged is what
//! the two ends saw, not the bridge's gauges.

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use futures_util::{SinkExt, StreamExt};
use plimsoll_spec::{MetricName, Pool};
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::*;

type RelaySocket = WebSocketStream<TcpStream>;

/// The relay's side: a listener the bridge dials.
struct Relay {
    listener: TcpListener,
}

impl Relay {
    async fn bind() -> Relay {
        Relay {
            listener: TcpListener::bind("127.0.0.1:0").await.unwrap(),
        }
    }

    fn url(&self) -> String {
        format!("ws://{}/relay", self.listener.local_addr().unwrap())
    }

    /// The bridge's next connection, within `limit`.
    async fn accept(&self, limit: Duration) -> RelaySocket {
        let (tcp, _) = tokio::time::timeout(limit, self.listener.accept())
            .await
            .expect("the bridge dials the relay in time")
            .unwrap();
        tokio_tungstenite::accept_async(tcp).await.unwrap()
    }
}

async fn send(ws: &mut RelaySocket, text: String) {
    ws.send(Message::Text(text.into())).await.unwrap();
}

/// The next response frame, within `limit`.
async fn frame(ws: &mut RelaySocket, limit: Duration) -> Option<RelayResponse> {
    let until = Instant::now() + limit;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                return Some(serde_json::from_str(text.as_str()).unwrap());
            }
            Ok(Some(Ok(_))) => {}
            _ => return None,
        }
    }
}

/// Frames until each of `n` requests has its final one, within `limit`.
async fn answers(ws: &mut RelaySocket, n: usize, limit: Duration) -> Vec<RelayResponse> {
    let until = Instant::now() + limit;
    let mut frames = Vec::new();
    let mut done = 0;
    while done < n {
        let left = until.saturating_duration_since(Instant::now());
        let Some(f) = frame(ws, left).await else {
            break;
        };
        done += usize::from(f.r#final);
        frames.push(f);
    }
    frames
}

async fn bridge_to(
    relay: &Relay,
    overrides: &[(&str, &str)],
    upstream: Option<String>,
) -> TestServer {
    let url = relay.url();
    TestServer::start_with(overrides, true, move |mut c| {
        c.relay_url = Some(url);
        c.relay_upstream = upstream;
        c
    })
    .await
}

/// The slow local handler: `GET /hold/MS?id=…` answers after MS ms; it counts the requests it
/// is serving at once and the order they arrived in.
#[derive(Default)]
struct Upstream {
    now: AtomicUsize,
    max: AtomicUsize,
    arrivals: Mutex<Vec<String>>,
}

impl Upstream {
    async fn serve(self: &Arc<Self>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let me = self.clone();
        let app = axum::Router::new().route(
            "/hold/{ms}",
            axum::routing::get(
                move |axum::extract::Path(ms): axum::extract::Path<u64>,
                      axum::extract::RawQuery(id): axum::extract::RawQuery| {
                    let me = me.clone();
                    async move {
                        me.arrivals.lock().unwrap().push(id.unwrap_or_default());
                        let now = me.now.fetch_add(1, Ordering::SeqCst) + 1;
                        me.max.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        me.now.fetch_sub(1, Ordering::SeqCst);
                        "held"
                    }
                },
            ),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }
}

#[tokio::test]
async fn the_bridge_dials_its_relay_and_answers_from_its_own_api() {
    let relay = Relay::bind().await;
    let _bridge = bridge_to(&relay, &[], None).await;
    let mut ws = relay.accept(Duration::from_secs(2)).await;
    send(&mut ws, envelope("d-1", "GET", "/healthz", &[], "")).await;
    let f = frame(&mut ws, Duration::from_secs(2))
        .await
        .expect("an answer");
    assert_eq!(
        (f.kind.as_str(), f.request_id.as_str(), f.status, f.r#final),
        (RELAY_RESPONSE, "d-1", 200, true)
    );
}

#[tokio::test]
async fn a_dropped_bridge_is_back_in_time_and_sends_no_orphan_on_the_new_socket() {
    let relay = Relay::bind().await;
    let bridge = bridge_to(&relay, &[], None).await;
    let within = Duration::from_millis(
        bridge
            .state()
            .config
            .contract
            .clauses()
            .r6
            .value
            .reconnect_within_ms,
    );
    let mut first = relay.accept(Duration::from_secs(2)).await;
    for i in 0..3 {
        send(&mut first, held(&format!("orphan-{i}"), 400)).await;
    }
    // Their workers are holding; the relay drops the bridge.
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(first);
    let dropped = Instant::now();
    let mut second = relay.accept(within + Duration::from_millis(500)).await;
    let back = dropped.elapsed();
    assert!(back <= within, "back after {back:?}, bound {within:?}");
    send(&mut second, envelope("fresh", "GET", "/healthz", &[], "")).await;
    // Past the orphans' holds: every frame on the new socket is the new request's.
    let mut seen = Vec::new();
    let until = Instant::now() + Duration::from_millis(800);
    while let Some(f) = frame(&mut second, until.saturating_duration_since(Instant::now())).await {
        seen.push(f.request_id);
    }
    assert_eq!(seen, ["fresh"]);
    let idle = bridge
        .wait_metric(
            MetricName::WorkersBusy,
            Some(Pool::Relay),
            Duration::from_secs(2),
            |v| v == 0.0,
        )
        .await;
    assert!(idle.is_some(), "the orphans' slots came back");
}

#[tokio::test]
async fn the_bridge_runs_at_most_its_pool_against_the_upstream_and_queues_the_rest() {
    let relay = Relay::bind().await;
    let upstream = Arc::new(Upstream::default());
    let base = upstream.serve().await;
    let bridge = bridge_to(&relay, &[], Some(base)).await;
    let n = bridge.relay_workers();
    let mut ws = relay.accept(Duration::from_secs(2)).await;
    let total = n * 2 + 2;
    for i in 0..total {
        send(
            &mut ws,
            envelope(&format!("u-{i}"), "GET", &format!("/hold/300?{i}"), &[], ""),
        )
        .await;
    }
    let frames = answers(&mut ws, total, Duration::from_secs(5)).await;
    let ok = frames
        .iter()
        .filter(|f| f.r#final && f.status == 200)
        .count();
    assert_eq!(ok, total, "{frames:?}");
    assert_eq!(
        upstream.max.load(Ordering::SeqCst),
        n,
        "the upstream's own count of requests at once"
    );
    // The third wave started after the first had ended: nothing beyond the pool ran early.
    let arrivals = upstream.arrivals.lock().unwrap().clone();
    let position = |i: usize| arrivals.iter().position(|a| *a == i.to_string()).unwrap();
    assert!((0..n).all(|i| position(i) < n), "{arrivals:?}");
}

#[tokio::test]
async fn an_upstream_that_does_not_answer_is_a_bad_gateway() {
    let relay = Relay::bind().await;
    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let _bridge = bridge_to(&relay, &[], Some(base)).await;
    let mut ws = relay.accept(Duration::from_secs(2)).await;
    send(&mut ws, envelope("gone", "GET", "/anything", &[], "")).await;
    let f = frame(&mut ws, Duration::from_secs(5))
        .await
        .expect("an answer");
    assert_eq!(
        (f.request_id.as_str(), f.status, f.r#final),
        ("gone", 502, true)
    );
    assert!(f.body_chunk.contains("did not answer"), "{}", f.body_chunk);
}
