//! R1–R6: the relay bridge (seed 003), judged from outside: one WebSocket to `{api.relay.path}`
//! per scenario (tokio-tungstenite), envelopes built from the contract, the relay pool's gauges
//! in `/metrics` (`pool="relay"`) sampled while the work runs. Holds are `hold=relay:MS` in the
//! envelope's hook header, applied by the relay worker while it holds its slot. Every wait is
//! bounded in count and in time.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{SinkExt, StreamExt};
use plimsoll_spec::relay::{
    RELAY_ERROR, RELAY_REQUEST, RELAY_RESPONSE, RelayRequest, RelayResponse,
};
use plimsoll_spec::{Design, Extents, HookDirective, Stage, Stitch, StitchCommand, Thread};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use super::{Ctx, ms};
use crate::target::{Target, metric_value};
use crate::verdict::{Lane, LaneOutcome};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The `pool` label of the relay workers in `/metrics`.
const POOL: &str = "relay";
const BUSY: &str = "plimsoll_workers_busy";
const QUEUED: &str = "plimsoll_queue_depth";
const LIMIT: &str = "plimsoll_workers_limit";
/// The hold of R1 and R6: long against loopback jitter, short for the run time.
const HOLD_MS: u64 = 400;
/// R2's slow request.
const SLOW_MS: u64 = 600;
/// R3: holds are multiples of this, shuffled.
const STEP_MS: u64 = 60;
/// R4: each wave's hold.
const WAVE_MS: u64 = 300;
/// Completion times are observed at the client: this much early/late is loopback noise.
const SLACK_MS: f64 = 30.0;
/// Sampling stops after this many samples whatever happens.
const MAX_SAMPLES: usize = 4000;
/// Problems quoted in a failure message; the rest are counted.
const MAX_QUOTED: usize = 6;

// ---------------------------------------------------------------------------------------------
// Talking to the relay
// ---------------------------------------------------------------------------------------------

fn relay_url(t: &Target) -> String {
    let base = if let Some(rest) = t.base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = t.base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        t.base.clone()
    };
    format!("{base}{}", t.expected.api.relay.path)
}

async fn connect(t: &Target) -> Result<(Ws, Duration), String> {
    let url = relay_url(t);
    let started = Instant::now();
    match tokio::time::timeout(
        Duration::from_secs(3),
        tokio_tungstenite::connect_async(url.as_str()),
    )
    .await
    {
        Err(_) => Err(format!("connecting to {url} took more than 3 s")),
        Ok(Err(e)) => Err(format!("connecting to {url}: {e}")),
        Ok(Ok((ws, _))) => Ok((ws, started.elapsed())),
    }
}

/// Waits (bounded) for the relay pool to be idle, then connects; records a failure and returns
/// None when the socket cannot be opened.
async fn open(t: &Target, c: &mut Ctx) -> Option<Ws> {
    let limit = t.stop_within() * 2 + Duration::from_millis(SLOW_MS);
    if let Err(e) = t.wait_metric(BUSY, POOL, limit, |v| v == 0.0).await {
        c.evidence
            .push(format!("relay pool not idle before the check: {e}"));
    }
    match connect(t).await {
        Ok((ws, took)) => {
            c.evidence
                .push(format!("{} opened in {:.1} ms", relay_url(t), ms(took)));
            Some(ws)
        }
        Err(e) => {
            c.fail(e);
            None
        }
    }
}

/// A random-enough token so ids never repeat across runs against one server.
fn nonce() -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u64) ^ 0x9E37_79B9_7F4A_7C15
}

/// xorshift64*: a small deterministic generator for shuffles.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

fn request(id: String, method: &str, path: &str) -> RelayRequest {
    RelayRequest {
        kind: RELAY_REQUEST.to_owned(),
        request_id: id,
        method: method.to_owned(),
        path: path.to_owned(),
        headers: BTreeMap::new(),
        body: String::new(),
    }
}

fn with_hold(t: &Target, mut r: RelayRequest, hold_ms: u64) -> RelayRequest {
    if hold_ms > 0 {
        let hook = plimsoll_spec::hooks::format_hooks(&[HookDirective::Hold {
            stage: Stage::Relay,
            ms: hold_ms,
        }]);
        r.headers.insert(t.hook_header().to_owned(), hook);
    }
    r
}

/// `GET {healthz}`, held `hold_ms` by the relay worker (0: not held).
fn healthz(t: &Target, id: String, hold_ms: u64) -> RelayRequest {
    with_hold(t, request(id, "GET", &t.expected.api.healthz.path), hold_ms)
}

/// Sends every envelope in one flush (they reach the server back to back, in order).
async fn send_all(ws: &mut Ws, requests: &[RelayRequest]) -> Result<Instant, String> {
    for r in requests {
        let text = serde_json::to_string(r).map_err(|e| format!("encoding an envelope: {e}"))?;
        ws.feed(Message::text(text))
            .await
            .map_err(|e| format!("sending an envelope: {e}"))?;
    }
    ws.flush()
        .await
        .map_err(|e| format!("sending envelopes: {e}"))?;
    Ok(Instant::now())
}

