//! The service a contract declares, as data (contract language 2): its pools of workers, each
//! with its routes and what it promises (workers, queue, deadline, memory cap, cancellation), the
//! refusals a full pool answers with and the hint they carry, and the bounds on connections and
//! uploads. The clauses judge these values; no clause names a pool of its own.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Override;
use crate::{ClauseId, ErrorCode, Stage, StageName};

/// A pool of workers (`[pools.NAME]`): the requests of its routes share its workers and its
/// queue, and its limits bound each of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// The pool's name in the docs' prose (`Digitize`); the table's key is its id.
    pub title: String,
    /// The requests the pool serves: each route's method and path pattern. A pool with none is
    /// fed otherwise (the relay's pool runs envelopes, not routes).
    #[serde(default)]
    pub routes: Vec<Route>,
    /// How many requests run at once (T1; the relay's R1).
    pub workers: u32,
    /// Where a request waits when every worker is busy (T2).
    pub queue: Queue,
    /// How long a request may take, counted from its arrival at the pool (its body read): past
    /// it the pool's timeout answer (B1). None: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// What a request past `deadline_ms` is answered: a key of `[refusals]` (its status, body
    /// and hint), as a queue timeout's is. Another service's contract names it with its
    /// deadline; the reference surface's is its `timeout` error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_answer: Option<String>,
    /// The documented duration of the pool's reference workload, which the deadline must leave
    /// room for (B1's `headroom_factor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_ms: Option<u64>,
    /// The most memory one request may be charged (B2). None: no cap is promised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_cap_mb: Option<u64>,
    /// What a client's disconnect does to its request (B3). None: nothing is promised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<Cancellation>,
    /// The pool's stages, in order: what a failing or timed-out request names (F1, B1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
    /// The refusal (a key of `[refusals]`) a request gets when every worker and queue place is
    /// taken. None: the pool never refuses (its queue has no bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// What the workers count: requests in flight, or open connections. T1 judges either
    /// with idle keep-alive connections beside its burst.
    #[serde(default)]
    pub counts: Counts,
    /// Whose requests share the limit: everyone's, or each client's or each header value's.
    #[serde(default)]
    pub key: LimitKey,
    /// How the checker keeps one of the pool's workers busy on purpose: a slow request of the
    /// service's own, or a request carrying a hook the service honours. None: only the
    /// reference hook (`[hooks]`) can hold a worker, and without one the timing clauses are not
    /// applicable to this pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// Requests of the pool's routes the service must refuse as bad input, each with the
    /// answer it must get (F2): input validation as data, judged for any service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bad_requests: Vec<BadRequest>,
    /// Requests the contract says would need more than `memory_cap_mb`, each with the error
    /// answer it must get (B2): the memory cap as data, judged for any service. Its status is
    /// any error (400–599), its code optional, as a bad request's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub over_cap: Vec<BadRequest>,
    /// What the pool answers when the dependency it is held by (`hold.dependency`) fails: F1
    /// as data, judged for any service, the checker (as that dependency) failing a call. None:
    /// the contract promises nothing of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<DependencyFailure>,
    /// The pool's own series in the service's Prometheus exposition, as the service names them
    /// (T1 cross-checks them against what the client saw). None: the service exposes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<PoolMetrics>,
    /// Environment variables that replace a field of the pool at deployment (`field` is the
    /// field's dotted path within the pool, `queue.capacity`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
}

/// A pool's series in the service's own Prometheus text exposition, named and labelled as the
/// service names them (`pool_busy{pool="reports"}`): the target's report of itself, which the
/// checker only cross-checks against what it saw as a client. Each declared series must be
/// served and agree; one left out is not judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolMetrics {
    /// Where the exposition is served (`/metrics`).
    pub path: String,
    /// A gauge of the pool's requests running now: it must peak at the workers while a burst
    /// fills them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<Series>,
    /// A gauge of the pool's requests waiting for a worker: it must peak at the queue's places
    /// while a burst fills them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<Series>,
    /// A gauge of the pool's workers: it must read the contract's number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Series>,
    /// A counter of the pool's refusals: it must rise by the refusals the client received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Series>,
}

