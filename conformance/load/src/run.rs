//! One run of a profile, whichever engine drives it: what it is asked to do ([`RunSpec`]) and
//! what it hands to the verdicts ([`RunOutput`]).

use std::borrow::Cow;
use std::time::{Duration, Instant};

use plimsoll_fault::rng::SplitMix64;

use super::Engine;
use super::scrape::{Gauges, read_metrics};
use super::stalls::Stall;

/// Everything a finished run hands to the verdicts.
pub struct RunOutput {
    /// Every attempt made: answered, abandoned, or without an answer.
    pub attempts: Vec<Attempt>,
    /// The load engine's own counts, as one evidence line.
    pub engine_summary: String,
    /// How long the engine ran, ms.
    pub elapsed_ms: f64,
    /// Burst only: a wave started before the previous one drained.
    pub drain_failed: bool,
    /// Think time users spent waiting when the profile ended (their last think, cut short).
    pub censored_think_ms: f64,
    /// The load generator's own stalls during the run ([`crate::stalls`]): watched on goose's
    /// runtime; none for Locust, whose processes are not watched.
    pub stalls: Vec<Stall>,
}

/// Settings of one goose run.
pub struct RunSpec {
    /// Base URL the load goes to: the server, or the balancer in front of the replicas.
    pub host: String,
    /// Closed-loop users: at most this many attempts in flight.
    pub users: usize,
    /// Seed of every random draw (think times, holds, abandonment), so a run can be repeated.
    pub seed: u64,
    /// The request every attempt sends.
    pub template: RequestTemplate,
    /// How long each attempt holds its slot, and whether it is abandoned.
    pub hold: HoldPlan,
    /// Where goose writes its own report (`--report`), if asked.
    pub report: Option<String>,
    /// How the attempts are paced: a rate for a duration, or waves.
    pub kind: RunKind,
    /// What sends the requests.
    pub engine: Engine,
    /// How long a user keeps an idle connection for its next request ([`keep_alive`]).
    pub keep_alive: Duration,
    /// The authorities `--ca-file` adds for an `https://` host.
    pub trust: plimsoll_conformance::remote::Trust,
}

/// How long the generator keeps an idle connection: half of B4's `head_timeout_ms`, the time
/// after an answer at which a server may close the connection. A request sent on a connection
/// the server is closing at that moment is lost (a POST is not retried, RFC 9112 §9.3.1): it was
/// seen as "no answer" from a conforming server, once in 551 attempts whose thinks straddled
/// the bound. A contract that declares no connection bounds gets [`UNDECLARED_KEEP_ALIVE`].
pub fn keep_alive(contract: &plimsoll_spec::Contract) -> Duration {
    (contract.connections.as_ref()).map_or(UNDECLARED_KEEP_ALIVE, |c| {
        Duration::from_millis(c.head_timeout_ms / 2)
    })
}

/// How long an idle connection is kept when the contract says nothing of its connections: a
/// second, below the idle timeouts servers commonly ship with (nginx's `keepalive_timeout` is
/// 75 s, Go's and hyper's have none), so a reconnect costs a little and no request is lost.
pub const UNDECLARED_KEEP_ALIVE: Duration = Duration::from_secs(1);

/// The `User-Agent` of the generator's requests.
pub const USER_AGENT: &str = concat!("plimsoll/", env!("CARGO_PKG_VERSION"));

/// How a run paces its attempts.
pub enum RunKind {
    /// Users think an exponential time before each attempt, for `duration` (steady, overload,
    /// soak).
    Rate {
        /// The think time's mean, ms.
        mean_think_ms: f64,
        /// How long users keep starting attempts, from the run's start.
        duration: Duration,
    },
    /// All users leave at once, wave after wave, each once the previous one drained (burst).
    Burst {
        /// How many waves; each user sends one attempt per wave.
        waves: usize,
        /// How the wave's leader waits for the pool to drain.
        drain: Box<DrainWait>,
    },
}

/// What happened to one attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// An HTTP answer.
    Status(u16),
    /// The client gave up on purpose (the soak profile's abandoned requests).
    Abandoned,
    /// No answer: connection error or an unplanned client timeout.
    Error(String),
}