/// Everything one socket answered to a set of envelopes.
struct Exchange {
    /// Ids in send order, with when they were sent.
    sent: Vec<(String, Instant)>,
    ids: HashSet<String>,
    frames: HashMap<String, Vec<RelayResponse>>,
    /// When each id's final frame arrived.
    done: HashMap<String, Instant>,
    /// Ids in completion order.
    order: Vec<String>,
    messages: usize,
    problems: Vec<String>,
    problem_count: usize,
    /// Times a frame of another request arrived while a response was mid-stream.
    interleavings: usize,
    last_id: Option<String>,
    closed: Option<String>,
}

impl Exchange {
    fn new() -> Exchange {
        Exchange {
            sent: Vec::new(),
            ids: HashSet::new(),
            frames: HashMap::new(),
            done: HashMap::new(),
            order: Vec::new(),
            messages: 0,
            problems: Vec::new(),
            problem_count: 0,
            interleavings: 0,
            last_id: None,
            closed: None,
        }
    }

    fn problem(&mut self, p: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_QUOTED {
            self.problems.push(p);
        }
    }

    fn record_sent(&mut self, requests: &[RelayRequest], at: Instant) {
        for r in requests {
            self.ids.insert(r.request_id.clone());
            self.sent.push((r.request_id.clone(), at));
        }
    }

    /// One WebSocket text message.
    fn message(&mut self, text: &str, at: Instant) {
        self.messages += 1;
        let frame: RelayResponse = match serde_json::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                let shown: String = text.chars().take(60).collect();
                self.problem(format!(
                    "message {} is not a relay frame ({e}): `{shown}…`",
                    self.messages
                ));
                return;
            }
        };
        let id = frame.request_id.clone();
        if frame.kind == RELAY_ERROR {
            self.problem(format!(
                "relay-error for `{id}`: code {:?}, {}",
                frame.code.as_deref().unwrap_or(""),
                frame.body_chunk
            ));
            if self.ids.contains(&id) && !self.done.contains_key(&id) {
                self.done.insert(id.clone(), at);
                self.order.push(id.clone());
                self.frames.entry(id).or_default().push(frame);
            }
            return;
        }
        if frame.kind != RELAY_RESPONSE {
            self.problem(format!(
                "frame of type `{}` (expected `{RELAY_RESPONSE}`)",
                frame.kind
            ));
            return;
        }
        if !self.ids.contains(&id) {
            self.problem(format!(
                "a response for request_id `{id}`, which was never sent"
            ));
            return;
        }
        if self.done.contains_key(&id) {
            self.problem(format!(
                "frame seq {} for `{id}` after its final frame (answered twice?)",
                frame.seq
            ));
            return;
        }
        if let Some(last) = &self.last_id
            && *last != id
            && !self.done.contains_key(last)
        {
            self.interleavings += 1;
        }
        self.last_id = Some(id.clone());
        if frame.r#final {
            self.done.insert(id.clone(), at);
            self.order.push(id.clone());
        }
        self.frames.entry(id).or_default().push(frame);
    }

    fn complete(&self) -> bool {
        self.done.len() >= self.ids.len()
    }

    fn missing(&self) -> Vec<&str> {
        self.sent
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !self.done.contains_key(*id))
            .collect()
    }

    fn sent_at(&self, id: &str) -> Option<Instant> {
        self.sent.iter().find(|(i, _)| i == id).map(|(_, at)| *at)
    }

    /// Send to final frame.
    fn latency(&self, id: &str) -> Option<Duration> {
        Some(
            self.done
                .get(id)?
                .saturating_duration_since(self.sent_at(id)?),
        )
    }

    fn first(&self, id: &str) -> Option<&RelayResponse> {
        self.frames.get(id).and_then(|f| f.first())
    }

    fn status(&self, id: &str) -> Option<u16> {
        self.first(id).map(|f| f.status)
    }

    /// The reassembled body (base64 decoded when the first frame says so).
    fn body(&self, id: &str) -> Result<Vec<u8>, String> {
        let frames = self.frames.get(id).ok_or("no frames")?;
        let joined: String = frames.iter().map(|f| f.body_chunk.as_str()).collect();
        let base64 = frames
            .first()
            .and_then(|f| header(&f.headers, "content-transfer-encoding"))
            .is_some_and(|v| v.eq_ignore_ascii_case("base64"));
        if base64 {
            base64_decode(&joined)
        } else {
            Ok(joined.into_bytes())
        }
    }

    /// The target refused the hook header: the relay checks cannot hold work.
    fn hooks_refused(&self, t: &Target) -> bool {
        let code = t.expected.hooks.disabled_code.as_str();
        self.frames.keys().any(|id| {
            self.status(id) == Some(400)
                && self
                    .body(id)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .is_some_and(|v| v["code"] == code)
        })
    }

    /// Every sent id on the timeline.
    fn lanes(&self, c: &mut Ctx, label: &str) {
        let now = Instant::now();
        for (i, (id, sent)) in self.sent.iter().enumerate() {
            let status = self.status(id);
            let outcome = match (self.done.get(id), status) {
                (None, _) => LaneOutcome::TimedOut,
                (Some(_), Some(200..=299)) => LaneOutcome::Ok,
                _ => LaneOutcome::Failed,
            };
            c.lanes.push(Lane {
                label: format!("{label} #{i}"),
                request_id: Some(id.clone()),
                start_ms: c.ms(*sent),
                run_start_ms: None,
                end_ms: c.ms(self.done.get(id).copied().unwrap_or(now)),
                outcome,
                status,
            });
        }
    }
}

