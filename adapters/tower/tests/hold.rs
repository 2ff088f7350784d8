//! The layer inside a real concurrency limit, on loopback: a held request keeps its permit for
//! the hold, what the layer cannot honour is refused, a disabled layer holds nothing, and a
//! client that leaves gives its permit back at once.
//!
//! Timings are judged with wide margins (half a hold either side), never exactly: a held request
//! cannot answer before its hold, so the lower bounds are certain, and the upper ones leave
//! hundreds of milliseconds to a loaded machine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use http::HeaderName;
use plimsoll_tower::HoldLayer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceBuilder;
use tower::limit::{ConcurrencyLimitLayer, GlobalConcurrencyLimitLayer};

/// The hook header of these tests: any name a contract declares works.
const HEADER: &str = "x-test-hook";

/// The hold every timing test asks for: long beside loopback's latency, short for a test.
const HOLD: Duration = Duration::from_millis(800);

/// Every test ends within this, whatever the server does.
const BOUND: Duration = Duration::from_secs(20);

fn layer() -> HoldLayer {
    HoldLayer::new(HeaderName::from_static(HEADER))
}

/// An axum app of one route whose pool admits `limit` at once, the hold inside the limit;
/// `calls` counts the handler's runs.
///
/// `with_state(())` turns the handler into a route once, *before* the layers: axum otherwise
/// applies a route's layers again for every connection (`axum::serve` calls `with_state(())` per
/// connection), and `ConcurrencyLimitLayer` would then make one semaphore per connection.
async fn serve(limit: usize, hold: HoldLayer, calls: Arc<AtomicUsize>) -> SocketAddr {
    let app = Router::new()
        .route("/", get(counted(calls)))
        .with_state(())
        .route_layer(
            ServiceBuilder::new()
                .layer(ConcurrencyLimitLayer::new(limit))
                .layer(hold),
        );
    listen(app).await
}

/// A handler answering `done` that counts its runs in `calls`.
fn counted(
    calls: Arc<AtomicUsize>,
) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = &'static str> + Send>> + Clone {
    move || {
        let calls = calls.clone();
        Box::pin(async move {
            calls.fetch_add(1, Ordering::SeqCst);
            "done"
        })
    }
}

/// Serves `app` on a loopback port of its own.
async fn listen(app: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// The raw request, with the hook when given; `close` asks the server to close after answering.
fn request(path: &str, hook: Option<&str>, close: bool) -> String {
    let hook = hook.map_or(String::new(), |h| format!("{HEADER}: {h}\r\n"));
    let connection = if close { "Connection: close\r\n" } else { "" };
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n{connection}{hook}\r\n")
}

/// An answer as the client saw it.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    body: String,
    /// From the instant the caller gave.
    after: Duration,
}

/// One GET of `/` on its own connection, read to the end.
async fn send(addr: SocketAddr, hook: Option<String>, since: Instant) -> Answer {
    send_to(addr, "/", hook, since).await
}

/// One GET of `path` on its own connection, read to the end.
async fn send_to(addr: SocketAddr, path: &str, hook: Option<String>, since: Instant) -> Answer {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(request(path, hook.as_deref(), true).as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let after = since.elapsed();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a whole answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("content-type: ")
            .map(str::to_owned)
    });
    Answer {
        status,
        content_type,
        body: body.to_owned(),
        after,
    }
}

async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(BOUND, test)
        .await
        .expect("the test finished within its bound")
}

