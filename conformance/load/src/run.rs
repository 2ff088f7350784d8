//! One run of a profile, whichever engine drives it: what it is asked to do ([`RunSpec`]) and
//! what it hands to the verdicts ([`RunOutput`]).

use std::time::{Duration, Instant};

use plimsoll_fault::rng::SplitMix64;

use super::Engine;
use super::scrape::read_metrics;

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
    /// The contract's status of an `overloaded` refusal (the goose users cannot borrow the
    /// contract; they tell refusals from other answers for the progress display).
    pub overloaded_status: u16,
    /// What sends the requests.
    pub engine: Engine,
    /// How long a user keeps an idle connection for its next request ([`keep_alive`]).
    pub keep_alive: Duration,
}

/// How long the generator keeps an idle connection: half of B4's `head_timeout_ms`, the time
/// after an answer at which a server may close the connection. A request sent on a connection
/// the server is closing at that moment is lost (a POST is not retried, RFC 9112 §9.3.1): it was
/// seen as "no answer" from a conforming server, once in 551 attempts whose thinks straddled
/// the bound.
pub fn keep_alive(contract: &plimsoll_spec::Contract) -> Duration {
    Duration::from_millis(contract.connections().head_timeout_ms / 2)
}

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
        drain: DrainWait,
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
    /// `Retry-After` as sent (refusals only).
    pub retry_after: Option<String>,
    /// Problem `code` (non-200 answers only).
    pub code: Option<String>,
    /// `X-Request-Id` (non-200 answers only: it is evidence, and a soak keeps many answers).
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

/// The request every attempt sends.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// Path and query, relative to the host.
    pub path: String,
    /// The `Content-Type` of [`body`](Self::body): the first the contract's digitize endpoint
    /// accepts.
    pub content_type: String,
    /// The image sent: the small sample PNG, so the hold is most of the request's time.
    pub body: Vec<u8>,
    /// The contract's hook header, which carries the hold.
    pub hook_header: String,
    /// The pipeline stage the hook holds (the contract's `load.hold_stage`).
    pub hold_stage: String,
    /// The contract's request id header, read from non-200 answers.
    pub request_id_header: String,
    /// The contract's Server-Timing header, read for `queue` and `run`.
    pub server_timing_header: String,
    /// The contract's Retry-After header, read from refusals.
    pub retry_after_header: String,
}

impl RequestTemplate {
    /// `builder` (a POST to [`path`](Self::path)) with the body, its content type and a hook
    /// asking the server to hold the request's slot for `hold_ms`.
    pub fn fill(&self, builder: reqwest::RequestBuilder, hold_ms: u64) -> reqwest::RequestBuilder {
        builder
            .header("content-type", self.content_type.as_str())
            .header(
                self.hook_header.as_str(),
                format!("hold={}:{hold_ms}", self.hold_stage),
            )
            .body(self.body.clone())
    }

    /// Server-Timing `queue` and `run` of an answer, ms.
    pub fn server_timing(&self, headers: &reqwest::header::HeaderMap) -> Option<(f64, f64)> {
        headers
            .get(self.server_timing_header.as_str())
            .and_then(|v| v.to_str().ok())
            .and_then(plimsoll_conformance::remote::parse_server_timing)
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
    /// The `/metrics` URL of the server the load goes to.
    pub metrics_url: String,
    /// The pool whose gauges must read 0.
    pub pool: String,
    /// How long to wait before saying the pool did not drain.
    pub timeout: Duration,
    /// How long between reads.
    pub poll: Duration,
}

impl DrainWait {
    /// Waits until the busy gauge and queue depth read 0; false if they never do in time.
    pub async fn wait(&self) -> bool {
        let start = Instant::now();
        while start.elapsed() < self.timeout {
            if let Ok(v) = read_metrics(&self.client, &self.metrics_url, &self.pool).await
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