impl PoolMetrics {
    /// Each declared series with what it reports (`busy`), in a fixed order.
    pub fn declared(&self) -> impl Iterator<Item = (&'static str, &Series)> {
        [
            ("busy", &self.busy),
            ("queued", &self.queued),
            ("limit", &self.limit),
            ("refused", &self.refused),
        ]
        .into_iter()
        .filter_map(|(what, s)| Some((what, s.as_ref()?)))
    }
}

/// One series of a Prometheus exposition: a metric name and the labels that pick it out (a
/// sample matches when it carries every one of them; the matching samples are summed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Series {
    /// The metric's name, as exposed (`pool_busy`, `http_refused_total`).
    pub name: String,
    /// The labels the samples carry, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl std::fmt::Display for Series {
    /// As Prometheus writes it: `pool_busy{pool="reports"}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if !self.labels.is_empty() {
            let labels: Vec<String> = (self.labels.iter())
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            write!(f, "{{{}}}", labels.join(","))?;
        }
        Ok(())
    }
}

/// A route of a pool: a method and a path pattern (`/v1/items/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The HTTP method, as sent (`POST`).
    pub method: String,
    /// The path, `{name}` standing for one segment.
    pub path: String,
}

/// How the checker holds one of a pool's workers: `request`, which the service either answers
/// slowly on its own (a proxy's slow upstream, a report that takes seconds: `at_least_ms`),
/// holds as long as the checker asks through a hook header it honours (`hook`, as the
/// `plimsoll-tower` layer and the `plimsoll_asgi` middleware do), or holds while it waits for
/// a dependency the checker plays and answers as late as it likes (`dependency`: black-box,
/// nothing in the service knows of Plimsoll). Exactly one of the three.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hold {
    /// The request, as sent.
    pub request: Recipe,
    /// The least time the service takes to answer it, with a worker held throughout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least_ms: Option<u64>,
    /// The hook that holds it: the checker adds `HEADER: hold=STAGE:MS` with a time of its
    /// choosing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<HookHold>,
    /// The dependency the service calls while it serves the request, played by the checker,
    /// which answers each call as late as the hold needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<DependencyHold>,
}

/// A dependency a pool's requests call (an upstream API, a database behind HTTP), played by the
/// checker: the service is started with `env` set to `http://LISTEN`, and the checker listens
/// there during a run, holding each call's answer for as long as the held requests in flight
/// ask. The checker sees every call arrive, on its own clock, where a service cannot misreport
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DependencyHold {
    /// The environment variable the service reads the dependency's base URL from
    /// (`LOOKUP_URL`): for whoever starts it, who sets it to `http://` and `listen`.
    pub env: String,
    /// Where the checker listens as the dependency: an IP address and port (`127.0.0.1:18093`).
    pub listen: String,
}

impl DependencyHold {
    /// The base URL the service is given in `env`.
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }
}

/// F1 for a pool held by a dependency the checker plays: the answer a request gets when its
/// call to the dependency fails (the checker answers the call `500`), as a refusal's answer is
/// declared. A service that hides the failure (a stale answer served as fresh, a `200` with an
/// error inside) or reports it otherwise than it promises fails F1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DependencyFailure {
    /// The status the request is answered with: a server error (500–599).
    pub status: u16,
    /// What the answer's body is, declared as a refusal's: a JSON string at a pointer, an
    /// exact text, or a text it contains. None: any body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<RefusalBody>,
}

/// A hook header a service honours by holding the request for the time it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookHold {
    /// The header's name (`X-Plimsoll-Hook`).
    pub header: String,
    /// The stage the `hold` directive names: the service's own name for where it holds
    /// (lowercase letters, digits, `_` and `-`, starting with a letter, at most 64 bytes; a
    /// service with no stages of its own holds before its handler whatever the name).
    pub stage: StageName,
}