fn header<'a>(headers: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Reads until every sent id has its final frame, the socket closes, or `deadline`.
async fn receive(ws: &mut Ws, ex: &mut Exchange, deadline: Instant) {
    while !ex.complete() && ex.closed.is_none() {
        let message = match tokio::time::timeout_at(deadline.into(), ws.next()).await {
            Err(_) => return,
            Ok(None) => {
                ex.closed = Some("the server closed the socket".into());
                return;
            }
            Ok(Some(Err(e))) => {
                ex.closed = Some(format!("the socket failed: {e}"));
                return;
            }
            Ok(Some(Ok(m))) => m,
        };
        match message {
            Message::Text(text) => ex.message(text.as_str(), Instant::now()),
            Message::Binary(_) => ex.problem("a binary message; frames are JSON text".into()),
            Message::Close(frame) => {
                ex.closed = Some(format!("the server closed the socket ({frame:?})"));
            }
            _ => {}
        }
    }
}

/// Sends `requests` on `ws` and reads the answers until `limit` after sending.
async fn exchange(
    ws: &mut Ws,
    requests: &[RelayRequest],
    limit: Duration,
) -> Result<Exchange, String> {
    let mut ex = Exchange::new();
    let at = send_all(ws, requests).await?;
    ex.record_sent(requests, at);
    receive(ws, &mut ex, Instant::now() + limit).await;
    Ok(ex)
}

