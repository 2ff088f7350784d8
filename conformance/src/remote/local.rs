//! Where a relay performs the requests it relays, as the checker reaches and watches that place:
//! the one thing that differs between the ways a relay is checked. A relay check asks its
//! target's [`LocalHandler`] to hold a request, to count what runs, to name an answer; it never
//! asks which handler it has.
//!
//! Two today: [`TargetApi`], the target's own HTTP API behind its relay (held by its test hooks,
//! `hold=relay:MS`; watched through its gauges in `/metrics`), and [`CheckerUpstream`], the local
//! handler the checker plays for a bridge (held and counted by the checker itself, on its own
//! clock). A third way to hold a worker (a request the contract declares slow, a dependency the
//! checker plays) is one more implementation, not a branch in a check.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use plimsoll_spec::hooks::format_hooks;
use plimsoll_spec::relay::{RELAY_REQUEST, RelayRequest};
use plimsoll_spec::{
    Design, Extents, HookDirective, MetricName, Pool, Stage, Stitch, StitchCommand, Thread,
};
use reqwest::header::CONTENT_TYPE;

use super::sampler::Sampler;
use super::upstream::{Ask, ID_HEADER, Upstream, Visit};
use super::{Target, WaitError};

/// How long the health endpoint may take to answer after a relay socket was dropped (R6).
const HEALTH_WITHIN: Duration = Duration::from_secs(2);

/// A request to relay whose plain answer the checker knows, so the relayed one can be compared
/// byte for byte (R5).
#[derive(Debug, Clone)]
pub struct Known {
    /// A short name for the evidence.
    pub name: String,
    /// The envelope.
    pub request: RelayRequest,
    /// The body the plain request was answered with.
    pub body: Vec<u8>,
}

/// The place relayed requests are performed, as the relay checks reach and watch it.
pub trait LocalHandler: Send + Sync {
    /// What counts the relayed requests running at once, in words ("busy gauge", "requests at
    /// the upstream"), for expectations and evidence.
    fn counts(&self) -> &'static str;

    /// An envelope `id` (method GET) whose relay worker stays busy `hold` (zero: not held).
    fn held(&self, t: &Target, id: String, hold: Duration) -> RelayRequest;

    /// Makes `request` (sent with id `id`) name its answer: the response header that must carry
    /// the name, and the name, or `None` when this handler cannot name it (`trace` is a name the
    /// checker proposes, which a handler that echoes a client's id may carry).
    fn name_answer(
        &self,
        t: &Target,
        request: &mut RelayRequest,
        id: &str,
        trace: &str,
    ) -> (String, Option<String>);

    /// Waits, at most `limit`, until `holds` is true of how many relayed requests run now; how
    /// long that took.
    fn running<'a>(
        &'a self,
        t: &'a Target,
        limit: Duration,
        holds: &'a (dyn Fn(f64) -> bool + Send + Sync),
    ) -> BoxFuture<'a, Result<Duration, WaitError>>;

    /// Starts counting how many relayed requests run at once, until [`Sampler::finish`] (or
    /// `limit`).
    fn count(&self, t: &Arc<Target>, limit: Duration) -> Sampler;

    /// The ids of the relayed requests that reached the handler since `origin`, in arrival
    /// order, with when each sent its last chunk: `None` where the handler's arrivals cannot be
    /// seen (a gauge counts, it does not name).
    fn visits_since(&self, origin: Instant) -> Option<Vec<Visit>>;

    /// Requests that answer more than one frame's worth of body (`max` bytes), with the body
    /// each must reassemble to, and evidence lines about those that could not be had.
    fn large_bodies<'a>(
        &'a self,
        t: &'a Target,
        tag: u64,
        max: usize,
    ) -> BoxFuture<'a, (Vec<Known>, Vec<String>)>;

    /// The relay's waiting envelopes now, where a gauge shows them (`None`: not observable).
    fn queued<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, Option<f64>>;

    /// The relay pool's size as the handler's own gauge claims it (`None`: no such claim).
    fn claimed_limit<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, Option<f64>>;

    /// The status of the handler's health endpoint after a relay socket was dropped, or why it
    /// gave none (`None`: the handler has no health endpoint the checker reads; answers to new
    /// envelopes are its health).
    fn health<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, Option<Result<u16, String>>>;

    /// The header by which the handler's API authorises test hooks, when envelopes reach such an
    /// API (rule `relay-hooks`); `None`: they reach the checker, which reads no hooks.
    fn hook_header<'a>(&self, t: &'a Target) -> Option<&'a str>;

    /// Busy workers of the target's digitize pool now, as its gauge says (0 where the checker
    /// reads no gauge): what a check's gauge readings are taken against.
    fn busy_now<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, f64>;
}

/// An envelope for `method path`, no headers, no body.
pub fn envelope(id: String, method: &str, path: &str) -> RelayRequest {
    RelayRequest {
        kind: RELAY_REQUEST.to_owned(),
        request_id: id,
        method: method.to_owned(),
        path: path.to_owned(),
        headers: BTreeMap::new(),
        body: String::new(),
    }
}

