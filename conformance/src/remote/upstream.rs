//! The checker as a bridge's local handler (seed 003's "slow local handler"): an HTTP server on
//! loopback that answers what each relayed request's path asks for — a hold, a body in chunks
//! with gaps — and times every request on the checker's own clock. The same server plays a
//! service's dependency (a pool's `hold.dependency`), holding the service's own calls as the
//! checks in flight ask ([`Upstream::dependency`]). When the checker plays both
//! ends of a bridge, the relay checks count concurrency and start order here, where a bridge
//! cannot misreport them (its gauges, if it has any, are only cross-checks).
//!
//! Everything is bounded whatever the bridge does: the visits kept, the connections served at
//! once, and every hold, gap and body a path can ask for.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::WaitError;

/// The path prefix of every request the checker asks a bridge to relay.
pub const PREFIX: &str = "/plimsoll/upstream/";
/// The response header naming the request an answer is for: a bridge that mixes up answers
/// relays it under the wrong `request_id`.
pub const ID_HEADER: &str = "x-plimsoll-upstream-id";
/// Visits kept; older ones are forgotten, so a bridge that floods the upstream cannot grow the
/// checker's memory.
const MAX_VISITS: usize = 10_000;
/// The id a service's own call to the checker's dependency is recorded under.
pub const DEPENDENCY_CALL: &str = "call";
/// What a failed dependency call is answered with (`500`).
pub const FAILED_CALL: &str = "the checker, playing this dependency, fails the call\n";
/// Connections served at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 256;
/// The most a path can ask for: a hold or gap, chunks, bytes per chunk.
const MAX_WAIT: Duration = Duration::from_secs(30);
const MAX_CHUNKS: usize = 64;
const MAX_CHUNK_BYTES: usize = 1 << 20;

/// What one relayed request asks of the upstream, written into its path so that any bridge —
/// which forwards path and query as they are — carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// Names the request; the checker uses the envelope's `request_id`.
    pub id: String,
    /// How long the upstream waits before it answers.
    pub hold: Duration,
    /// The body comes in this many chunks of `chunk_bytes`, `gap` apart.
    pub chunks: usize,
    /// Bytes per chunk.
    pub chunk_bytes: usize,
    /// Time between chunks: a slow body, which a bridge must stream as it comes.
    pub gap: Duration,
}

impl Ask {
    /// An answer at once, with a short body naming `id`. Ids must be path-safe (the checker's
    /// are letters, digits and `-`).
    pub fn new(id: impl Into<String>) -> Ask {
        Ask {
            id: id.into(),
            hold: Duration::ZERO,
            chunks: 1,
            chunk_bytes: 48,
            gap: Duration::ZERO,
        }
    }

    /// Answered only after `hold`.
    pub fn held(mut self, hold: Duration) -> Ask {
        self.hold = hold;
        self
    }

    /// The body in `chunks` chunks of `chunk_bytes`, the first at once and each next one `gap`
    /// later.
    pub fn streamed(mut self, chunks: usize, chunk_bytes: usize, gap: Duration) -> Ask {
        self.chunks = chunks;
        self.chunk_bytes = chunk_bytes;
        self.gap = gap;
        self
    }

    /// The path and query that ask for this.
    pub fn path(&self) -> String {
        format!(
            "{PREFIX}{}?hold_ms={}&chunks={}&chunk_bytes={}&gap_ms={}",
            self.id,
            self.hold.as_millis(),
            self.chunks,
            self.chunk_bytes,
            self.gap.as_millis()
        )
    }

    /// The ask a path carries, its numbers capped; None for a path not of this form.
    pub fn parse(path_and_query: &str) -> Option<Ask> {
        let rest = path_and_query.strip_prefix(PREFIX)?;
        let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
        if id.is_empty() || id.contains('/') {
            return None;
        }
        let mut ask = Ask::new(id);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=')?;
            let n: u64 = value.parse().ok()?;
            let wait = Duration::from_millis(n).min(MAX_WAIT);
            match key {
                "hold_ms" => ask.hold = wait,
                "gap_ms" => ask.gap = wait,
                "chunks" => ask.chunks = (n as usize).clamp(1, MAX_CHUNKS),
                "chunk_bytes" => ask.chunk_bytes = (n as usize).min(MAX_CHUNK_BYTES),
                _ => {}
            }
        }
        Some(ask)
    }

    /// Chunk `i` of the body: `chunk_bytes` of a pattern naming the id and the chunk, so a body
    /// relayed to the wrong request, or with chunks reordered or lost, cannot equal
    /// [`Ask::body`].
    pub fn chunk(&self, i: usize) -> Bytes {
        let pattern = format!("{}#{i};", self.id);
        Bytes::from(
            pattern
                .bytes()
                .cycle()
                .take(self.chunk_bytes)
                .collect::<Vec<u8>>(),
        )
    }

    /// The whole body the upstream answers.
    pub fn body(&self) -> Vec<u8> {
        (0..self.chunks).flat_map(|i| self.chunk(i)).collect()
    }
}