/// Records the protocol problems, missing answers and non-2xx statuses of an exchange as
/// failures; `Err(reason)` when the target refuses hooks (the caller skips).
fn judge(t: &Target, c: &mut Ctx, ex: &Exchange, limit: Duration) -> Result<(), String> {
    if ex.hooks_refused(t) {
        return Err(format!(
            "the target refuses {} in relayed requests (start it with {}=1): relay holds are needed",
            t.hook_header(),
            t.expected.hooks.env
        ));
    }
    if ex.problem_count > 0 {
        c.fail(format!(
            "{} protocol problem(s): {}{}",
            ex.problem_count,
            ex.problems.join("; "),
            if ex.problem_count > ex.problems.len() {
                "; …"
            } else {
                ""
            }
        ));
    }
    let missing = ex.missing();
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().copied().take(MAX_QUOTED).collect();
        c.fail(format!(
            "{} of {} requests not answered within {} ms{}: {}",
            missing.len(),
            ex.sent.len(),
            limit.as_millis(),
            ex.closed
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
            shown.join(", ")
        ));
    }
    let bad: Vec<String> = ex
        .sent
        .iter()
        .filter_map(|(id, _)| match ex.status(id) {
            Some(s) if !(200..300).contains(&s) => Some(format!("{id}: {s}")),
            _ => None,
        })
        .take(MAX_QUOTED)
        .collect();
    if !bad.is_empty() {
        c.fail(format!("relayed requests failed: {}", bad.join(", ")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The relay pool's gauges
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Default, Clone)]
struct Samples {
    count: usize,
    errors: usize,
    /// The relay busy series existed in at least one sample.
    present: bool,
    busy_max: f64,
    queued_max: f64,
    /// When the busy gauge first hit its maximum (ms after sampling began).
    busy_max_at_ms: f64,
}

struct Sampler {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Samples>,
}

/// Polls `/metrics` every `metrics_poll_interval_ms` until stopped (or `limit`, or
/// [`MAX_SAMPLES`]), keeping the maxima of the relay busy and queue gauges.
fn sample(t: &Arc<Target>, limit: Duration) -> Sampler {
    let stop = CancellationToken::new();
    let t = t.clone();
    let token = stop.clone();
    let task = tokio::spawn(async move {
        let poll = Duration::from_millis(t.expected.tolerances.metrics_poll_interval_ms.max(1));
        let url = t.url(&t.expected.api.metrics.path);
        let started = Instant::now();
        let mut s = Samples::default();
        while !token.is_cancelled() && started.elapsed() < limit && s.count < MAX_SAMPLES {
            let text = async { t.client.get(&url).send().await?.text().await };
            match tokio::time::timeout(Duration::from_secs(1), text).await {
                Ok(Ok(text)) => {
                    s.count += 1;
                    let busy = metric_value(&text, BUSY, POOL);
                    s.present |= busy.is_some();
                    let busy = busy.unwrap_or(0.0);
                    if busy > s.busy_max {
                        s.busy_max = busy;
                        s.busy_max_at_ms = ms(started.elapsed());
                    }
                    s.queued_max = s
                        .queued_max
                        .max(metric_value(&text, QUEUED, POOL).unwrap_or(0.0));
                }
                _ => s.errors += 1,
            }
            tokio::select! {
                () = token.cancelled() => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
        s
    });
    Sampler { stop, task }
}

impl Sampler {
    async fn finish(self) -> Samples {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

fn series_missing(c: &mut Ctx, s: &Samples) -> bool {
    if s.count == 0 {
        c.fail(format!(
            "/metrics could not be read while the relay worked ({} errors)",
            s.errors
        ));
        return true;
    }
    !c.require(s.present, || {
        format!("/metrics has no {BUSY}{{pool=\"{POOL}\"}} series")
    })
}

fn relay_workers(t: &Target) -> usize {
    t.expected.clauses.r1.value.relay_concurrency as usize
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

/// R1: N held envelopes plus extras: the busy gauge reaches N and never more; the extras queue
/// (never refused) and complete.
pub async fn r1(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t);
    let overflow = &t.expected.clauses.r1.value.overflow;
    let extra = (n / 2).max(2);
    let total = n + extra;
    c.expected = format!(
        "{BUSY}{{pool=\"{POOL}\"}} reaches {n} and never exceeds it while {total} envelopes (held {HOLD_MS} ms) are in flight; overflow `{overflow:?}`: all {total} answered 2xx"
    );
    let Some(mut ws) = open(t, c).await else {
        return;
    };
    let tag = nonce();
    let requests: Vec<_> = (0..total)
        .map(|i| healthz(t, format!("r1-{tag:x}-{i}"), HOLD_MS))
        .collect();
    let limit = Duration::from_millis(HOLD_MS * (total.div_ceil(n.max(1)) as u64 + 1))
        + Duration::from_secs(1);
    let sampler = sample(t, limit + Duration::from_secs(1));
    let ex = exchange(&mut ws, &requests, limit).await;
    let samples = sampler.finish().await;
    let _ = ws.close(None).await;
    let ex = match ex {
        Ok(ex) => ex,
        Err(e) => return c.fail(e),
    };
    ex.lanes(c, "held");
    if let Err(reason) = judge(t, c, &ex, limit) {
        return c.skip(reason);
    }
    let limit_gauge = t.metric(LIMIT, POOL).await.unwrap_or(f64::NAN);
    c.evidence
        .push(format!("{LIMIT}{{pool=\"{POOL}\"}} = {limit_gauge}"));
    c.evidence.push(format!(
        "{} gauge samples ({} errors); busy max {} first at {:.0} ms; queue depth max {}",
        samples.count, samples.errors, samples.busy_max, samples.busy_max_at_ms, samples.queued_max
    ));
    let last = ex
        .sent
        .iter()
        .filter_map(|(id, _)| ex.latency(id))
        .max()
        .unwrap_or_default();
    c.observed = format!(
        "busy gauge max {} (limit {n}) over {} samples; queue depth max {}; {}/{total} answered, the last after {:.0} ms",
        samples.busy_max,
        samples.count,
        samples.queued_max,
        ex.done.len(),
        ms(last)
    );
    if series_missing(c, &samples) {
        return;
    }
    let max = samples.busy_max;
    c.require(max <= n as f64, || {
        format!("{max} relay workers busy at once; the limit is {n}")
    });
    c.require(max >= n as f64, || {
        format!("the busy gauge never reached {n} with {total} held envelopes in flight (max {max}): the pool does not run {n} at once")
    });
}

/// R2: a slow (held) request, then a fast one on the same socket: the fast answer comes first,
/// long before the slow one ends.
pub async fn r2(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t);
    c.expected = format!(
        "a fast request sent after a slow one (held {SLOW_MS} ms) on the same socket is answered first, without waiting"
    );
    if n < 2 {
        return c.skip(format!(
            "R2 needs at least 2 relay workers; the contract has {n}"
        ));
    }
    let Some(mut ws) = open(t, c).await else {
        return;
    };
    let tag = nonce();
    let slow = format!("r2-{tag:x}-slow");
    let fast = format!("r2-{tag:x}-fast");
    let requests = [
        healthz(t, slow.clone(), SLOW_MS),
        healthz(t, fast.clone(), 0),
    ];
    let limit = Duration::from_millis(SLOW_MS * 2) + Duration::from_secs(1);
    let ex = exchange(&mut ws, &requests, limit).await;
    let _ = ws.close(None).await;
    let ex = match ex {
        Ok(ex) => ex,
        Err(e) => return c.fail(e),
    };
    ex.lanes(c, "r2");
    if let Err(reason) = judge(t, c, &ex, limit) {
        return c.skip(reason);
    }
    let (Some(fast_ms), Some(slow_ms)) = (ex.latency(&fast).map(ms), ex.latency(&slow).map(ms))
    else {
        return;
    };
    c.observed = format!(
        "fast answered after {fast_ms:.1} ms, slow after {slow_ms:.0} ms; completion order {:?}",
        ex.order
    );
    c.trials_ms.push(fast_ms);
    c.require(slow_ms + SLACK_MS >= SLOW_MS as f64, || {
        format!("the slow request was answered after {slow_ms:.0} ms, before its {SLOW_MS} ms hold: the hold was not applied, so nothing was in flight")
    });
    c.require(ex.order.first() == Some(&fast), || {
        format!("the fast request was answered after the slow one ({fast_ms:.0} ms vs {slow_ms:.0} ms): head-of-line blocking")
    });
    c.require(fast_ms < SLOW_MS as f64 / 2.0, || {
        format!("the fast request took {fast_ms:.0} ms while the slow one was in flight: it waited")
    });
}

/// R3: a shuffled schedule of holds; every response carries the id of a request that was sent,
/// each exactly once, and is that request's response (its echoed request id, and not before
/// its hold could have ended).
pub async fn r3(t: &Arc<Target>, c: &mut Ctx) {
    let count = 8usize;
    c.expected = format!(
        "{count} requests with a shuffled hold schedule (0–{} ms): every response matched by `{}` to a request that was sent, each exactly once",
        STEP_MS * (count as u64 - 1),
        t.expected.clauses.r3.value.match_by
    );
    let Some(mut ws) = open(t, c).await else {
        return;
    };
    let tag = nonce();
    let mut holds: Vec<u64> = (0..count as u64).map(|i| i * STEP_MS).collect();
    let mut rng = Rng(tag | 1);
    rng.shuffle(&mut holds);
    if holds.windows(2).all(|w| w[0] <= w[1]) {
        holds.reverse();
    }
    let id_header = t.request_id_header().to_owned();
    let f4 = &t.expected.clauses.f4.value;
    let mut echo = HashMap::new();
    let requests: Vec<RelayRequest> = holds
        .iter()
        .enumerate()
        .map(|(i, &hold)| {
            let id = format!("r3-{tag:x}-{i}");
            let mut r = healthz(t, id.clone(), hold);
            let trace = format!("r3{tag:x}x{i}");
            if f4.accepts(&trace) {
                r.headers.insert(id_header.clone(), trace.clone());
                echo.insert(id, trace);
            }
            r
        })
        .collect();
    let limit = Duration::from_millis(STEP_MS * count as u64 * 2) + Duration::from_secs(1);
    let ex = exchange(&mut ws, &requests, limit).await;
    let _ = ws.close(None).await;
    let ex = match ex {
        Ok(ex) => ex,
        Err(e) => return c.fail(e),
    };
    ex.lanes(c, "shuffled");
    if let Err(reason) = judge(t, c, &ex, limit) {
        return c.skip(reason);
    }
    c.evidence
        .push(format!("hold schedule in send order (ms): {holds:?}"));
    let mut echoed = 0;
    let mut early = Vec::new();
    for (r, &hold) in requests.iter().zip(&holds) {
        let id = &r.request_id;
        let Some(first) = ex.first(id) else { continue };
        if let (Some(want), Some(got)) = (echo.get(id), header(&first.headers, &id_header)) {
            if got == want {
                echoed += 1;
            } else {
                let owner = echo
                    .iter()
                    .find(|(_, v)| v.as_str() == got)
                    .map(|(k, _)| k.as_str())
                    .unwrap_or("no request");
                c.fail(format!("the response carrying request_id `{id}` is the response of {owner} ({id_header}: {got})"));
            }
        }
        if let Some(latency) = ex.latency(id)
            && ms(latency) + SLACK_MS < hold as f64
        {
            early.push(format!("{id} (held {hold} ms) after {:.0} ms", ms(latency)));
        }
    }
    if !early.is_empty() {
        c.fail(format!("responses arrived before their request's hold could end, so they answer another request: {}", early.join(", ")));
    }
    let position: HashMap<&str, usize> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| (r.request_id.as_str(), i))
        .collect();
    let order: Vec<usize> = ex
        .order
        .iter()
        .filter_map(|id| position.get(id.as_str()).copied())
        .collect();
    let inversions = order
        .iter()
        .enumerate()
        .map(|(i, a)| order[i + 1..].iter().filter(|b| *b < a).count())
        .sum::<usize>();
    c.evidence
        .push(format!("completion order (send positions): {order:?}"));
    c.observed = format!(
        "{}/{count} responses, each id once ({} frames); {inversions} pairs completed out of send order; {echoed}/{} echoed their {id_header}",
        ex.done.len(),
        ex.messages,
        echo.len()
    );
}

/// R4: overflow_factor × N held requests at once: all complete, never more than N at once (gauge
/// and timing), started in FIFO order (equal holds: completion comes in waves of N, each wave
/// the next N in send order).
pub async fn r4(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t).max(1);
    let factor = t.expected.clauses.r4.value.overflow_factor.max(1) as usize;
    let total = factor * n;
    c.expected = format!(
        "{total} ({factor} x {n}) simultaneous requests held {WAVE_MS} ms: all answered, at most {n} at once, started in send order ({factor} waves of {n})"
    );
    let Some(mut ws) = open(t, c).await else {
        return;
    };
    let tag = nonce();
    let requests: Vec<_> = (0..total)
        .map(|i| healthz(t, format!("r4-{tag:x}-{i}"), WAVE_MS))
        .collect();
    let limit = Duration::from_millis(WAVE_MS * (factor as u64 + 1)) + Duration::from_secs(1);
    let sampler = sample(t, limit + Duration::from_secs(1));
    let ex = exchange(&mut ws, &requests, limit).await;
    let samples = sampler.finish().await;
    let _ = ws.close(None).await;
    let ex = match ex {
        Ok(ex) => ex,
        Err(e) => return c.fail(e),
    };
    ex.lanes(c, "overflow");
    if let Err(reason) = judge(t, c, &ex, limit) {
        return c.skip(reason);
    }
    let origin = ex
        .sent
        .first()
        .map(|(_, at)| *at)
        .unwrap_or_else(Instant::now);
    // Inferred run intervals [done - hold, done], trimmed by the slack at both ends.
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for at in ex.done.values() {
        let end = ms(at.saturating_duration_since(origin));
        edges.push((end - WAVE_MS as f64 + SLACK_MS, 1));
        edges.push((end - SLACK_MS, -1));
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut overlap) = (0i32, 0i32);
    for (_, d) in &edges {
        now += d;
        overlap = overlap.max(now);
    }
    // FIFO: sorted by completion, the k-th group of n is the k-th n sent.
    let position: HashMap<&str, usize> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| (r.request_id.as_str(), i))
        .collect();
    let mut out_of_wave = Vec::new();
    let mut wave_ends = Vec::new();
    for (w, wave) in ex.order.chunks(n).enumerate() {
        for id in wave {
            if let Some(&p) = position.get(id.as_str())
                && p / n != w
            {
                out_of_wave.push(format!("#{p} finished in wave {w} (expected {})", p / n));
            }
        }
        if let Some(last) = wave.last().and_then(|id| ex.done.get(id)) {
            wave_ends.push(format!("{:.0}", ms(last.saturating_duration_since(origin))));
        }
    }
    c.evidence.push(format!(
        "waves ended at {} ms after sending",
        wave_ends.join(", ")
    ));
    c.evidence.push(format!(
        "{} gauge samples; busy max {}; queue depth max {}",
        samples.count, samples.busy_max, samples.queued_max
    ));
    c.observed = format!(
        "{}/{total} answered; busy gauge max {} and {overlap} at once by timing (limit {n}); {} of {total} out of FIFO start order",
        ex.done.len(),
        samples.busy_max,
        out_of_wave.len()
    );
    if series_missing(c, &samples) {
        return;
    }
    c.require(samples.busy_max <= n as f64, || {
        format!(
            "busy gauge reached {} with {total} requests in flight; the limit is {n}",
            samples.busy_max
        )
    });
    c.require(overlap as usize <= n, || {
        format!("response timing shows {overlap} requests running at once (each held {WAVE_MS} ms); the limit is {n}")
    });
    if !out_of_wave.is_empty() && ex.missing().is_empty() {
        let shown: Vec<&str> = out_of_wave
            .iter()
            .map(String::as_str)
            .take(MAX_QUOTED)
            .collect();
        c.fail(format!("start order is not FIFO: {}", shown.join(", ")));
    }
}

/// R5: several concurrent responses longer than `max_frame_body_bytes`: every message is a whole
/// frame, per request `seq` is gapless from 0 with `final` last, no chunk is over the limit, and
/// every reassembled body is identical to the same request made over plain HTTP.
pub async fn r5(t: &Arc<Target>, c: &mut Ctx) {
    let max = t.expected.clauses.r5.value.max_frame_body_bytes as usize;
    c.expected = format!(
        "concurrent responses over {max} bytes: every message parses as a frame, seq gapless from 0 with final last, chunks <= {max} bytes, bodies identical to plain HTTP"
    );
    // Reference bodies over plain HTTP.
    let api = &t.expected.api;
    // About 3 bytes a stitch in the binary formats, more in SVG: every export needs several frames.
    let design = serde_json::to_string(&zigzag((max / 2 + 1000).min(200_000))).unwrap_or_default();
    let mut kinds: Vec<(String, RelayRequest, Vec<u8>)> = Vec::new();
    match t.client.get(t.url(&api.contract.path)).send().await {
        Ok(r) if r.status().is_success() => {
            let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
            for i in 0..2 {
                kinds.push((
                    format!("contract-{i}"),
                    request(String::new(), "GET", &api.contract.path),
                    body.clone(),
                ));
            }
        }
        other => c.evidence.push(format!(
            "GET {} over HTTP failed ({other:?}); not relayed",
            api.contract.path
        )),
    }
    let exports = (t.expected.clauses.t1.value.export_workers as usize
        + t.expected.clauses.t2.value.export_queue_capacity as usize)
        .min(3);
    for format in api.export.formats.iter().take(exports) {
        let path = format!("{}?format={}", api.export.path, format.as_str());
        let content_type = api
            .export
            .content_types
            .first()
            .cloned()
            .unwrap_or_else(|| "application/json".into());
        let direct = t
            .client
            .post(t.url(&path))
            .header("content-type", &content_type)
            .body(design.clone())
            .send()
            .await;
        match direct {
            Ok(r) if r.status().is_success() => {
                let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
                let mut relayed = request(String::new(), "POST", &path);
                relayed.headers.insert("content-type".into(), content_type);
                relayed.body = design.clone();
                kinds.push((format.as_str().to_owned(), relayed, body));
            }
            other => c.evidence.push(format!(
                "POST {path} over HTTP failed ({:?}); not relayed",
                other.map(|r| r.status())
            )),
        }
    }
    if kinds.is_empty() {
        return c.fail(
            "no large response to relay: GET contract and every export failed over plain HTTP",
        );
    }
    let as_sent = |b: &[u8]| {
        if std::str::from_utf8(b).is_ok() {
            b.len()
        } else {
            b.len().div_ceil(3) * 4
        }
    };
    if kinds.iter().all(|(_, _, body)| as_sent(body) <= max) {
        return c.skip(format!(
            "no response body over {max} bytes could be produced to relay"
        ));
    }
    let Some(mut ws) = open(t, c).await else {
        return;
    };
    let tag = nonce();
    let mut requests = Vec::new();
    let mut want: HashMap<String, (String, Vec<u8>)> = HashMap::new();
    for (kind, mut r, body) in kinds {
        r.request_id = format!("r5-{tag:x}-{kind}");
        // The same short hold for all: their streams start together.
        requests.push(with_hold(t, r.clone(), 100));
        want.insert(r.request_id, (kind, body));
    }
    let limit = Duration::from_secs(3);
    let ex = exchange(&mut ws, &requests, limit).await;
    let _ = ws.close(None).await;
    let ex = match ex {
        Ok(ex) => ex,
        Err(e) => return c.fail(e),
    };
    if let Err(reason) = judge(t, c, &ex, limit) {
        return c.skip(reason);
    }
    let mut frames_total = 0;
    let mut largest = 0;
    let mut multi = 0;
    for r in &requests {
        let id = &r.request_id;
        let Some(frames) = ex.frames.get(id) else {
            continue;
        };
        let (kind, expected) = &want[id];
        frames_total += frames.len();
        multi += usize::from(frames.len() > 1);
        for (i, f) in frames.iter().enumerate() {
            largest = largest.max(f.body_chunk.len());
            if f.seq != i as u64 {
                c.fail(format!(
                    "{kind}: frame {i} has seq {} (gap or reorder)",
                    f.seq
                ));
                break;
            }
            if f.r#final != (i + 1 == frames.len()) {
                c.fail(format!(
                    "{kind}: final is {} on frame {i} of {}",
                    f.r#final,
                    frames.len()
                ));
                break;
            }
            if i > 0 && !f.headers.is_empty() {
                c.fail(format!(
                    "{kind}: headers on frame {i} (documented: first frame only)"
                ));
                break;
            }
            if f.body_chunk.len() > max {
                c.fail(format!(
                    "{kind}: frame {i} carries {} bytes, over {max}",
                    f.body_chunk.len()
                ));
                break;
            }
        }
        match ex.body(id) {
            Ok(body) if body == *expected => {}
            Ok(body) if kind.starts_with("contract") && same_json(&body, expected) => {}
            Ok(body) => c.fail(format!(
                "{kind}: reassembled body ({} bytes) differs from plain HTTP ({} bytes)",
                body.len(),
                expected.len()
            )),
            Err(e) => c.fail(format!("{kind}: body does not decode: {e}")),
        }
        c.evidence.push(format!(
            "{kind}: {} frame(s), {} bytes over HTTP",
            frames.len(),
            expected.len()
        ));
    }
    c.require(multi > 0, || {
        format!("no response was split: none of the bodies exceeded {max} bytes as sent")
    });
    c.observed = format!(
        "{} concurrent responses in {frames_total} frames ({multi} multi-frame), {} messages, {} interleavings; largest chunk {largest} bytes (limit {max}); {} protocol problem(s)",
        requests.len(),
        ex.messages,
        ex.interleavings,
        ex.problem_count
    );
}