/// The target's own HTTP API behind its relay: envelopes are held by the relay hook
/// (`hold=relay:MS`, rule `relay-hooks`) and counted by the relay pool's gauges.
#[derive(Debug, Clone, Copy, Default)]
pub struct TargetApi;

impl TargetApi {
    /// `r` with the hook holding its relay worker `hold` (zero: unchanged).
    fn with_hold(t: &Target, mut r: RelayRequest, hold: Duration) -> RelayRequest {
        if !hold.is_zero() {
            let directive = HookDirective::Hold {
                stage: Stage::Relay,
                ms: hold.as_millis() as u64,
            };
            r.headers
                .insert(t.hook_header().to_owned(), format_hooks(&[directive]));
        }
        r
    }

    /// The contract document over plain HTTP, twice: a body every API serves.
    async fn contract_twice(t: &Target, known: &mut Vec<Known>, notes: &mut Vec<String>) {
        let path = &t.expected.api().contract.path;
        match t.client.get(t.url(path)).send().await {
            Ok(r) if r.status().is_success() => {
                let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
                for i in 0..2 {
                    known.push(Known {
                        name: format!("contract-{i}"),
                        request: envelope(String::new(), "GET", path),
                        body: body.clone(),
                    });
                }
            }
            other => notes.push(format!(
                "GET {path} over HTTP failed ({other:?}); not relayed"
            )),
        }
    }

    /// A large design's exports over plain HTTP, as many formats as the export pool takes at
    /// once (at most 3).
    async fn exports(t: &Target, max: usize, known: &mut Vec<Known>, notes: &mut Vec<String>) {
        let api = t.expected.api();
        // About 3 bytes a stitch in the binary formats, more in SVG: every export needs several
        // frames.
        let design =
            serde_json::to_string(&zigzag((max / 2 + 1000).min(200_000))).unwrap_or_default();
        let exports = (t.workers(Pool::Export) + t.queue_capacity(Pool::Export)).min(3);
        let content_type = &api.export.content_types[0];
        for format in api.export.formats.iter().take(exports) {
            let path = format!("{}?format={}", api.export.path, format.as_str());
            let direct = t
                .client
                .post(t.url(&path))
                .header(CONTENT_TYPE, content_type)
                .body(design.clone())
                .send()
                .await;
            match direct {
                Ok(r) if r.status().is_success() => {
                    let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
                    let mut relayed = envelope(String::new(), &api.export.method, &path);
                    relayed
                        .headers
                        .insert(CONTENT_TYPE.as_str().to_owned(), content_type.clone());
                    relayed.body = design.clone();
                    known.push(Known {
                        name: format.as_str().to_owned(),
                        request: relayed,
                        body,
                    });
                }
                other => notes.push(format!(
                    "{} {path} over HTTP failed ({:?}); not relayed",
                    api.export.method,
                    other.map(|r| r.status())
                )),
            }
        }
    }
}

impl LocalHandler for TargetApi {
    fn counts(&self) -> &'static str {
        "busy gauge"
    }

    fn held(&self, t: &Target, id: String, hold: Duration) -> RelayRequest {
        let r = envelope(id, "GET", &t.expected.api().healthz.path);
        TargetApi::with_hold(t, r, hold)
    }

    fn name_answer(
        &self,
        t: &Target,
        request: &mut RelayRequest,
        _id: &str,
        trace: &str,
    ) -> (String, Option<String>) {
        // The API keeps a well-formed client id (F4) and answers with it.
        let header = t.request_id_header().to_owned();
        if !t.expected.clauses().f4.value.accepts(trace) {
            return (header, None);
        }
        request.headers.insert(header.clone(), trace.to_owned());
        (header, Some(trace.to_owned()))
    }

    fn running<'a>(
        &'a self,
        t: &'a Target,
        limit: Duration,
        holds: &'a (dyn Fn(f64) -> bool + Send + Sync),
    ) -> BoxFuture<'a, Result<Duration, WaitError>> {
        Box::pin(t.wait_metric(MetricName::WorkersBusy, Pool::Relay, limit, holds))
    }

    fn count(&self, t: &Arc<Target>, limit: Duration) -> Sampler {
        Sampler::gauges(t, limit)
    }

    fn visits_since(&self, _origin: Instant) -> Option<Vec<Visit>> {
        None
    }

    fn large_bodies<'a>(
        &'a self,
        t: &'a Target,
        tag: u64,
        max: usize,
    ) -> BoxFuture<'a, (Vec<Known>, Vec<String>)> {
        Box::pin(async move {
            let (mut known, mut notes) = (Vec::new(), Vec::new());
            TargetApi::contract_twice(t, &mut known, &mut notes).await;
            TargetApi::exports(t, max, &mut known, &mut notes).await;
            for k in &mut known {
                k.request.request_id = format!("r5-{tag:x}-{}", k.name);
                // The same short hold for all: their streams start together.
                let request = std::mem::replace(&mut k.request, envelope(String::new(), "", ""));
                k.request = TargetApi::with_hold(t, request, Duration::from_millis(100));
            }
            (known, notes)
        })
    }

    fn queued<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, Option<f64>> {
        Box::pin(async move {
            Some(
                t.metric(MetricName::QueueDepth, Pool::Relay)
                    .await
                    .unwrap_or(f64::NAN),
            )
        })
    }

    fn claimed_limit<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, Option<f64>> {
        Box::pin(async move {
            Some(
                t.metric(MetricName::WorkersLimit, Pool::Relay)
                    .await
                    .unwrap_or(f64::NAN),
            )
        })
    }

    fn health<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, Option<Result<u16, String>>> {
        Box::pin(async move {
            let get = t.client.get(t.url(&t.expected.api().healthz.path)).send();
            Some(match tokio::time::timeout(HEALTH_WITHIN, get).await {
                Ok(Ok(r)) => Ok(r.status().as_u16()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("timed out".to_owned()),
            })
        })
    }

    fn hook_header<'a>(&self, t: &'a Target) -> Option<&'a str> {
        Some(t.hook_header())
    }

    fn busy_now<'a>(&'a self, t: &'a Target) -> BoxFuture<'a, f64> {
        Box::pin(async move {
            t.metric(MetricName::WorkersBusy, Pool::Digitize)
                .await
                .unwrap_or(0.0)
        })
    }
}

