//! The implementation under test, seen only from outside: HTTP, `/metrics`, `/v1/contract`, and
//! (when given) its temp folder and log file; for a bridge that dials its relay, the checker is
//! that relay ([`relay`]). Every reply is validated against the contract's
//! OpenAPI statuses and problem schema as it arrives.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use plimsoll_spec::{Contract, ErrorCode, MetricName, PROBLEM_CONTENT_TYPE, Pool, Stage};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap};

pub mod body;
pub mod bridge;
pub mod connection;
pub mod dependency;
mod error;
mod exposition;
mod images;
pub mod local;
pub mod process;
pub mod relay;
mod reply;
pub mod sampler;
mod seen;
pub mod upstream;

pub use error::*;
pub use exposition::*;
pub use images::*;
pub use reply::*;
pub use seen::Seen;

/// Which documented operation a request exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `POST` to the digitize endpoint.
    Digitize,
    /// `POST` to the export endpoint.
    Export,
    /// Any other request: its reply is not validated against the OpenAPI document.
    Other,
}

/// Certificate authorities the checker trusts for an `https://` target besides the system's
/// roots (`--ca-file` of `check` and `load`): for reqwest's clients, and as DER for the load
/// runner's own connections (rustls).
#[derive(Debug, Clone, Default)]
pub struct Trust {
    certificates: Vec<reqwest::Certificate>,
    roots: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl Trust {
    /// The authorities of a PEM file (one or more certificates), or none without a file. The
    /// error says which file and why, for a usage error.
    pub fn load(path: Option<&std::path::Path>) -> Result<Trust, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let Some(path) = path else {
            return Ok(Trust::default());
        };
        let bad = |e: &dyn std::fmt::Display| {
            format!("--ca-file {}: not PEM certificates: {e}", path.display())
        };
        let pem = std::fs::read(path).map_err(|e| format!("--ca-file {}: {e}", path.display()))?;
        let roots = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        if roots.is_empty() {
            return Err(format!(
                "--ca-file {}: no certificate in it",
                path.display()
            ));
        }
        let certificates = (roots.iter())
            .map(|der| reqwest::Certificate::from_der(der))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        Ok(Trust {
            certificates,
            roots,
        })
    }

    /// `builder` trusting these authorities too.
    pub fn apply(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        (self.certificates.iter()).fold(builder, |b, c| b.add_root_certificate(c.clone()))
    }

    /// These authorities as DER, for a TLS client of rustls' own.
    pub fn roots(&self) -> &[rustls::pki_types::CertificateDer<'static>] {
        &self.roots
    }
}

/// The address a second client sends from, where a limit is keyed by client address: loopback,
/// as every target the checker can reach from two addresses is.
pub const ELSEWHERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

/// The client every check sends with: no idle connections kept, so each request is a
/// connection of its own; a timeout only a target that never answers reaches. No honest reply
/// takes longer than the longest pool deadline (a 504 at the latest); twice that and a minute
/// leaves room for a slow machine, and bounds a target that accepts and never answers.
fn target_client(expected: &Contract, trust: &Trust, from: Option<IpAddr>) -> reqwest::Client {
    let longest = expected
        .pools
        .values()
        .filter_map(|p| p.deadline_ms)
        .max()
        .map_or(Duration::ZERO, Duration::from_millis);
    trust
        .apply(reqwest::Client::builder())
        .local_address(from)
        .pool_max_idle_per_host(0)
        .connect_timeout(Duration::from_secs(10))
        .timeout(longest * 2 + Duration::from_secs(60))
        .build()
        .expect("a default reqwest client builds")
}

