//! The relay's broken variants do break what the other relay tests rely on (test builds with
//! the `mutants` feature).

use plimsoll_server::Mutant;

use super::*;

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

#[tokio::test]
async fn wrong_id_swaps_two_responses_ready_together() {
    let s = start(Mutant::RelayWrongId).await;
    let mut ws = Ws::connect(&s).await;
    let traced = |id: &str, ms: u64| {
        let hook = format!("hold=relay:{ms}");
        let trace = format!("trace-{id}");
        envelope(
            id,
            "GET",
            "/healthz",
            &[(HOOK, hook.as_str()), ("x-request-id", trace.as_str())],
            "",
        )
    };
    // Both ready together, as the variant's name says: a hold of its own on `b` would only eat
    // into the variant's 100 ms pairing window, which a loaded machine's scheduling already
    // takes from (a 40 ms hold here once left `a` to go out alone).
    ws.send(&traced("a", 1)).await;
    ws.send(&traced("b", 1)).await;
    let r = receive(
        &mut ws,
        &["a".to_owned(), "b".to_owned()],
        Duration::from_secs(2),
    )
    .await;
    let trace_of = |id: &str| r.of(id)[0].headers["x-request-id"].clone();
    assert_eq!(trace_of("a"), "trace-b", "a's frame carries b's response");
    assert_eq!(trace_of("b"), "trace-a");

    // A response with no partner within the window goes out under its own id, late.
    let sent = Instant::now();
    ws.send(&traced("c", 0)).await;
    let f = ws.frame(Duration::from_secs(2)).await;
    assert_eq!(
        (f.request_id.as_str(), f.headers["x-request-id"].as_str()),
        ("c", "trace-c")
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(90),
        "{:?}",
        sent.elapsed()
    );
}