/// A request the checker sends, as data: method, path with its query, headers and body, and the
/// status its answer must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// The HTTP method (`GET`).
    pub method: String,
    /// The path and query, as sent (`/slow?ms=500`).
    pub path: String,
    /// Headers sent with it, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The body, as text (none: an empty body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body, read from a file beside the contract (a path relative to the contract's
    /// folder, never leaving it): for a binary body, an image or an archive. At most one of
    /// `body` and `body_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_file: Option<String>,
    /// `body_file`'s bytes, read once with the contract ([`crate::Contract::from_file`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub body_bytes: Option<std::sync::Arc<[u8]>>,
    /// The status a served request answers with.
    #[serde(default = "ok_status")]
    pub status: u16,
}

impl Recipe {
    /// `GET path`, with no header and no body, served `200`.
    pub fn get(path: &str) -> Recipe {
        Recipe {
            method: "GET".into(),
            path: path.to_owned(),
            headers: BTreeMap::new(),
            body: None,
            body_file: None,
            body_bytes: None,
            status: ok_status(),
        }
    }

    /// The body as sent: the text, or the file's bytes once read. An error names a
    /// `body_file` that was not read (a contract parsed from text, not loaded from its file).
    pub fn body(&self) -> Result<std::borrow::Cow<'_, [u8]>, String> {
        match (&self.body, &self.body_file, &self.body_bytes) {
            (Some(text), _, _) => Ok(text.as_bytes().into()),
            (None, Some(_), Some(bytes)) => Ok(bytes.as_ref().into()),
            (None, Some(file), None) => Err(format!(
                "body_file `{file}` was not read: the contract was not loaded from its file"
            )),
            (None, None, _) => Ok(Vec::new().into()),
        }
    }
}

/// `[request_id]` (F4, for any service): the header every answer carries its request's id in,
/// which ids a client may choose (kept when well-formed, replaced otherwise), a request the
/// checker sends its ids on, and where an error answer's JSON body repeats the id. The reference
/// surface declares its own in `clauses.f4` (a contract with `[api]` leaves this out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestIds {
    /// The header the id travels in, both ways (`X-Request-Id`).
    pub header: String,
    /// A client's id longer than this (in bytes) is replaced; one this long is kept.
    pub client_id_max_len: usize,
    /// Characters a client's id may hold besides ASCII letters and digits (`._-`).
    #[serde(default)]
    pub client_id_extra_chars: String,
    /// A request the checker sends with a client's id: one the service answers at once.
    pub request: Recipe,
    /// An RFC 6901 JSON Pointer to the id in an error answer's JSON body (`/request_id`),
    /// which must repeat the header's. None: error bodies are not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_pointer: Option<String>,
}

impl RequestIds {
    /// The rule an id is kept by: the clause value the reference declares in `clauses.f4`.
    pub fn rule(&self) -> super::RequestId {
        super::RequestId {
            header: self.header.clone(),
            client_id_max_len: self.client_id_max_len,
            client_id_extra_chars: self.client_id_extra_chars.clone(),
        }
    }
}

/// `[claim]` (for any service): where the service serves its effective values, this contract's
/// JSON with a deployment's overrides applied; the `contract` check compares it with the
/// contract before any other request, and the checks judge by what it adopts. The reference
/// surface serves its claim at `api.contract` (a contract with `[api]` leaves this out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// The path of the `GET` that answers the claim (`/contract`).
    pub path: String,
}

/// `[temp_files]` (for any service): the folder a service keeps its requests' temporary files
/// in, given at deployment by an environment variable, every file removed when its request
/// ends, however it ends. The checker reads the folder (`--temp-dir`, the same folder) after
/// the endings it provokes: a failed dependency call (F1), a deadline (B1), a client gone (B3).
/// The reference surface's is its rule `temp-folder` (a contract with `[api]` leaves this out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TempFiles {
    /// The environment variable the service reads the folder from (`TEMP_DIR`), for whoever
    /// starts it; the checker is given the same folder with `--temp-dir`.
    pub env: String,
}

