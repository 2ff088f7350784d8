//! Sockets that drop with work in flight (R6) and server shutdown.

use plimsoll_spec::{MetricName, Pool};

use super::*;

#[tokio::test]
async fn a_dropped_socket_releases_every_slot_and_a_new_socket_works_at_once() {
    let s = TestServer::start(&[]).await;
    let n = s.relay_workers();
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
            MetricName::RequestsTotal,
            Some(Pool::Relay),
            Duration::from_secs(1),
            |v| v == n as f64 + 3.0,
        )
        .await;
    assert!(
        counted.is_some(),
        "{}",
        s.metric(MetricName::RequestsTotal, Some(Pool::Relay)).await
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