/// The local handler the checker plays for a bridge: every relayed request is held and counted
/// by the checker, on its own clock, so nothing the bridge reports is read.
#[derive(Clone)]
pub struct CheckerUpstream(pub Arc<Upstream>);

/// The chunks of a streamed upstream body (each one frame's worth) and the gap between them: a
/// bridge that waits for the whole body sends its first frame only after the last gap.
pub const STREAM_CHUNKS: usize = 4;
/// The gap between a streamed body's chunks.
pub const STREAM_GAP: Duration = Duration::from_millis(300);

impl LocalHandler for CheckerUpstream {
    fn counts(&self) -> &'static str {
        "requests at the upstream"
    }

    fn held(&self, _t: &Target, id: String, hold: Duration) -> RelayRequest {
        let path = Ask::new(id.clone()).held(hold).path();
        envelope(id, "GET", &path)
    }

    fn name_answer(
        &self,
        _t: &Target,
        _request: &mut RelayRequest,
        id: &str,
        _trace: &str,
    ) -> (String, Option<String>) {
        // The upstream names every answer after the request's own id.
        (ID_HEADER.to_owned(), Some(id.to_owned()))
    }

    fn running<'a>(
        &'a self,
        _t: &'a Target,
        limit: Duration,
        holds: &'a (dyn Fn(f64) -> bool + Send + Sync),
    ) -> BoxFuture<'a, Result<Duration, WaitError>> {
        Box::pin(self.0.wait_in_flight(limit, move |n| holds(n as f64)))
    }

    fn count(&self, _t: &Arc<Target>, _limit: Duration) -> Sampler {
        Sampler::Upstream {
            upstream: self.0.clone(),
            origin: Instant::now(),
        }
    }

    fn visits_since(&self, origin: Instant) -> Option<Vec<Visit>> {
        Some(self.0.visits_since(origin))
    }

    fn large_bodies<'a>(
        &'a self,
        t: &'a Target,
        tag: u64,
        max: usize,
    ) -> BoxFuture<'a, (Vec<Known>, Vec<String>)> {
        // Streamed one frame's worth per chunk, as many at once as the relay runs (at most 4).
        let n = (t.expected.pool(Pool::Relay).workers as usize).clamp(1, 4);
        let known = (0..n)
            .map(|i| {
                let id = format!("r5-{tag:x}-stream{i}");
                let ask = Ask::new(id.clone()).streamed(STREAM_CHUNKS, max, STREAM_GAP);
                Known {
                    name: format!("stream{i}"),
                    request: envelope(id, "GET", &ask.path()),
                    body: ask.body(),
                }
            })
            .collect();
        Box::pin(std::future::ready((known, Vec::new())))
    }

    fn queued<'a>(&'a self, _t: &'a Target) -> BoxFuture<'a, Option<f64>> {
        Box::pin(std::future::ready(None))
    }

    fn claimed_limit<'a>(&'a self, _t: &'a Target) -> BoxFuture<'a, Option<f64>> {
        Box::pin(std::future::ready(None))
    }

    fn health<'a>(&'a self, _t: &'a Target) -> BoxFuture<'a, Option<Result<u16, String>>> {
        Box::pin(std::future::ready(None))
    }

    fn hook_header<'a>(&self, _t: &'a Target) -> Option<&'a str> {
        None
    }

    fn busy_now<'a>(&'a self, _t: &'a Target) -> BoxFuture<'a, f64> {
        Box::pin(std::future::ready(0.0))
    }
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