/// The implementation under test as the checks reach it: its URL, the values it is judged by, what
/// else the checker can see of it, and every reply so far.
pub struct Target {
    /// Base URL, without a trailing `/`.
    pub base: String,
    /// The client every check sends with: no idle connections kept, so each request is a connection
    /// of its own; a timeout only a target that never answers reaches.
    pub client: reqwest::Client,
    /// The same client sending from [`ELSEWHERE`], another loopback address: a second client
    /// as a limit keyed by client address tells them apart.
    elsewhere: reqwest::Client,
    /// The values the run judges against.
    pub expected: Contract,
    /// The implementation's temp folder, when the checker can see it (`--temp-dir`).
    pub temp_dir: Option<PathBuf>,
    /// The implementation's log file, when the checker can read it (`--server-log`; F3 needs it).
    pub server_log: Option<PathBuf>,
    /// Trials per timing check.
    pub trials: u32,
    openapi: serde_json::Value,
    problem_schema: jsonschema::Validator,
    /// A small real PNG for requests that should succeed.
    pub image: Vec<u8>,
    /// A design (the JSON of one plain digitize), fetched once, for export requests.
    design: tokio::sync::OnceCell<Vec<u8>>,
    /// Every reply of the run (status, request ids, an error body's code and stage), for F3/F4.
    pub seen: std::sync::Mutex<Vec<Seen>>,
    /// Every OpenAPI / problem-schema violation of the run, for the API check.
    pub violations: std::sync::Mutex<Vec<String>>,
    /// Where the relay checks' sockets come from: dialled to the target's relay endpoint, or
    /// the ones the target's bridge dials to the checker.
    pub relay: relay::RelaySocket,
    /// Where relayed requests are performed, as the relay checks hold and watch them: the
    /// target's own API, or the checker's upstream a bridge relays to.
    pub local: std::sync::Arc<dyn local::LocalHandler>,
    /// Where the implementation's memory can be read (B5), when the checker can see it.
    pub process: process::ProcessSource,
    /// What the fault the checks go through adds to their bounds (none without `--fault`).
    pub adjustments: plimsoll_fault::Adjustments,
    /// The dependencies the checker plays for the pools that hold by one, bound on first use.
    pub dependencies: dependency::Dependencies,
}

impl Target {
    /// The target at `base` judged by `expected`, with what the checker can see of it besides HTTP.
    pub fn new(
        base: String,
        expected: Contract,
        temp_dir: Option<PathBuf>,
        server_log: Option<PathBuf>,
        trials: u32,
    ) -> Target {
        let schema = plimsoll_spec::render::root_schema::<plimsoll_spec::Problem>();
        // A contract without the reference API declares no relay endpoint (nor any route the
        // OpenAPI document would describe): the relay checks are not applicable to it.
        let expected_relay_path = expected
            .api
            .as_ref()
            .map(|api| api.relay.path.clone())
            .unwrap_or_default();
        Target {
            base: base.trim_end_matches('/').to_owned(),
            client: target_client(&expected, &Trust::default(), None),
            elsewhere: target_client(&expected, &Trust::default(), Some(ELSEWHERE)),
            openapi: if expected.is_reference() {
                plimsoll_spec::render::openapi(&expected)
            } else {
                serde_json::Value::Null
            },
            problem_schema: jsonschema::validator_for(&schema)
                .expect("the problem schema compiles"),
            expected,
            temp_dir,
            server_log,
            trials,
            image: sample_png(),
            design: tokio::sync::OnceCell::new(),
            seen: std::sync::Mutex::new(Vec::new()),
            violations: std::sync::Mutex::new(Vec::new()),
            relay: relay::RelaySocket::dialled(
                base.trim_end_matches('/'),
                &expected_relay_path,
                None,
            ),
            local: std::sync::Arc::new(local::TargetApi),
            process: process::ProcessSource::Unavailable(
                "the checker cannot see the implementation's process (no --pid)".into(),
            ),
            adjustments: plimsoll_fault::Adjustments::default(),
            dependencies: dependency::Dependencies::default(),
        }
    }