/// `[server_timing]` (T1, for any service): the Server-Timing entries a served answer reports
/// its time waiting for a worker and its time running in, which T1 cross-checks against what
/// the client saw (a request that ran at once reports little queue time, a queued one at least
/// half a hold, `run` covers the hold, no more than the workers overlap). The reference
/// surface declares its own in `[observability]` (a contract with `[api]` leaves this out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerTiming {
    /// The header (`Server-Timing`).
    pub header: String,
    /// The entry of the time spent waiting for a worker, in milliseconds as `dur` (`queue`).
    pub queue: String,
    /// The entry of the time spent running, in milliseconds as `dur` (`run`).
    pub run: String,
}

/// A bad input (`[[pools.NAME.bad_requests]]`, F2): a request the service must refuse, and the
/// answer it must get. The answer's status is the recipe's own `status` (a client error,
/// 400–499: F2 holds that bad input is never a server error), so a bad request reads as any
/// recipe does; its error code, when the contract names one, is a string at a JSON Pointer of
/// the answer's body, which fits problem+json (`/code`), a bare `{"error": …}` and a nested
/// envelope alike without a body schema in the language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BadRequest {
    /// What is wrong with it, in a few words (`an empty query`): the name a failure is
    /// reported under.
    pub what: String,
    /// The request, as sent; its `status` is the client error its answer must have.
    pub request: Recipe,
    /// Where the answer's JSON body names the error, and the name it must be. None: only the
    /// status is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<AnswerCode>,
}

/// An error code in an answer's JSON body: the string `value` at `pointer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerCode {
    /// An RFC 6901 JSON Pointer into the body (`/code`, `/error/type`).
    pub pointer: String,
    /// The string found there (`invalid_query`).
    pub value: String,
}

/// The status a recipe's answer has unless it says otherwise.
fn ok_status() -> u16 {
    200
}

/// A pool's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Queue {
    /// How many requests may wait for a worker (0: one that finds every worker busy is refused
    /// at once), or `unbounded`.
    pub capacity: Capacity,
    /// The order waiting requests start in.
    pub order: QueueOrder,
    /// How long a request may wait for a worker, counted from its arrival; past it the request
    /// leaves the queue with the `timeout_answer` (T5). None: it waits as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What a request that waited `timeout_ms` is answered: a key of `[refusals]`. Given
    /// exactly when `timeout_ms` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_answer: Option<String>,
}

/// How many requests a queue holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Capacity {
    /// At most this many.
    Places(u32),
    /// No bound: a request waits, never refused.
    Unbounded(Unbounded),
}

/// The word `unbounded`.
// Its variant stays undocumented: schemars publishes a documented unit variant as a `oneOf` of
// one schema, which OpenAPI linters reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[expect(
    missing_docs,
    reason = "a documented variant would publish a oneOf of one schema"
)]
pub enum Unbounded {
    Unbounded,
}

impl Capacity {
    /// The bound, `None` when there is none.
    pub fn places(self) -> Option<u32> {
        match self {
            Capacity::Places(n) => Some(n),
            Capacity::Unbounded(_) => None,
        }
    }
}

/// The order in which waiting requests get a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueOrder {
    /// Arrival order: the request that waited longest starts first.
    Fifo,
    /// The newest waiting request starts first.
    Lifo,
    /// No order is promised.
    Unordered,
}

impl QueueOrder {
    /// The name the contract spells it by.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueOrder::Fifo => "fifo",
            QueueOrder::Lifo => "lifo",
            QueueOrder::Unordered => "unordered",
        }
    }
}

/// B3: how soon the work of a client that went away stops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cancellation {
    /// How soon after a disconnect its request must have stopped (or left the queue).
    pub stop_within_ms: u64,
    /// The longest a request works between two looks at its cancellation; below
    /// `stop_within_ms`.
    pub checkpoint_interval_ms: u64,
}

/// What a pool's workers count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Counts {
    /// Requests in flight: a worker is taken when a request is admitted and given back when it
    /// is answered.
    #[default]
    Requests,
    /// Open connections: an idle keep-alive connection holds a worker too.
    Connections,
}

/// Whose requests share a pool's limit.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKey {
    /// Everyone's: one limit for all clients.
    #[default]
    All,
    /// Each client address has a limit of its own.
    ClientAddress,
    /// Each value of this request header (an API key, a tenant) has a limit of its own.
    Header(String),
}