/// One attempt, as the verdicts read it.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The user that sent it, numbered from 0.
    pub user: usize,
    /// Burst wave (0 in the rate profiles).
    pub wave: usize,
    /// Sent, in ms since the run's start.
    pub sent_ms: f64,
    /// Until the whole answer was read (or the client gave up).
    pub latency_ms: f64,
    /// The exponential think time drawn before it.
    pub think_ms: f64,
    /// The hold it asked for.
    pub hold_ms: u64,
    /// Whether the client was set to abandon it (it may still have been answered first).
    pub abandon_planned: bool,
    /// How the attempt ended: an answer, abandoned, or an error.
    pub outcome: Outcome,
    /// The refusal's hint as sent (`Retry-After`; refusals only).
    pub retry_after: Option<String>,
    /// Problem `code` (answers other than the served one only).
    pub code: Option<String>,
    /// Whether the answer is the pool's refusal (its status and declared body both).
    pub refused: bool,
    /// The request id (answers other than the served one only: it is evidence, and a soak keeps
    /// many answers).
    pub request_id: Option<String>,
    /// Server-Timing `queue` and `run`, ms.
    pub timing: Option<(f64, f64)>,
}

impl Attempt {
    /// The status answered, if there was an answer.
    pub fn status(&self) -> Option<u16> {
        match self.outcome {
            Outcome::Status(s) => Some(s),
            _ => None,
        }
    }
}

/// The request every attempt sends, and how its answer is read: the loaded pool's request (the
/// reference's lightest digitize request, or the hold recipe of another contract's pool), held
/// by the hook the contract declares for it, or holding on its own (a slow request).
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// The loaded pool's name, which the engines file the attempts under.
    pub name: String,
    /// The method sent.
    pub method: reqwest::Method,
    /// Path and query, relative to the host.
    pub path: String,
    /// Headers sent with every attempt (its `Content-Type` among them), by name.
    pub headers: Vec<(String, String)>,
    /// The body sent: small, so the hold is most of the request's time; shared by every
    /// attempt.
    pub body: bytes::Bytes,
    /// The hook that holds the request's worker: `HEADER: hold=STAGE:MS`; None: the request
    /// holds its worker on its own, for the time its contract declares.
    pub hook: Option<Hook>,
    /// The status a served attempt answers with.
    pub ok_status: u16,
    /// What a refusal of the pool answers; None: the pool never refuses.
    pub refusal: Option<plimsoll_spec::RefusalAnswer>,
    /// The header a request id is read from (non-served answers), if the contract names one.
    pub request_id_header: Option<String>,
    /// The Server-Timing header and its entries (queue, then run), read for the time an
    /// attempt waited and ran, if the contract declares them.
    pub server_timing: Option<(String, Vec<String>)>,
    /// The header a refusal's hint travels in, if the refusal declares one.
    pub hint_header: Option<String>,
}

/// A hook header a service honours by holding the request's worker for the time it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The header's name.
    pub header: String,
    /// The stage the `hold` directive names.
    pub stage: String,
}

impl RequestTemplate {
    /// The headers an attempt sends: the template's (its `Content-Type` among them) and, with
    /// a hook, the hook asking the server to hold the request's worker for `hold_ms` (a slow
    /// request holds for its own time, whatever `hold_ms`).
    fn headers(&self, hold_ms: u64) -> impl Iterator<Item = (&str, Cow<'_, str>)> {
        let hook = (self.hook.as_ref()).map(|h| {
            (
                h.header.as_str(),
                format!("hold={}:{hold_ms}", h.stage).into(),
            )
        });
        (self.headers.iter())
            .map(|(name, value)| (name.as_str(), Cow::Borrowed(value.as_str())))
            .chain(hook)
    }

    /// The request as a goose user's own connection sends it
    /// ([`UserConnection`](super::connection::UserConnection): `uri` is origin-form, the
    /// connection adds `Host`), held for `hold_ms`.
    pub fn http_request(
        &self,
        uri: &http::Uri,
        hold_ms: u64,
    ) -> Result<super::connection::OutgoingRequest, http::Error> {
        let builder = http::Request::builder()
            .method(self.method.clone())
            .uri(uri.clone())
            .header(http::header::USER_AGENT, USER_AGENT);
        (self.headers(hold_ms))
            .fold(builder, |b, (name, value)| b.header(name, value.as_ref()))
            .body(http_body_util::Full::new(self.body.clone()))
    }