/// R6: N held requests in flight, the socket dropped, a new one opened at once: its requests
/// complete, `/healthz` answers, the busy gauge returns to 0 within the B3 bound plus the hold,
/// and all N slots run at once again.
pub async fn r6(t: &Arc<Target>, c: &mut Ctx) {
    let n = relay_workers(t).max(1);
    let stop = t.stop_within();
    let bound = stop + Duration::from_millis(HOLD_MS);
    c.expected = format!(
        "after dropping a socket with {n} requests in flight (held {HOLD_MS} ms): a new socket at once, its requests answered, healthz 200, busy gauge 0 within {} ms, {n} slots usable",
        bound.as_millis()
    );
    let Some(mut first) = open(t, c).await else {
        return;
    };
    let tag = nonce();
    let orphans: Vec<_> = (0..n)
        .map(|i| healthz(t, format!("r6-{tag:x}-orphan-{i}"), HOLD_MS))
        .collect();
    let sent = match send_all(&mut first, &orphans).await {
        Ok(at) => at,
        Err(e) => return c.fail(e),
    };
    match t
        .wait_metric(BUSY, POOL, Duration::from_millis(HOLD_MS / 2), |v| {
            v >= n as f64
        })
        .await
    {
        Ok(took) => c.evidence.push(format!(
            "{n} orphans running {:.0} ms after sending",
            ms(took)
        )),
        Err(e) => c
            .evidence
            .push(format!("orphans not all seen running before the drop: {e}")),
    }
    // Gone without a close handshake, as a crashed or unplugged client would be.
    drop(first);
    let dropped = Instant::now();
    for i in 0..orphans.len() {
        c.cancelled_lane(format!("orphan #{i}"), sent, dropped);
    }
    let (mut second, reconnect) = match connect(t).await {
        Ok(ok) => ok,
        Err(e) => return c.fail(format!("reconnecting right after the drop: {e}")),
    };
    let fresh: Vec<_> = (0..2)
        .map(|i| healthz(t, format!("r6-{tag:x}-new-{i}"), 0))
        .collect();
    let limit = bound + Duration::from_millis(500);
    let ex = exchange(&mut second, &fresh, limit).await;
    let ex = match ex {
        Ok(ex) => ex,
        Err(e) => return c.fail(e),
    };
    ex.lanes(c, "after reconnect");
    if let Err(reason) = judge(t, c, &ex, limit) {
        return c.skip(reason);
    }
    let answered = fresh
        .iter()
        .filter_map(|r| ex.latency(&r.request_id))
        .max()
        .map(ms);
    let health = async {
        let r = t
            .client
            .get(t.url(&t.expected.api.healthz.path))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        Ok::<u16, String>(r.status().as_u16())
    };
    let health = tokio::time::timeout(Duration::from_secs(2), health)
        .await
        .unwrap_or_else(|_| Err("timed out".into()));
    c.require(health == Ok(200), || {
        format!(
            "{} after the reconnect: {health:?}",
            t.expected.api.healthz.path
        )
    });
    let left = bound.saturating_sub(dropped.elapsed()) + Duration::from_millis(SLACK_MS as u64);
    let idle = t.wait_metric(BUSY, POOL, left, |v| v == 0.0).await;
    let idle_ms = ms(dropped.elapsed());
    match &idle {
        Ok(_) => c.evidence.push(format!(
            "busy gauge 0 at {idle_ms:.0} ms after the drop (bound {} ms)",
            bound.as_millis()
        )),
        Err(e) => c.fail(format!(
            "relay slots not released after the drop: {e} (bound {} ms from the drop)",
            bound.as_millis()
        )),
    }
    let queued = t.metric(QUEUED, POOL).await.unwrap_or(f64::NAN);
    c.require(queued == 0.0, || {
        format!("{QUEUED}{{pool=\"{POOL}\"}} is {queued} after the drop")
    });
    // Capacity: n requests held briefly must all run at once (a leaked slot makes one wait).
    let short = 200u64;
    let probes: Vec<_> = (0..n)
        .map(|i| healthz(t, format!("r6-{tag:x}-cap-{i}"), short))
        .collect();
    let cap_limit = Duration::from_millis(short * 3) + Duration::from_millis(500);
    let capacity = if idle.is_ok() {
        exchange(&mut second, &probes, cap_limit).await.ok()
    } else {
        None
    };
    let _ = second.close(None).await;
    let mut usable = 0;
    if let Some(cap) = &capacity {
        usable = probes
            .iter()
            .filter(|r| {
                cap.status(&r.request_id)
                    .is_some_and(|s| (200..300).contains(&s))
            })
            .filter(|r| {
                cap.latency(&r.request_id)
                    .is_some_and(|l| ms(l) < short as f64 * 1.5)
            })
            .count();
        c.require(usable == n, || format!("capacity not recovered: {usable} of {n} held requests ran at once after the reconnect"));
    }
    c.observed = format!(
        "reconnected in {:.1} ms; new requests answered after {}; healthz {}; busy gauge {} at {idle_ms:.0} ms after the drop; {usable}/{n} slots usable",
        ms(reconnect),
        answered
            .map(|a| format!("{a:.0} ms"))
            .unwrap_or_else(|| "never".into()),
        health.map(|s| s.to_string()).unwrap_or_else(|e| e),
        if idle.is_ok() { "0" } else { "not 0" }
    );
}