/// What a full pool answers (`[refusals.NAME]`): an error of the contract's `[[errors]]`
/// table, whose status is written only there, or a bare status for a service with no such
/// table (a proxy's `503` page) with, if it says, its body's shape; and the hint it carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// The error answered (its status and body come from `[[errors]]`). Exactly one of `error`
    /// and `status` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorCode>,
    /// The status answered, for a refusal that is no error of `[[errors]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What a bare-`status` refusal's body holds (an `error` refusal's body is its table's).
    /// None: any body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<RefusalBody>,
    /// When the client may retry, if the refusal says. None: no hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<Hint>,
    /// What becomes of the connection a refusal is sent on (T6): kept for the client's next
    /// request, or closed. None: nothing is promised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<AfterRefusal>,
}

/// What a bare-`status` refusal's body must be, so a proxy's page or a service's own JSON is
/// told apart from any other answer with the same status: a JSON body with a string at a JSON
/// Pointer (the shape a bad request's `code` has), a constant text, or a page containing a text
/// (an HTML error page, whose server version line varies). Bodies are judged as UTF-8 text, at
/// most the checker's reply cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RefusalBody {
    /// A JSON body whose string at `pointer` is `value` (`{ pointer = "/error", value = "…" }`).
    Json(AnswerCode),
    /// Exactly this text (`{ text = "busy, try later\n" }`).
    Text(BodyText),
    /// A body containing this text (`{ contains = "<title>503 …</title>" }`).
    Contains(BodyContains),
}

/// The longest text a refusal's `body` declares: a title or an error word, never a whole page
/// (a contract is user input the checker holds while it judges every reply). Validation refuses
/// more, and discover proposes no longer one.
pub const MAX_BODY_TEXT: usize = 4096;

/// A refusal's body given exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BodyText {
    /// The whole body, byte for byte.
    pub text: String,
}

/// A refusal's body given by a text it contains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BodyContains {
    /// A text found somewhere in the body (not empty).
    pub contains: String,
}

impl RefusalBody {
    /// How `body` differs from this shape, in words naming what was expected and quoting a
    /// short excerpt of what came; `None` when it fits.
    pub fn mismatch(&self, body: &[u8]) -> Option<String> {
        match self {
            RefusalBody::Json(code) => code.mismatch(body),
            RefusalBody::Text(t) => (body != t.text.as_bytes()).then(|| {
                format!(
                    "the body is {}, the contract says exactly {:?}",
                    excerpt(body),
                    short(&t.text)
                )
            }),
            RefusalBody::Contains(c) => {
                let text = String::from_utf8_lossy(body);
                (!text.contains(&c.contains)).then(|| {
                    format!(
                        "the body is {}, the contract says it contains {:?}",
                        excerpt(body),
                        short(&c.contains)
                    )
                })
            }
        }
    }

    /// The shape in words, its texts quoted in backticks so a page's markup reads as text in
    /// Markdown too (``a JSON body whose `/error` is `"too_many"` ``).
    pub fn words(&self) -> String {
        match self {
            RefusalBody::Json(c) => {
                format!(
                    "a JSON body whose `{}` is `{:?}`",
                    c.pointer,
                    short(&c.value)
                )
            }
            RefusalBody::Text(t) => format!("the body `{:?}`", short(&t.text)),
            RefusalBody::Contains(c) => format!("a body containing `{:?}`", short(&c.contains)),
        }
    }

    /// The text the contract writes for this shape, whose size validation bounds.
    pub fn declared_text(&self) -> &str {
        match self {
            RefusalBody::Json(c) => &c.value,
            RefusalBody::Text(t) => &t.text,
            RefusalBody::Contains(c) => &c.contains,
        }
    }
}

impl BadRequest {
    /// How an answer (`status`, `body`) differs from the one declared, in words; `None` when
    /// it is the declared one.
    pub fn mismatch(&self, status: u16, body: &[u8]) -> Option<String> {
        let want = self.request.status;
        if status != want {
            return Some(format!("answered {status}, the contract says {want}"));
        }
        self.code.as_ref()?.mismatch(body)
    }
}