/// The holds of the held requests in flight: what a dependency's call is held for; and whether
/// calls fail (F1 provoking a pool's failure).
#[derive(Debug, Default)]
pub struct HoldBook {
    open: Mutex<Vec<Duration>>,
    /// Failure tickets alive: while any is, every call is answered `500` at once.
    failing: AtomicUsize,
}

impl HoldBook {
    fn open(&self) -> MutexGuard<'_, Vec<Duration>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a hold of `hold` until the ticket is dropped (the request answered or abandoned).
    pub fn hold(self: &Arc<Self>, hold: Duration) -> HoldTicket {
        self.open().push(hold);
        HoldTicket {
            book: self.clone(),
            hold,
        }
    }

    /// Fails every call, at once with `500`, until the ticket is dropped.
    pub fn fail(self: &Arc<Self>) -> FailTicket {
        self.failing.fetch_add(1, Ordering::SeqCst);
        FailTicket { book: self.clone() }
    }

    /// Whether calls fail now.
    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::SeqCst) > 0
    }

    /// The longest hold open now; zero when none is (a plain request is answered at once).
    pub fn longest(&self) -> Duration {
        self.open().iter().copied().max().unwrap_or_default()
    }
}

/// A hold open in a [`HoldBook`] while this lives.
#[derive(Debug)]
pub struct HoldTicket {
    book: Arc<HoldBook>,
    hold: Duration,
}

impl Drop for HoldTicket {
    fn drop(&mut self) {
        let mut open = self.book.open();
        if let Some(i) = open.iter().position(|h| *h == self.hold) {
            open.swap_remove(i);
        }
    }
}

/// Calls fail while this lives ([`HoldBook::fail`]).
#[derive(Debug)]
pub struct FailTicket {
    book: Arc<HoldBook>,
}

impl Drop for FailTicket {
    fn drop(&mut self) {
        self.book.failing.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One request the upstream received, on the checker's clock.
#[derive(Debug, Clone)]
pub struct Visit {
    /// The request's [`Ask::id`], read back from its path.
    pub id: String,
    /// When the request reached the upstream: the start of its run at the bridge's end.
    pub arrived: Instant,
    /// When the last chunk of the body was handed to the connection.
    pub last_chunk: Option<Instant>,
    /// When the request ended: its body sent, or its connection gone.
    pub ended: Option<Instant>,
    /// The whole body was sent.
    pub completed: bool,
}

#[derive(Default)]
struct Log {
    visits: VecDeque<Visit>,
    /// Visits forgotten so far: the sequence number of `visits[0]`.
    forgotten: u64,
    in_flight: usize,
    /// Requests whose path asked for nothing this upstream serves.
    strays: u64,
}

impl Log {
    fn get(&mut self, seq: u64) -> Option<&mut Visit> {
        let i = seq.checked_sub(self.forgotten)?;
        self.visits.get_mut(usize::try_from(i).ok()?)
    }
}

#[derive(Default)]
struct Shared {
    log: Mutex<Log>,
    changed: Notify,
    /// As a service's dependency, the holds that every call of the service's own (any path not
    /// of [`Ask`]'s form) is held by; else such a path is a stray.
    holds: Option<Arc<HoldBook>>,
}

impl Shared {
    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arrive(self: &Arc<Shared>, id: &str) -> InFlight {
        let mut log = self.log();
        if log.visits.len() == MAX_VISITS {
            log.visits.pop_front();
            log.forgotten += 1;
        }
        log.visits.push_back(Visit {
            id: id.to_owned(),
            arrived: Instant::now(),
            last_chunk: None,
            ended: None,
            completed: false,
        });
        log.in_flight += 1;
        let seq = log.forgotten + log.visits.len() as u64 - 1;
        drop(log);
        self.changed.notify_waiters();
        InFlight {
            shared: self.clone(),
            seq,
        }
    }
}

/// A request in flight at the upstream: its end is recorded when this is dropped (body sent, or
/// the bridge's connection gone mid-hold or mid-body).
struct InFlight {
    shared: Arc<Shared>,
    seq: u64,
}

impl InFlight {
    fn mark(&self, f: impl FnOnce(&mut Visit)) {
        if let Some(visit) = self.shared.log().get(self.seq) {
            f(visit);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut log = self.shared.log();
        log.in_flight -= 1;
        if let Some(visit) = log.get(self.seq) {
            visit.ended = Some(Instant::now());
        }
        drop(log);
        self.shared.changed.notify_waiters();
    }
}

/// The upstream: listening until dropped.
pub struct Upstream {
    url: String,
    shared: Arc<Shared>,
    serving: tokio::task::JoinHandle<()>,
}

impl Upstream {
    /// Listens on `addr` (port 0: a free one) and starts serving.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Upstream> {
        Upstream::serving(addr, None).await
    }

    /// Listens on `addr` as a service's dependency: every call on a path of the service's own
    /// is held for the longest hold `holds` has open when it arrives (answered at once when it
    /// has none), and recorded as a visit like any other.
    pub async fn dependency(addr: SocketAddr, holds: Arc<HoldBook>) -> std::io::Result<Upstream> {
        Upstream::serving(addr, Some(holds)).await
    }

    async fn serving(addr: SocketAddr, holds: Option<Arc<HoldBook>>) -> std::io::Result<Upstream> {
        let listener = TcpListener::bind(addr).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            holds,
            ..Shared::default()
        });
        Ok(Upstream {
            url,
            serving: tokio::spawn(serve(listener, shared.clone())),
            shared,
        })
    }