/// A valid design of `stitches` stitch commands (one thread, a zigzag inside 100 x 100 mm), so
/// its exports are large enough to need several frames.
fn zigzag(stitches: usize) -> Design {
    let mut program: Vec<Stitch> = (0..stitches)
        .map(|i| Stitch {
            x: (i % 1000) as i32,
            y: if i % 2 == 0 {
                0
            } else {
                40 + ((i / 1000) % 50) as i32
            },
            cmd: StitchCommand::Stitch,
        })
        .collect();
    program.push(Stitch {
        x: 0,
        y: 0,
        cmd: StitchCommand::End,
    });
    Design {
        format: plimsoll_spec::design::DESIGN_FORMAT.to_owned(),
        width_mm: 100.0,
        height_mm: 100.0,
        threads: vec![Thread {
            color: "#204080".to_owned(),
        }],
        extents: Extents {
            min_x: 0,
            min_y: 0,
            max_x: 1000,
            max_y: 1000,
        },
        stitch_count: stitches as u64,
        stitches: program,
    }
}

fn same_json(a: &[u8], b: &[u8]) -> bool {
    match (
        serde_json::from_slice::<serde_json::Value>(a),
        serde_json::from_slice::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Standard base64 (padding optional, whitespace ignored).
fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in text.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => continue,
            c if c.is_ascii_whitespace() => continue,
            _ => return Err(format!("invalid base64 at offset {i}")),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if bits >= 6 {
        return Err("truncated base64".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_padded_and_rejects_garbage() {
        assert_eq!(base64_decode("Zm9vYmE=").unwrap(), b"fooba");
        assert_eq!(base64_decode("Zm9vYg==").unwrap(), b"foob");
        assert!(base64_decode("Zm9v!").is_err());
    }

    #[test]
    fn the_exchange_flags_unknown_duplicate_and_broken_frames() {
        let mut ex = Exchange::new();
        ex.record_sent(
            &[
                request("a".into(), "GET", "/"),
                request("b".into(), "GET", "/"),
            ],
            Instant::now(),
        );
        let frame = |id: &str, seq: u64, fin: bool| {
            serde_json::to_string(&RelayResponse {
                kind: RELAY_RESPONSE.into(),
                request_id: id.into(),
                seq,
                status: 200,
                headers: BTreeMap::new(),
                body_chunk: "x".into(),
                r#final: fin,
                code: None,
            })
            .unwrap()
        };
        let now = Instant::now();
        ex.message(&frame("a", 0, false), now);
        ex.message(&frame("b", 0, true), now);
        ex.message(&frame("a", 1, true), now);
        assert!(ex.complete());
        assert_eq!(ex.interleavings, 1);
        assert_eq!(ex.problem_count, 0);
        ex.message(&frame("a", 2, true), now);
        ex.message(&frame("zzz", 0, true), now);
        ex.message("{\"type\":\"relay-http-resp", now);
        assert_eq!(ex.problem_count, 3, "{:?}", ex.problems);
        assert_eq!(ex.order, ["b", "a"]);
        assert_eq!(ex.body("a").unwrap(), b"xx");
    }

    #[test]
    fn shuffles_are_permutations() {
        let mut v: Vec<u64> = (0..8).collect();
        Rng(12345).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>());
    }
}