impl AnswerCode {
    /// How `body` differs from a JSON body with this code, in words; `None` when the string
    /// at `pointer` is `value`.
    pub fn mismatch(&self, body: &[u8]) -> Option<String> {
        let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        match json.as_ref().and_then(|v| v.pointer(&self.pointer)) {
            Some(serde_json::Value::String(s)) if *s == self.value => None,
            Some(other) => Some(format!(
                "the body's `{}` is {}, the contract says \"{}\"",
                self.pointer,
                short(&other.to_string()),
                self.value
            )),
            None if json.is_none() => Some(format!(
                "the body is not JSON ({}), the contract says its `{}` is \"{}\"",
                excerpt(body),
                self.pointer,
                self.value
            )),
            None => Some(format!(
                "the body has no `{}`, the contract says \"{}\"",
                self.pointer, self.value
            )),
        }
    }
}

/// `text`, cut to a length a failure line can carry.
fn short(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A body quoted in a failure line: its start, as text (`empty` when there is none).
fn excerpt(body: &[u8]) -> String {
    if body.is_empty() {
        return "empty".to_owned();
    }
    format!("{:?}", short(&String::from_utf8_lossy(body)))
}

/// What a refusal does to its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AfterRefusal {
    /// Kept open: the client's next request on it is read and answered.
    Kept,
    /// Closed once the refusal is sent.
    Closed,
}

impl AfterRefusal {
    /// The name the contract spells it by.
    pub fn as_str(self) -> &'static str {
        match self {
            AfterRefusal::Kept => "kept",
            AfterRefusal::Closed => "closed",
        }
    }
}

/// What a refusal says about when to retry: a delay estimated from recent waits (the
/// reference service's), the same number of seconds every time, or a number within bounds.
/// Untagged, told apart by their fields: the estimator's (`format`, `estimator`, …), `seconds`,
/// or `max_seconds`; each form denies the others' fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Hint {
    /// A delay that follows the load (T3's estimator).
    Estimated(RetryAfter),
    /// A constant delay.
    Constant(ConstantHint),
    /// A delay within bounds, whatever it follows.
    Range(RangeHint),
}

impl Hint {
    /// The header the delay travels in.
    pub fn header(&self) -> &str {
        match self {
            Hint::Estimated(h) => &h.header,
            Hint::Constant(h) => &h.header,
            Hint::Range(h) => &h.header,
        }
    }

    /// The estimator's settings, for a hint that follows the load.
    pub fn estimated(&self) -> Option<&RetryAfter> {
        match self {
            Hint::Estimated(h) => Some(h),
            Hint::Constant(_) | Hint::Range(_) => None,
        }
    }
}

/// A refusal's constant hint: `HEADER: SECONDS` (RFC 9110 `delay-seconds`) on every refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConstantHint {
    /// The header the delay travels in (`Retry-After`).
    pub header: String,
    /// The delay, in whole seconds.
    pub seconds: u64,
}

/// A refusal's hint within bounds: `HEADER: N` (RFC 9110 `delay-seconds`) with
/// `min_seconds <= N <= max_seconds` on every refusal, for a service whose delay varies by a
/// rule the contract does not describe (a jittered constant, a bucket's refill time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RangeHint {
    /// The header the delay travels in (`Retry-After`).
    pub header: String,
    /// The smallest delay sent, in whole seconds.
    pub min_seconds: u64,
    /// The largest delay sent, in whole seconds (at least `min_seconds`).
    pub max_seconds: u64,
}

/// T3: a refusal's `Retry-After`, and how its delay is estimated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryAfter {
    /// The header the delay travels in.
    pub header: String,
    /// RFC 9110 `delay-seconds` (never an HTTP-date).
    pub format: super::RetryAfterFormat,
    /// Which statistic of the recent queue waits the delay is (`p50`: the median).
    pub estimator: super::Estimator,
    /// How many recent queue-wait samples each pool keeps for the estimate.
    pub window_samples: u32,
    /// The smallest delay ever sent, in seconds.
    pub min_seconds: u64,
    /// The delay sent while the pool has no sample yet, in seconds.
    pub empty_window_seconds: u64,
    /// The largest delay: the pool's deadline.
    pub max: super::RetryAfterMax,
}