    /// The target reached with `trust`'s certificate authorities besides the system's.
    pub fn with_trust(mut self, trust: &Trust) -> Target {
        self.client = target_client(&self.expected, trust, None);
        self.elsewhere = target_client(&self.expected, trust, Some(ELSEWHERE));
        self
    }

    /// The target reached through a fault, whose additions to the bounds are `adjustments`.
    pub fn with_adjustments(mut self, adjustments: plimsoll_fault::Adjustments) -> Target {
        if let relay::RelaySocket::Dialled { fault, .. } = &mut self.relay {
            fault.clone_from(&adjustments.fault);
        }
        self.adjustments = adjustments;
        self
    }

    /// A time bound as the checks judge it: the contract's, plus what the fault adds.
    pub fn bound(&self, bound: plimsoll_fault::Bound) -> Duration {
        self.adjustments.bound(bound, &self.expected)
    }

    /// A pool's own stop bound (its `cancellation.stop_within_ms`, B3) as the run's fault
    /// widens it: a client's leaving crosses the fault before the server can see it.
    pub fn stop_bound(&self, stop_within_ms: u64) -> Duration {
        Duration::from_millis(stop_within_ms)
            + self.adjustments.added(plimsoll_fault::Bound::StopWithin)
    }

    /// The target whose process the checker can read through `process`.
    pub fn with_process(mut self, process: process::ProcessSource) -> Target {
        self.process = process;
        self
    }

    /// The target as a bridge whose both ends the checker plays: it dials `relay` and relays
    /// to `upstream`; `bridge` is its process when the checker started it.
    pub fn with_bridge_ends(
        mut self,
        relay: std::sync::Arc<relay::RelayListener>,
        upstream: std::sync::Arc<upstream::Upstream>,
        bridge: Option<std::sync::Arc<bridge::BridgeProcess>>,
    ) -> Target {
        self.relay = relay::RelaySocket::Accepted {
            listener: relay,
            process: bridge,
        };
        self.local = std::sync::Arc::new(local::CheckerUpstream(upstream));
        self
    }

    /// The target with its bridge dialling `relay`, when the checker plays the relay (see
    /// [`Target::relay`]).
    pub fn with_relay(mut self, relay: Option<std::sync::Arc<relay::RelayListener>>) -> Target {
        if let Some(listener) = relay {
            self.relay = relay::RelaySocket::Accepted {
                listener,
                process: None,
            };
        }
        self
    }

    /// The target's socket address and Host header, when it is plain HTTP: for the checks that
    /// speak HTTP/1.1 on a raw connection (B4, B5, F2's declared length).
    pub fn raw_address(&self) -> Option<(std::net::SocketAddr, String)> {
        let url = reqwest::Url::parse(&self.base).ok()?;
        if url.scheme() != "http" {
            return None;
        }
        let addr = url.socket_addrs(|| Some(80)).ok()?.into_iter().next()?;
        let host = url.host_str()?.to_owned();
        Some((addr, host))
    }

    /// The URL of `path` (which starts with `/`) on the target.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A digitize request for the sample image, with an optional hook.
    pub fn digitize_request(&self, hook: Option<&str>) -> reqwest::RequestBuilder {
        let api = &self.expected.api().digitize;
        let mut r = self
            .client
            .post(self.url(&api.path))
            .header(CONTENT_TYPE, api.content_types[0].as_str())
            .body(self.image.clone());
        if let Some(h) = hook {
            r = r.header(self.expected.hooks().header.as_str(), h);
        }
        r
    }

    /// An export request for `design`, with an optional hook.
    pub fn export_request(&self, hook: Option<&str>, design: Vec<u8>) -> reqwest::RequestBuilder {
        let api = &self.expected.api().export;
        let mut r = self
            .client
            .post(self.url(&api.path))
            .header(CONTENT_TYPE, api.content_types[0].as_str())
            .body(design);
        if let Some(h) = hook {
            r = r.header(self.expected.hooks().header.as_str(), h);
        }
        r
    }