    /// The base URL a bridge is told to relay to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.shared.log().in_flight
    }

    /// Requests whose path this upstream does not serve, so far.
    pub fn strays(&self) -> u64 {
        self.shared.log().strays
    }

    /// The visits that arrived at or after `origin`, in arrival order.
    pub fn visits_since(&self, origin: Instant) -> Vec<Visit> {
        let log = self.shared.log();
        log.visits
            .iter()
            .filter(|v| v.arrived >= origin)
            .cloned()
            .collect()
    }

    /// Waits until the number in flight satisfies `ok`, at most `limit`; how long it took.
    pub async fn wait_in_flight(
        &self,
        limit: Duration,
        ok: impl Fn(usize) -> bool,
    ) -> Result<Duration, WaitError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.shared.changed.notified();
            let now = self.in_flight();
            if ok(now) {
                return Ok(started.elapsed());
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return Err(WaitError::InFlight {
                    in_flight: now,
                    limit,
                });
            }
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// The most visits that were in flight at one instant (a visit not ended yet runs until now),
/// and when that was first reached.
pub fn max_overlap(visits: &[Visit]) -> (usize, Option<Instant>) {
    let now = Instant::now();
    let mut edges: Vec<(Instant, i32)> = Vec::with_capacity(visits.len() * 2);
    for v in visits {
        edges.push((v.arrived, 1));
        edges.push((v.ended.unwrap_or(now), -1));
    }
    // An end and an arrival at the same instant do not overlap.
    edges.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut running, mut max, mut at) = (0i32, 0i32, None);
    for (when, d) in edges {
        running += d;
        if running > max {
            max = running;
            at = Some(when);
        }
    }
    (max.max(0) as usize, at)
}