/// A rate limit (`[rate_limits.NAME]`, T4): the requests of its routes are admitted at a
/// sustained `rate_per_second`, up to `burst` more at once, and the rest refused at once. The
/// model is a token bucket of `burst + 1` tokens refilled at the rate, each admitted request
/// taking one: nginx's `limit_req` with `burst` is one such limiter (its `burst` means the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// The limit's name in the docs' prose; the table's key is its id.
    pub title: String,
    /// The requests the limit counts: each route's method and path pattern.
    pub routes: Vec<Route>,
    /// The sustained rate, in requests per second (whole: a limit the checker can measure in a
    /// run of seconds).
    pub rate_per_second: u32,
    /// How many requests beyond the one the rate allows may arrive at once and still be
    /// admitted (0: none).
    pub burst: u32,
    /// What an admitted request beyond the rate meets: a delay that spaces it out at the rate
    /// (`delay`, nginx's default), or none (`nodelay`).
    #[serde(default)]
    pub burst_mode: BurstMode,
    /// The refusal (a key of `[refusals]`) a request past the burst gets at once.
    pub refusal: String,
    /// Whose requests share the bucket: everyone's, or each client's or each header value's.
    #[serde(default)]
    pub key: LimitKey,
    /// A request of the limit's routes the checker sends: one the service answers at once
    /// when the limit admits it.
    pub request: Recipe,
    /// The IETF `RateLimit-Policy` and `RateLimit` fields its answers carry, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<RateLimitFields>,
    /// Environment variables that replace a field of the limit at deployment (`field` is the
    /// field's name within the limit, `burst`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
}

/// The `RateLimit-Policy` and `RateLimit` fields of the IETF httpapi working group's draft
/// `draft-ietf-httpapi-ratelimit-headers-09` (structured-field lists of items named by their
/// policy), as a rate limit's answers carry them: the policy's quota `q` is the bucket
/// (`burst + 1`), and `RateLimit`'s remaining quota `r` is the tokens left after the answer (0 on
/// a refusal). The draft has no token bucket of its own; this is the reading the language
/// takes, and the time parameters (`w`, `t`) are not judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitFields {
    /// The policy's name, the string item both fields carry (`"default"`).
    pub policy: String,
}

impl RateLimit {
    /// The requests admitted at once from a full bucket: the one the rate allows and the burst.
    pub fn bucket(&self) -> u32 {
        self.burst.saturating_add(1)
    }
}

/// What a rate limit does with an admitted request beyond its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BurstMode {
    /// Delays it until the rate allows it: the k-th request beyond the rate waits k / rate
    /// seconds.
    #[default]
    Delay,
    /// Serves it at once.
    Nodelay,
}

impl BurstMode {
    /// The name the contract spells it by.
    pub fn as_str(self) -> &'static str {
        match self {
            BurstMode::Delay => "delay",
            BurstMode::Nodelay => "nodelay",
        }
    }
}

/// B4 (`[connections]`): how long a connection may take to send a request, and how many are
/// served at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Connections {
    /// A complete request head must arrive within this time of the connection opening or of
    /// its previous response ending (so it also bounds an idle keep-alive connection).
    pub head_timeout_ms: u64,
    /// Connections served at once; one more is closed at once, unanswered. None: the service
    /// promises no cap (nginx's `worker_connections` closes an idle connection to take a new
    /// one, which is no cap a client can rely on), and B4 judges the head timeout alone. The
    /// reference surface declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// What a connection B4 keeps open asks, answered at once whatever the pools hold (a
    /// health path): the idle keep-alive probe's request, the one asked on fresh connections
    /// meanwhile, and the one each connection of the cap's fill asks. Required in a contract
    /// without the reference surface, whose is `api.healthz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Recipe>,
    /// Environment variables that replace a field at deployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
}