#[tokio::test]
async fn of_n_plus_one_held_requests_exactly_n_start_at_once() {
    bounded(async {
        const N: usize = 2;
        let calls = Arc::new(AtomicUsize::new(0));
        let addr = serve(N, layer(), calls.clone()).await;
        let hook = format!("hold=queue:{}", HOLD.as_millis());
        let start = Instant::now();
        let clients: Vec<_> = (0..=N)
            .map(|_| tokio::spawn(send(addr, Some(hook.clone()), start)))
            .collect();
        let mut after = Vec::new();
        for client in clients {
            let answer = client.await.unwrap();
            assert_eq!(answer.status, 200, "{answer:?}");
            assert_eq!(answer.body, "done");
            after.push(answer.after);
        }
        after.sort();
        let (first, last) = after.split_at(N);
        for t in first {
            assert!(*t >= HOLD, "answered before its hold: {after:?}");
            assert!(
                *t < HOLD * 3 / 2,
                "the first {N} did not start at once: {after:?}"
            );
        }
        assert!(
            last[0] >= HOLD * 3 / 2,
            "the last one held no permit's wait: {after:?}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), N + 1);
    })
    .await;
}

#[tokio::test]
async fn a_hook_the_layer_cannot_honour_gets_400_naming_it_and_the_handler_never_runs() {
    bounded(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let addr = serve(2, layer(), calls.clone()).await;
        for (hook, directive) in [
            ("hold=fill", "hold=fill"),
            ("fail=decode", "fail=decode"),
            ("hold=queue:10;panic=segment", "panic=segment"),
            ("alloc=64", "alloc=64"),
            ("explode=now", "explode=now"),
        ] {
            let answer = send(addr, Some(hook.to_owned()), Instant::now()).await;
            assert_eq!(answer.status, 400, "{hook}: {answer:?}");
            assert_eq!(
                answer.content_type.as_deref(),
                Some("application/problem+json")
            );
            let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
            assert_eq!(body["directive"], directive, "{hook}: {body}");
            assert_eq!(body["status"], 400);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    })
    .await;
}

#[tokio::test]
async fn a_disabled_layer_ignores_the_header_and_holds_nothing() {
    bounded(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let disabled =
            HoldLayer::from_lookup("HOOKS", HeaderName::from_static(HEADER), |_| None).unwrap();
        let addr = serve(1, disabled, calls.clone()).await;
        let long = format!("hold=queue:{}", (HOLD * 4).as_millis());
        for hook in [long.as_str(), "fail=decode", "not a hook"] {
            let answer = send(addr, Some(hook.to_owned()), Instant::now()).await;
            assert_eq!(answer.status, 200, "{hook}: {answer:?}");
            assert!(answer.after < HOLD, "{hook} was held: {answer:?}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    })
    .await;
}

#[tokio::test]
async fn a_client_that_leaves_ends_its_hold_and_frees_its_permit_at_once() {
    bounded(async {
        let calls = Arc::new(AtomicUsize::new(0));
        let addr = serve(1, layer(), calls.clone()).await;
        // Held far longer than the test waits: only its end can free the one permit.
        let held = HOLD * 20;
        let mut leaver = TcpStream::connect(addr).await.unwrap();
        let hook = format!("hold=queue:{}", held.as_millis());
        // Kept alive (no `Connection: close`), so the server watches the socket while it waits.
        leaver
            .write_all(request("/", Some(&hook), false).as_bytes())
            .await
            .unwrap();
        // While it holds, the pool is full: a plain request waits.
        let probe = tokio::time::timeout(HOLD, send(addr, None, Instant::now())).await;
        assert!(probe.is_err(), "the pool was not full: {probe:?}");
        drop(leaver);
        let start = Instant::now();
        let next = send(addr, None, start).await;
        assert_eq!(next.status, 200);
        assert!(
            next.after < HOLD * 2,
            "the permit came back only after {:?}",
            next.after
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "only the request after the one that left ran its handler"
        );
    })
    .await;
}

#[tokio::test]
async fn one_global_limit_holds_across_the_routes_of_a_pool() {
    bounded(async {
        let calls = Arc::new(AtomicUsize::new(0));
        // The example's shape: two routes, one pool of one worker, the hold inside it.
        let app = Router::new()
            .route("/a", get(counted(calls.clone())))
            .route("/b", get(counted(calls.clone())))
            .route_layer(
                ServiceBuilder::new()
                    .layer(GlobalConcurrencyLimitLayer::new(1))
                    .layer(layer()),
            );
        let addr = listen(app).await;
        let start = Instant::now();
        let hook = format!("hold=queue:{}", HOLD.as_millis());
        let held = tokio::spawn(send_to(addr, "/a", Some(hook), start));
        // Sent once the held one has surely taken the one permit.
        tokio::time::sleep(HOLD / 5).await;
        let plain = send_to(addr, "/b", None, start).await;
        let held = held.await.unwrap();
        assert_eq!((held.status, plain.status), (200, 200));
        assert!(
            plain.after >= HOLD,
            "/b did not wait for /a's hold: {held:?} {plain:?}"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    })
    .await;
}

/// When a plain request on `/b`, sent a quarter of a hold after `/a`'s held one, is answered
/// (timed from `/a`'s sending: one clock, so a late wake-up of the test cannot shorten it), in a
/// one-worker pool whose limit is an axum middleware awaiting a semaphore (it admits in its
/// future, not in `poll_ready`), with the hold inside the limit or outside it.
async fn plain_wait_beside_a_hold(hold_inside: bool) -> Duration {
    let permits = Arc::new(tokio::sync::Semaphore::new(1));
    let limit = axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let permits = permits.clone();
            async move {
                let _permit = permits.acquire().await.unwrap();
                next.run(request).await
            }
        },
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let routes = Router::new()
        .route("/a", get(counted(calls.clone())))
        .route("/b", get(counted(calls)));
    // ServiceBuilder lists layers outside in.
    let app = if hold_inside {
        routes.route_layer(ServiceBuilder::new().layer(limit).layer(layer()))
    } else {
        routes.route_layer(ServiceBuilder::new().layer(layer()).layer(limit))
    };
    let addr = listen(app).await;
    let hook = format!("hold=queue:{}", HOLD.as_millis());
    let start = Instant::now();
    let held = tokio::spawn(send_to(addr, "/a", Some(hook), start));
    tokio::time::sleep(HOLD / 4).await;
    let plain = send_to(addr, "/b", None, start).await;
    assert_eq!(plain.status, 200);
    assert_eq!(held.await.unwrap().status, 200);
    plain.after
}

#[tokio::test]
async fn the_hold_holds_a_permit_only_inside_a_limit_that_admits_in_its_future() {
    bounded(async {
        // Inside the limit the held request has the one permit: /b is answered after its hold.
        let inside = plain_wait_beside_a_hold(true).await;
        assert!(
            inside >= HOLD,
            "inside the limit, /b did not wait for the hold: answered {inside:?} after /a's sending"
        );
        // Outside it the hold takes no permit: /b is answered while /a is still held.
        let outside = plain_wait_beside_a_hold(false).await;
        assert!(
            outside < HOLD,
            "outside the limit, the hold took no permit yet /b waited for it: answered \
             {outside:?} after /a's sending"
        );
    })
    .await;
}