    /// Sends a digitize request for the sample image, with an optional hook.
    pub async fn digitize(&self, hook: Option<&str>) -> Result<Reply, RequestError> {
        self.send(self.digitize_request(hook), Op::Digitize).await
    }

    /// A design to export: the body of one plain digitize, fetched on first use and kept.
    pub async fn design(&self) -> Result<Vec<u8>, RequestError> {
        self.design
            .get_or_try_init(|| async {
                let reply = self.digitize(None).await?;
                if reply.ok() {
                    Ok(reply.body)
                } else {
                    Err(RequestError::NoDesign {
                        status: reply.status,
                        code: reply.code(),
                    })
                }
            })
            .await
            .cloned()
    }

    /// A request to `pool`'s endpoint (the sample image, or the design for export), with an
    /// optional hook; not sent.
    pub async fn pool_request(
        &self,
        pool: Pool,
        hook: Option<&str>,
    ) -> Result<(reqwest::RequestBuilder, Op), RequestError> {
        match pool {
            Pool::Digitize => Ok((self.digitize_request(hook), Op::Digitize)),
            Pool::Export => Ok((self.export_request(hook, self.design().await?), Op::Export)),
            Pool::Relay => Err(RequestError::RelayPool),
        }
    }

    /// Sends one request to `pool`'s endpoint, giving up after `limit` (a server that never
    /// answers is not waited on for ever).
    pub async fn send_pool(
        &self,
        pool: Pool,
        hook: Option<&str>,
        limit: Duration,
    ) -> Result<Reply, RequestError> {
        let (request, op) = self.pool_request(pool, hook).await?;
        self.send(request.timeout(limit), op).await
    }

    /// Sends `recipe` as the contract writes it, giving up after `limit`.
    pub async fn send_recipe(
        &self,
        recipe: &plimsoll_spec::model::Recipe,
        limit: Duration,
    ) -> Result<Reply, RequestError> {
        self.send_recipe_with(&self.client, recipe, limit).await
    }