/// `[upload]`: request bodies, read within a time (B1's upload timeout), held within a budget
/// (B5, the reference surface's), and for another service sent to a route of its own with a
/// largest size (F2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Upload {
    /// A body that stops arriving is ended this long after its last byte (the reference's
    /// timer is a total one: within this time of its head): answered `upload_timeout` by the
    /// reference surface and never holding a worker, `read_timeout_answer` or a closed
    /// connection by another service (B1).
    pub read_timeout_ms: u64,
    /// Bodies being read, queued or running, all requests together; an upload that would go
    /// past it is refused before its body is read (B5). The reference surface's, which it must
    /// declare: B5 fills it with the reference routes' bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_mb: Option<u64>,
    /// The request whose body the checker grows and stalls: its route, headers and status; its
    /// body, followed by spaces (trailing whitespace, which JSON and text ignore) up to the size
    /// a trial needs. Required in a contract without the reference surface, whose uploads are
    /// `api.digitize`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Recipe>,
    /// What a body stalled past `read_timeout_ms` is answered: a key of `[refusals]`. None: the
    /// connection is closed unanswered (nginx's `client_body_timeout`). Another service's only;
    /// the reference surface answers `upload_timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_timeout_answer: Option<String>,
    /// The largest body `request`'s route takes: one of this size is served with the request's
    /// status, one a byte larger is answered `too_large`, with a `Content-Length` or chunked
    /// (F2). Another service's only; the reference surface's are `api.*.max_upload_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// What a body over `max_body_bytes` is answered: a key of `[refusals]`. With
    /// `max_body_bytes`, both or neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub too_large: Option<String>,
    /// Environment variables that replace a field at deployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
}

/// The pools by id.
pub type Pools = BTreeMap<String, PoolSpec>;

/// The refusals by name.
pub type Refusals = BTreeMap<String, Refusal>;

/// The rate limits by name.
pub type RateLimits = BTreeMap<String, RateLimit>;

/// The clause that judges a field of the service's declaration, given as a dotted path of the
/// contract (`pools.digitize.queue.capacity`, `upload.budget_mb`); `None` for a field that only
/// describes (a pool's or a limit's title, routes, stages, refusal name, request) or a path outside the declaration.
/// A pool's bad requests are F2's: the answers they must get are its to judge.
/// A pool fed by no route is the relay's, judged by R1. The docs' value tables, the overrides'
/// clauses and the reports' "adopted" lines all read this one mapping.
pub fn judged_by(path: &str, relay_pool: bool) -> Option<ClauseId> {
    let parts: Vec<&str> = path.split('.').collect();
    match parts.as_slice() {
        ["pools", _, field, ..] => match *field {
            "workers" | "queue" if relay_pool => Some(ClauseId::R1),
            "workers" => Some(ClauseId::T1),
            // A key qualifies a limit of routed requests; the relay's envelopes have none.
            "key" if !relay_pool => Some(ClauseId::T1),
            "queue" if matches!(parts.get(3), Some(&("timeout_ms" | "timeout_answer"))) => {
                Some(ClauseId::T5)
            }
            "queue" => Some(ClauseId::T2),
            "deadline_ms" | "deadline_answer" | "reference_ms" => Some(ClauseId::B1),
            "memory_cap_mb" => Some(ClauseId::B2),
            "bad_requests" => Some(ClauseId::F2),
            "failure" => Some(ClauseId::F1),
            "cancellation" => Some(ClauseId::B3),
            _ => None,
        },
        ["refusals", _, "hint", ..] => Some(ClauseId::T3),
        ["refusals", _, "connection"] => Some(ClauseId::T6),
        [
            "rate_limits",
            _,
            "rate_per_second" | "burst" | "burst_mode" | "key",
            ..,
        ] => Some(ClauseId::T4),
        ["connections", "head_timeout_ms" | "max_connections"] => Some(ClauseId::B4),
        ["upload", "read_timeout_ms" | "read_timeout_answer"] => Some(ClauseId::B1),
        ["upload", "max_body_bytes" | "too_large"] => Some(ClauseId::F2),
        ["upload", "budget_mb"] => Some(ClauseId::B5),
        _ => None,
    }
}