/// Accepts connections, at most [`MAX_CONNECTIONS`] at once; every connection ends with this
/// task (the set is dropped with it).
async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        while connections.try_join_next().is_some() {}
        let shared = shared.clone();
        connections.spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(&shared, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// Answers one request as its path asks: hold, then the body chunk by chunk.
async fn answer(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    if let (None, Some(holds)) = (Ask::parse(path), &shared.holds)
        && holds.failing()
    {
        // A failed call: seen (its visit begins and ends now), answered at once.
        let _call = shared.arrive(DEPENDENCY_CALL);
        let text = Bytes::from_static(FAILED_CALL.as_bytes());
        return plain(StatusCode::INTERNAL_SERVER_ERROR, Full::new(text).boxed());
    }
    let ask = match (Ask::parse(path), &shared.holds) {
        (Some(ask), _) => Some(ask),
        (None, Some(holds)) => Some(Ask::new(DEPENDENCY_CALL).held(holds.longest().min(MAX_WAIT))),
        (None, None) => None,
    };
    let Some(ask) = ask else {
        shared.log().strays += 1;
        let text = format!("the checker's upstream serves only {PREFIX}…, not {path}");
        return plain(StatusCode::NOT_FOUND, Full::new(Bytes::from(text)).boxed());
    };
    let in_flight = shared.arrive(&ask.id);
    tokio::time::sleep(ask.hold).await;
    let id = HeaderValue::from_str(&ask.id).ok();
    let chunks =
        futures_util::stream::unfold((0, ask, in_flight), |(i, ask, in_flight)| async move {
            if i >= ask.chunks {
                in_flight.mark(|v| v.completed = true);
                return None;
            }
            if i > 0 {
                tokio::time::sleep(ask.gap).await;
            }
            if i + 1 == ask.chunks {
                in_flight.mark(|v| v.last_chunk = Some(Instant::now()));
            }
            let chunk = Ok::<_, Infallible>(Frame::data(ask.chunk(i)));
            Some((chunk, (i + 1, ask, in_flight)))
        });
    let mut response = plain(StatusCode::OK, StreamBody::new(chunks).boxed());
    if let Some(id) = id {
        response.headers_mut().insert(ID_HEADER, id);
    }
    response
}

fn plain(status: StatusCode, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_survives_its_path() {
        let ask = Ask::new("r1-ab-3")
            .held(Duration::from_millis(400))
            .streamed(3, 100, Duration::from_millis(50));
        assert_eq!(Ask::parse(&ask.path()), Some(ask.clone()));
        assert_eq!(ask.body().len(), 300);
        assert!(Ask::parse("/v1/healthz").is_none());
    }

    #[test]
    fn a_path_cannot_ask_for_more_than_the_caps() {
        let ask = Ask::parse(&format!(
            "{PREFIX}x?hold_ms=99999999&chunks=100000&chunk_bytes=999999999"
        ))
        .unwrap();
        assert_eq!(ask.hold, MAX_WAIT);
        assert_eq!(ask.chunks, MAX_CHUNKS);
        assert_eq!(ask.chunk_bytes, MAX_CHUNK_BYTES);
    }

    #[test]
    fn bodies_of_two_requests_differ() {
        assert_ne!(Ask::new("a-1").body(), Ask::new("a-2").body());
        let ask = Ask::new("a").streamed(2, 10, Duration::ZERO);
        assert_ne!(ask.chunk(0), ask.chunk(1));
    }

    #[tokio::test]
    async fn the_upstream_counts_what_runs_at_once_and_when_it_ends() {
        let up = Upstream::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let origin = Instant::now();
        let client = reqwest::Client::new();
        let held = Ask::new("held").held(Duration::from_millis(200));
        let asks = [held.clone(), Ask::new("quick"), held.clone()];
        let gets = asks.iter().map(|a| {
            let url = format!("{}{}", up.url(), a.path());
            let client = client.clone();
            async move { client.get(url).send().await?.bytes().await }
        });
        let bodies = futures_util::future::join_all(gets).await;
        assert_eq!(bodies[1].as_ref().unwrap().as_ref(), asks[1].body());
        up.wait_in_flight(Duration::from_secs(1), |n| n == 0)
            .await
            .unwrap();
        let visits = up.visits_since(origin);
        assert_eq!(visits.len(), 3);
        assert!(visits.iter().all(|v| v.completed && v.ended.is_some()));
        let (max, _) = max_overlap(&visits);
        assert!((2..=3).contains(&max), "{max}");
        let stray = client
            .get(format!("{}/elsewhere", up.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(stray.status(), 404);
        assert_eq!(up.strays(), 1);
    }

    #[test]
    fn overlap_of_intervals() {
        let t = Instant::now();
        let at = |ms| t + Duration::from_millis(ms);
        let visit = |a, e| Visit {
            id: String::new(),
            arrived: at(a),
            last_chunk: None,
            ended: Some(at(e)),
            completed: true,
        };
        assert_eq!(max_overlap(&[visit(0, 10), visit(10, 20)]).0, 1);
        assert_eq!(max_overlap(&[visit(0, 10), visit(5, 20), visit(6, 7)]).0, 3);
    }
}