    /// Whether the target is on loopback, where [`Target::send_recipe_elsewhere`] reaches it
    /// from a second address.
    pub fn on_loopback(&self) -> bool {
        let Ok(url) = reqwest::Url::parse(&self.base) else {
            return false;
        };
        let host = url.host_str().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// [`Target::send_recipe`] from [`ELSEWHERE`]: another client, for a limit keyed by client
    /// address. Only for a target [on loopback](Target::on_loopback).
    pub async fn send_recipe_elsewhere(
        &self,
        recipe: &plimsoll_spec::model::Recipe,
        limit: Duration,
    ) -> Result<Reply, RequestError> {
        self.send_recipe_with(&self.elsewhere, recipe, limit).await
    }

    async fn send_recipe_with(
        &self,
        client: &reqwest::Client,
        recipe: &plimsoll_spec::model::Recipe,
        limit: Duration,
    ) -> Result<Reply, RequestError> {
        let mut request = self.recipe_head(client, recipe, limit)?;
        let body = recipe.body().map_err(RequestError::Recipe)?;
        if recipe.body.is_some() || recipe.body_file.is_some() {
            request = request.body(body.into_owned());
        }
        self.send(request, Op::Other).await
    }

    /// `recipe`'s method, path and headers from `client`, giving up after `limit`; its body is
    /// the caller's (a recipe as written, or an upload grown from it).
    pub fn recipe_head(
        &self,
        client: &reqwest::Client,
        recipe: &plimsoll_spec::model::Recipe,
        limit: Duration,
    ) -> Result<reqwest::RequestBuilder, RequestError> {
        let method = reqwest::Method::from_bytes(recipe.method.as_bytes())
            .map_err(|e| RequestError::Recipe(format!("method `{}`: {e}", recipe.method)))?;
        let mut request = client
            .request(method, self.url(&recipe.path))
            .timeout(limit);
        for (name, value) in &recipe.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        Ok(request)
    }

    /// Sends, reads the whole reply, and validates it.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
        op: Op,
    ) -> Result<Reply, RequestError> {
        let sent = Instant::now();
        let response = request.send().await.map_err(RequestError::Send)?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = body::read_capped(response, body::MAX_REPLY_BYTES).await?;
        let elapsed = sent.elapsed();
        let timing = self.server_timing_entries().and_then(|(header, entries)| {
            headers
                .get(header)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| server_timing_of(v, &entries))
        });
        let mut reply = Reply {
            status,
            headers,
            body,
            sent,
            elapsed,
            timing,
            violations: Vec::new(),
            pool: match op {
                Op::Digitize => Some(Pool::Digitize),
                Op::Export => Some(Pool::Export),
                Op::Other => None,
            },
        };
        reply.violations = self.violations(&reply, op);
        if !reply.violations.is_empty() {
            let id = reply
                .request_id(self.request_id_header())
                .unwrap_or_else(|| "(no id)".into());
            let mut all = self.violations.lock().unwrap_or_else(|e| e.into_inner());
            all.extend(reply.violations.iter().map(|v| format!("{id}: {v}")));
        }
        let seen = Seen::of(&reply, self.request_id_header(), self.request_id_pointer());
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(seen);
        Ok(reply)
    }

    fn violations(&self, reply: &Reply, op: Op) -> Vec<String> {
        let mut out = Vec::new();
        let (path, method) = match op {
            Op::Digitize => (&self.expected.api().digitize.path, "post"),
            Op::Export => (&self.expected.api().export.path, "post"),
            Op::Other => return out,
        };
        let operation = &self.openapi["paths"][path.as_str()][method];
        let documented = operation["responses"].get(reply.status.to_string());
        if documented.is_none() {
            out.push(format!(
                "status {} is not documented for {} {path}",
                reply.status,
                method.to_uppercase()
            ));
        }
        if StatusCode::from_u16(reply.status)
            .is_ok_and(|s| s.is_client_error() || s.is_server_error())
        {
            let ct = reply.header(CONTENT_TYPE.as_str()).unwrap_or_default();
            if !ct.starts_with(PROBLEM_CONTENT_TYPE) {
                out.push(format!(
                    "error content-type is `{ct}`, not {PROBLEM_CONTENT_TYPE}"
                ));
            }
            match serde_json::from_slice::<serde_json::Value>(&reply.body) {
                Ok(body) => {
                    for e in self.problem_schema.iter_errors(&body) {
                        out.push(format!("problem body: {e} at {}", e.instance_path()));
                    }
                    if body["status"].as_u64() != Some(u64::from(reply.status)) {
                        out.push(format!(
                            "body status {} differs from the HTTP status {}",
                            body["status"], reply.status
                        ));
                    }
                }
                Err(e) => out.push(format!("error body is not JSON: {e}")),
            }
        }
        if let Some(doc) = documented {
            for (name, h) in doc["headers"].as_object().into_iter().flatten() {
                if h["schema"]["type"] == "integer"
                    && let Some(v) = reply.header(name)
                    && v.parse::<u64>().is_err()
                {
                    out.push(format!(
                        "{name}: `{v}` is not an integer as the OpenAPI document says"
                    ));
                }
            }
        }
        out
    }

    /// A metric's value for one pool, as `/metrics` says now. A series the contract documents
    /// but the exposition lacks is an error (`/metrics has no …`), never 0: absence is not
    /// success.
    pub async fn metric(&self, name: MetricName, pool: Pool) -> Result<f64, MetricError> {
        self.scrape(name, Some(pool)).await
    }

    /// The sum of every series of a metric (for one without a `pool` label); an error when
    /// there is none.
    pub async fn metric_total(&self, name: MetricName) -> Result<f64, MetricError> {
        self.scrape(name, None).await
    }

    async fn scrape(&self, name: MetricName, pool: Option<Pool>) -> Result<f64, MetricError> {
        let path = &self.expected.api().metrics.path;
        let text = self.exposition(path).await?;
        metric_value(&text, name.as_str(), pool.map_or("", Pool::as_str)).ok_or_else(|| {
            MetricError::Missing {
                path: path.clone(),
                series: pool.map_or_else(|| name.to_string(), |p| series(name, p)),
            }
        })
    }

    /// The value of a series the contract names in the service's own words, from the
    /// exposition at `path`: an error when it is not served.
    pub async fn series(
        &self,
        path: &str,
        declared: &plimsoll_spec::model::Series,
    ) -> Result<f64, MetricError> {
        let text = self.exposition(path).await?;
        series_value(&text, declared).ok_or_else(|| MetricError::Missing {
            path: path.to_owned(),
            series: declared.to_string(),
        })
    }

    /// The Prometheus text exposition at `path`, read no further than any reply.
    async fn exposition(&self, path: &str) -> Result<String, MetricError> {
        let path = &path.to_owned();
        let response = self
            .client
            .get(self.url(path))
            .send()
            .await
            .map_err(|source| MetricError::Get {
                path: path.clone(),
                source,
            })?;
        if !response.status().is_success() {
            return Err(MetricError::Status {
                path: path.clone(),
                status: response.status(),
            });
        }
        let text = body::read_capped(response, body::MAX_REPLY_BYTES)
            .await
            .map_err(|source| MetricError::Body {
                path: path.clone(),
                source,
            })?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    /// Polls a pool's metric until `pred` holds; returns the time it took.
    pub async fn wait_metric(
        &self,
        name: MetricName,
        pool: Pool,
        limit: Duration,
        pred: impl Fn(f64) -> bool,
    ) -> Result<Duration, WaitError> {
        let start = Instant::now();
        let poll = Duration::from_millis(self.expected.tolerances.metrics_poll_interval_ms);
        let mut last = f64::NAN;
        while start.elapsed() <= limit {
            last = self.metric(name, pool).await?;
            if pred(last) {
                return Ok(start.elapsed());
            }
            tokio::time::sleep(poll).await;
        }
        Err(WaitError::Gauge {
            series: series(name, pool),
            last,
            limit,
        })
    }

    /// The HTTP status the contract gives an error code.
    pub fn status(&self, code: ErrorCode) -> u16 {
        self.expected.error(code).status
    }

    /// Whether a reply is `refusal`'s answer: its error's status and code, or its own status
    /// and, when it declares one, its body's shape.
    pub fn is_refusal(&self, reply: &Reply, refusal: &plimsoll_spec::model::Refusal) -> bool {
        self.refusal_mismatch(reply, refusal).is_none()
    }

    /// How a reply differs from `refusal`'s answer, in words that say what was expected and
    /// what came (`answered 503, not the refusal's 429`; `answered 429, but the body's `/error`
    /// is …`); `None` when it is that answer. Every clause reads a refusal through this, so T1,
    /// T3, T4, T5 and T6 agree on what one is.
    pub fn refusal_mismatch(
        &self,
        reply: &Reply,
        refusal: &plimsoll_spec::model::Refusal,
    ) -> Option<String> {
        self.answer_mismatch(reply.status, &reply.body, refusal)
    }

    /// [`Target::refusal_mismatch`] for an answer read elsewhere than a [`Reply`] (T6's bare
    /// connection): its status and body.
    pub fn answer_mismatch(
        &self,
        status: u16,
        body: &[u8],
        refusal: &plimsoll_spec::model::Refusal,
    ) -> Option<String> {
        match self.expected.refusal_answer(refusal) {
            Some(answer) => answer.mismatch(status, body),
            // Validation refuses a refusal of neither; none is its answer.
            None => Some(format!("answered {status}; the refusal declares no status")),
        }
    }

    /// Whether a reply is one of the contract's refusals.
    pub fn is_any_refusal(&self, reply: &Reply) -> bool {
        self.expected
            .refusals
            .values()
            .any(|r| self.is_refusal(reply, r))
    }

    /// Whether a reply is the contract's answer for `code`: its status and the body's `code`.
    pub fn is_error(&self, reply: &Reply, code: ErrorCode) -> bool {
        reply.status == self.status(code) && reply.code() == code.as_str()
    }

    /// Job directories in the implementation's temp folder, if the checker can see it.
    pub fn temp_entries(&self) -> Option<Vec<String>> {
        let dir = self.temp_dir.as_ref()?;
        Some(
            std::fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
        )
    }

    /// The contract's hook header, which carries a request's directives.
    pub fn hook_header(&self) -> &str {
        &self.expected.hooks().header
    }

    /// The contract's request id header (F4): the reference's, or `[request_id]`'s. Empty when
    /// the contract declares neither: no reply is then named by an id.
    pub fn request_id_header(&self) -> &str {
        match (&self.expected.observability, &self.expected.request_id) {
            (Some(o), _) => &o.request_id_header,
            (None, Some(ids)) => &ids.header,
            (None, None) => "",
        }
    }

    /// The Server-Timing header and its entries (queue, then run), as the contract declares
    /// them: the reference's `[observability]`, or `[server_timing]`; None when it declares none.
    pub fn server_timing_entries(&self) -> Option<(&str, Vec<String>)> {
        match (&self.expected.observability, &self.expected.server_timing) {
            (Some(o), _) => Some((&o.server_timing_header, o.server_timing_metrics.clone())),
            (None, Some(t)) => Some((&t.header, vec![t.queue.clone(), t.run.clone()])),
            (None, None) => None,
        }
    }

    /// Where an error body repeats the request id (F4): the reference's `request_id` member,
    /// or `[request_id]`'s `error_pointer`; None when the contract says nothing of it.
    pub fn request_id_pointer(&self) -> Option<&str> {
        match (&self.expected.observability, &self.expected.request_id) {
            (Some(_), _) => Some("/request_id"),
            (None, Some(ids)) => ids.error_pointer.as_deref(),
            (None, None) => None,
        }
    }

    /// The digitize pool's worker slots (T1).
    pub fn digitize_workers(&self) -> usize {
        self.workers(Pool::Digitize)
    }

    /// The digitize pool's queue places (T2).
    pub fn digitize_queue(&self) -> usize {
        self.queue_capacity(Pool::Digitize)
    }

    /// A pool's worker slots (T1); the relay's are R1's.
    pub fn workers(&self, pool: Pool) -> usize {
        self.expected.pool(pool).workers as usize
    }

    /// A pool's queue places (T2); the relay queues without a bound, so 0 here.
    pub fn queue_capacity(&self, pool: Pool) -> usize {
        self.expected.pool(pool).queue_capacity.unwrap_or(0) as usize
    }

    /// A pool's deadline (B1), counted from admission; the relay has none (zero).
    pub fn deadline(&self, pool: Pool) -> Duration {
        self.expected.pool(pool).deadline.unwrap_or_default()
    }

    /// A pool's stages, in order.
    pub fn stages(&self, pool: Pool) -> &[Stage] {
        self.expected.pool(pool).stages
    }

    /// The longest `Retry-After` a pool may advertise: its timeout in whole seconds (T3), at
    /// least the minimum.
    pub fn max_retry_after_s(&self, pool: Pool) -> u64 {
        let t3 = self.expected.retry_after();
        t3.max.seconds(&self.expected.pool(pool), t3.min_seconds)
    }

    /// The contract's Server-Timing header, with a job's `queue` and `run` times.
    pub fn server_timing_header(&self) -> &str {
        &self.expected.observability().server_timing_header
    }

    /// How soon a worker must stop once its client disconnects (B3's `stop_within_ms`).
    pub fn stop_within(&self) -> Duration {
        self.bound(plimsoll_fault::Bound::StopWithin)
    }
}