    /// The whole request to the server at `base` through `client`, held for `hold_ms`.
    pub fn request(
        &self,
        client: &reqwest::Client,
        base: &str,
        hold_ms: u64,
    ) -> reqwest::RequestBuilder {
        let url = format!("{base}{}", self.path);
        (self.headers(hold_ms))
            .fold(
                client.request(self.method.clone(), url),
                |b, (name, value)| b.header(name, value.as_ref()),
            )
            .body(self.body.clone())
    }

    /// Whether an answer (`status`, `body`) is the pool's refusal.
    pub fn refused(&self, status: u16, body: &[u8]) -> bool {
        (self.refusal.as_ref()).is_some_and(|r| r.mismatch(status, body).is_none())
    }

    /// Server-Timing `queue` and `run` of an answer, ms.
    pub fn server_timing(&self, headers: &reqwest::header::HeaderMap) -> Option<(f64, f64)> {
        let (header, entries) = self.server_timing.as_ref()?;
        let value = headers.get(header.as_str())?.to_str().ok()?;
        plimsoll_conformance::remote::server_timing_of(value, entries)
    }
}

/// The problem `code` of an error body, if it has one.
pub fn problem_code(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["code"].as_str().map(str::to_owned))
}

/// How long an attempt asks the server to hold its slot.
#[derive(Debug, Clone, Copy)]
pub enum Hold {
    /// Every attempt the same (burst: admitted requests must outlast the wave's arrival).
    Fixed {
        /// The hold, ms.
        ms: u64,
    },
    /// Drawn per attempt from an exponential of this mean, cut at `cap_ms` (far below every
    /// timeout).
    Exponential {
        /// The exponential's mean, ms.
        mean_ms: f64,
        /// The longest hold drawn, ms.
        cap_ms: u64,
    },
}

/// How long each attempt holds its slot and whether it is abandoned.
#[derive(Debug, Clone, Copy)]
pub struct HoldPlan {
    /// How long the hold is.
    pub hold: Hold,
    /// Share of attempts the client abandons halfway through the hold.
    pub abandon_fraction: f64,
    /// Time from sending until the hold starts (measured), ms: an abandoning client gives up
    /// at this plus half its hold.
    pub pre_hold_ms: f64,
}

impl HoldPlan {
    /// The hold of one attempt, and when its client gives up on it if it is to be abandoned.
    pub(super) fn draw(&self, rng: &mut SplitMix64) -> (u64, Option<Duration>) {
        let hold = match self.hold {
            Hold::Exponential { mean_ms, cap_ms } => {
                (rng.exponential(mean_ms).round() as u64).min(cap_ms)
            }
            Hold::Fixed { ms } => ms,
        };
        let abandon = self.abandon_fraction > 0.0 && rng.chance(self.abandon_fraction);
        let after = abandon.then(|| {
            Duration::from_secs_f64((self.pre_hold_ms + hold as f64 / 2.0).max(1.0) / 1000.0)
        });
        (hold, after)
    }
}

/// How the burst leader waits for the previous wave to be gone before the next.
#[derive(Debug, Clone)]
pub struct DrainWait {
    /// The client that reads `/metrics`.
    pub client: reqwest::Client,
    /// The exposition of the server the load goes to; None: it declares none, and the wave
    /// leaves as soon as the previous one was answered (its users wait for their answers).
    pub metrics_url: Option<String>,
    /// The pool's gauges, which must read 0.
    pub gauges: Gauges,
    /// How long to wait before saying the pool did not drain.
    pub timeout: Duration,
    /// How long between reads.
    pub poll: Duration,
}

impl DrainWait {
    /// Waits until the busy gauge and queue depth read 0; false if they never do in time.
    pub async fn wait(&self) -> bool {
        let Some(url) = &self.metrics_url else {
            return true;
        };
        let start = Instant::now();
        while start.elapsed() < self.timeout {
            if let Ok(v) = read_metrics(&self.client, url, &self.gauges).await
                && v.busy.unwrap_or(0.0) == 0.0
                && v.depth.unwrap_or(0.0) == 0.0
            {
                return true;
            }
            tokio::time::sleep(self.poll).await;
        }
        false
    }
}
