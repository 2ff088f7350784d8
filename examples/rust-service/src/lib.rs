//! A second service for the Plimsoll gate, unlike the digitize service in every way that a
//! contract declares: written on axum, not on the digitize engine, with pools of its own —
//! `GET /search` (two workers, no queue, refusing `429` with a small JSON body and
//! `Retry-After: 1`; a bad query refused `400` with `{"code":"invalid_query"}` before it takes
//! a worker), `POST /reports` (one worker and a queue of three started newest first,
//! LIFO, refusing `503` with plain text when full or after two seconds' wait; its body read
//! before it takes a worker, at most 64 KiB, else `413`, and answered `408` when it stalls for
//! two seconds) and `GET /tenant` (one worker for each `X-Api-Key`
//! value, so one tenant's saturation never refuses another's) — and a rate limit, `GET /quota`
//! (five a second for each `X-Api-Key` value, a burst of two more served at once, the rest
//! refused `429` with `Retry-After: 1`: a keyed token bucket of `governor`'s, its answers
//! carrying the IETF `RateLimit-Policy` and `RateLimit` fields) and `GET /lookup` (three workers
//! and a queue of two started oldest first, each request served by calling a dependency at
//! `LOOKUP_URL`, which holds its worker while it answers, answered `502` when that call
//! fails and `504` four seconds after it arrived) — its own metrics at `/metrics`
//! (`pool_busy`, `pool_waiting`, `pool_workers`, `pool_refused_total`, by pool), an
//! `X-Request-Id` on every answer (a client's own when well-formed), `Server-Timing` on every
//! served answer of a pool (`queue` and `run`), its error lines in a file, the claim of its
//! effective values it is given at `GET /contract`, `GET /healthz` answered at once, its
//! connections bounded (a request head within two seconds, 256 served at once), and the
//! test hook only through `plimsoll-tower`'s layer, inside each pool's limit.
//!
//! It knows nothing of the contract that describes it (`examples/rust-service/contract.toml`):
//! its limits are its own [`Config`], as nginx's are its configuration, and a configuration
//! other than the default is how the tests make it break its contract.

#![warn(missing_docs)]

mod admission;
mod body;
mod connections;
mod error_log;
mod lookup;
mod memory;
mod metrics;
mod quota;
mod refusal;
mod request_id;
mod timing;
mod validation;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderName, StatusCode};

use plimsoll_tower::HoldLayer;

use admission::Pool;
use refusal::Refusal;

pub use body::Bodies;
pub use connections::Bounds;
pub use error_log::ErrorLines;
/// The status type of [`Config::search_refusal`].
pub use http::StatusCode as Status;
pub use lookup::{Calling, OnFailure, TempLeak};
pub use metrics::SeriesLie;
pub use request_id::RequestIds;
pub use timing::ServerTiming;

/// Serves the service with `config` on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, config: &Config) -> std::io::Result<()> {
    connections::serve(listener, app(config)?, config.connections).await
}

/// The order a pool's waiting requests start in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The oldest first.
    Fifo,
    /// The newest first.
    Lifo,
}

/// The service's limits: its own configuration, which its contract describes.
#[derive(Debug, Clone)]
pub struct Config {
    /// `GET /search`'s workers; it has no queue.
    pub search_workers: usize,
    /// What a full `/search` answers.
    pub search_refusal: StatusCode,
    /// The `Retry-After` seconds a full `/search` sends, if any.
    pub search_retry_after: Option<u64>,
    /// The error a full `/search`'s JSON body names (`{"error":"too many searches"}`).
    pub search_refusal_error: &'static str,
    /// `POST /reports`' workers.
    pub reports_workers: usize,
    /// How many `/reports` requests may wait for a worker.
    pub reports_queue: usize,
    /// The order they start in.
    pub reports_order: Order,
    /// How long a `/reports` request may wait before it is refused `503` (none: for ever).
    pub reports_queue_timeout: Option<std::time::Duration>,
    /// `GET /tenant`'s workers, for each `X-Api-Key` value apart (else for all keys together).
    pub tenant_workers: usize,
    /// Whether each key has workers of its own.
    pub tenant_per_key: bool,
    /// `GET /quota`'s sustained rate, requests a second.
    pub quota_rate: u32,
    /// How many `/quota` requests beyond the rate are served at once.
    pub quota_burst: u32,
    /// Whether each `X-Api-Key` value has a bucket of its own (else all keys share one).
    pub quota_per_key: bool,
    /// The quota `/quota`'s `RateLimit-Policy` field advertises: the bucket, `quota_burst + 1`,
    /// when honest; none: no RateLimit fields.
    pub quota_advertised: Option<u32>,
    /// The text a spent quota's refusal body is (`quota spent, try later`).
    pub quota_refusal_body: &'static str,
    /// Whether a refusal closes its connection (`Connection: close`) instead of keeping it.
    pub close_after_refusal: bool,
    /// Whether the hold hook (`X-Plimsoll-Hook: hold=STAGE:MS`) is honoured.
    pub hooks: bool,
    /// Whether a search's query is validated (`q`, when given, once and 1 to 64 bytes) before
    /// it takes a worker; else every query is served.
    pub search_validation: bool,
    /// The code a refused query's JSON body names (`{"code":"invalid_query"}`).
    pub invalid_query_code: &'static str,
    /// `GET /lookup`'s workers.
    pub lookup_workers: usize,
    /// How many `/lookup` requests may wait for a worker, oldest first.
    pub lookup_queue: usize,
    /// The dependency `/lookup` calls (`LOOKUP_URL`); none: it answers `502`.
    pub lookup_url: Option<String>,
    /// How `/lookup` calls its dependency (awaited, unless a variant breaks it).
    pub lookup_calling: Calling,
    /// What a lookup whose call failed answers (`502`, unless a variant hides the failure).
    pub lookup_on_failure: OnFailure,
    /// How long a lookup may take from its arrival at the pool, its wait included, before it is
    /// answered `504` (none: as long as its dependency takes).
    pub lookup_deadline: Option<std::time::Duration>,
    /// The folder lookups spool their answers in (none: the system's temp folder).
    pub temp_dir: Option<std::path::PathBuf>,
    /// Which lookups leave their temp file behind (none, unless a variant breaks it).
    pub temp_leak: TempLeak,
    /// The memory a `/reports` request may need, in MB, estimated from its range before it
    /// takes a worker (none: every report is run).
    pub reports_memory_cap_mb: Option<u64>,
    /// Whether `/metrics` serves the pools' series.
    pub metrics: bool,
    /// How the pools' series misreport what runs (a lying variant's), if they do.
    pub series_lie: Option<SeriesLie>,
    /// How answers carry `X-Request-Id`.
    pub request_ids: RequestIds,
    /// How a pool's served answers report their time in `Server-Timing`.
    pub server_timing: ServerTiming,
    /// The file error answers are logged to, one line each (none: no error log).
    pub error_log: Option<std::path::PathBuf>,
    /// How the error lines are written.
    pub error_lines: ErrorLines,
    /// The claim of its effective values the service serves at `GET /contract`, as the
    /// deployment gives it (its contract's JSON); none: no claim is served.
    pub claim: Option<String>,
    /// Its connections' head timeout and cap.
    pub connections: Bounds,
    /// How `/reports`' bodies are read: at most 64 KiB, none stalled for two seconds.
    pub report_bodies: Bodies,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            search_workers: 2,
            search_refusal: StatusCode::TOO_MANY_REQUESTS,
            search_retry_after: Some(1),
            search_refusal_error: "too many searches",
            reports_workers: 1,
            reports_queue: 3,
            reports_order: Order::Lifo,
            reports_queue_timeout: Some(std::time::Duration::from_secs(2)),
            tenant_workers: 1,
            tenant_per_key: true,
            quota_rate: 5,
            quota_burst: 2,
            quota_per_key: true,
            quota_advertised: Some(3),
            quota_refusal_body: "quota spent, try later\n",
            close_after_refusal: false,
            hooks: false,
            search_validation: true,
            invalid_query_code: "invalid_query",
            lookup_workers: 3,
            lookup_queue: 2,
            lookup_url: None,
            lookup_calling: Calling::Awaited,
            lookup_on_failure: OnFailure::BadGateway,
            lookup_deadline: Some(std::time::Duration::from_secs(4)),
            temp_dir: None,
            temp_leak: TempLeak::Never,
            reports_memory_cap_mb: Some(256),
            metrics: true,
            series_lie: None,
            request_ids: RequestIds::Checked,
            server_timing: ServerTiming::Measured,
            error_log: None,
            error_lines: ErrorLines::Json,
            claim: None,
            connections: Bounds {
                head_timeout: Some(std::time::Duration::from_secs(2)),
                max_connections: Some(256),
                frees_places: true,
            },
            report_bodies: Bodies::default(),
        }
    }
}

/// The service's pools, each counting its refusals in the exposition that reports it.
struct Pools {
    search: Pool,
    reports: Pool,
    lookups: Pool,
    exposition: metrics::Metrics,
}

impl Pools {
    fn of(config: &Config) -> Pools {
        let exposition = metrics::Metrics::new(config.series_lie);
        let search_refusal = Refusal::Search(
            config.search_refusal,
            config.search_refusal_error,
            config.search_retry_after,
        );
        let counted = |refusal, name| (refusal, exposition.refusals(name));
        let pools = Pools {
            search: Pool::new(
                config.search_workers,
                0,
                Order::Fifo,
                None,
                counted(search_refusal, "search"),
            ),
            reports: Pool::new(
                config.reports_workers,
                config.reports_queue,
                config.reports_order,
                config.reports_queue_timeout,
                counted(Refusal::Reports, "reports"),
            ),
            lookups: Pool::new(
                config.lookup_workers,
                config.lookup_queue,
                Order::Fifo,
                None,
                counted(Refusal::Reports, "lookup"),
            ),
            exposition: exposition.clone(),
        };
        for (name, pool) in [
            ("search", &pools.search),
            ("reports", &pools.reports),
            ("lookup", &pools.lookups),
        ] {
            exposition.watch(name, pool);
        }
        pools
    }
}

/// The service's routes, each pool's limit outside the hold hook, and `/search`'s validation
/// and `/reports`' memory estimate outside their limits (a bad query or a report too large
/// never takes a worker). Fails only when the error log cannot be opened.
pub fn app(config: &Config) -> std::io::Result<Router> {
    let hold = HoldLayer::new(HeaderName::from_static("x-plimsoll-hook")).enabled(config.hooks);
    let pools = Pools::of(config);
    let query_check = validation::Validation {
        enabled: config.search_validation,
        code: config.invalid_query_code,
    };
    let tenants = Tenants::new(config.tenant_workers, config.tenant_per_key);
    let quota = quota::Quota::new(
        (config.quota_rate, config.quota_burst),
        config.quota_per_key,
        config.quota_advertised,
        config.quota_refusal_body,
    );
    let dependency = lookups(config, pools.lookups.clone());
    let cap = memory::MemoryCap(config.reports_memory_cap_mb);
    let timed = config.server_timing;
    let router = reporting(config, pools.exposition)
        .route(
            "/lookup",
            get(lookup::lookup)
                .with_state(dependency)
                .layer(middleware::from_fn_with_state(
                    (pools.lookups, timed),
                    admit,
                ))
                .layer(middleware::from_fn_with_state(
                    config.lookup_deadline,
                    lookup::deadline,
                )),
        )
        .route(
            "/quota",
            get(|| async { "within quota\n" })
                .layer(middleware::from_fn_with_state(quota, quota::admit)),
        )
        .route(
            "/tenant",
            get(|| async { "tenant data\n" }).layer(hold.clone()).layer(
                middleware::from_fn_with_state((tenants, timed), admit_tenant),
            ),
        )
        .route(
            "/search",
            get(|| async { "results\n" })
                .layer(hold.clone())
                .layer(middleware::from_fn_with_state((pools.search, timed), admit))
                .layer(middleware::from_fn_with_state(
                    query_check,
                    validation::validate,
                )),
        )
        .route(
            "/reports",
            post(|body: String| async move { format!("report of {} bytes\n", body.len()) })
                .layer(hold)
                .layer(middleware::from_fn_with_state(
                    (pools.reports, timed),
                    admit,
                ))
                .layer(middleware::from_fn_with_state(cap, memory::estimate))
                .layer(middleware::from_fn_with_state(
                    config.report_bodies,
                    body::read,
                )),
        );
    let router = if config.close_after_refusal {
        router.layer(middleware::map_response(refusal::close_connection))
    } else {
        router
    };
    let log = (config.error_log.as_deref())
        .map(|path| error_log::ErrorLog::open(path, config.error_lines))
        .transpose()?;
    let ids = request_id::Ids::new(config.request_ids, log);
    Ok(router.layer(middleware::from_fn_with_state(ids, request_id::stamp)))
}

/// How `/lookup` reaches its dependency, where it spools the answers, and the pool it runs in.
fn lookups(config: &Config, pool: Pool) -> lookup::Lookup {
    let spool = lookup::Spool {
        dir: (config.temp_dir.clone()).unwrap_or_else(std::env::temp_dir),
        leak: config.temp_leak,
    };
    lookup::Lookup::new(
        config.lookup_url.clone(),
        (config.lookup_calling, config.lookup_on_failure),
        spool,
        pool,
    )
}

/// The routes that report on the service rather than serve it: its health, its metrics and the
/// claim it is given.
fn reporting(config: &Config, exposition: metrics::Metrics) -> Router {
    let mut router = Router::new().route("/healthz", get(|| async { "ok\n" }));
    if config.metrics {
        router = router.route("/metrics", get(metrics::serve).with_state(exposition));
    }
    if let Some(claim) = &config.claim {
        let claim = claim.clone();
        let json = [(http::header::CONTENT_TYPE, "application/json")];
        router = router.route("/contract", get(move || async move { (json, claim) }));
    }
    router
}

/// The pool's admission around a route: the request runs (and the hook holds it) with a
/// worker, its answer reporting how long it waited and ran, or is refused.
async fn admit(
    State((pool, timing)): State<(Pool, ServerTiming)>,
    request: Request,
    next: Next,
) -> Response {
    let arrived = Instant::now();
    match pool.acquire().await {
        Ok(permit) => {
            let started = Instant::now();
            let mut response = next.run(request).await;
            drop(permit);
            timing.stamp(&mut response, started - arrived, started.elapsed());
            response
        }
        Err(refusal) => refusal.into_response(),
    }
}

/// The most keys `/tenant` keeps pools for: past it, a new key shares the last pool (a client
/// cannot grow the map without bound).
const MAX_KEYS: usize = 1024;

/// `/tenant`'s pools: one per `X-Api-Key` value, or one for every key.
#[derive(Clone)]
struct Tenants {
    workers: usize,
    per_key: bool,
    pools: Arc<Mutex<HashMap<String, Pool>>>,
}

impl Tenants {
    fn new(workers: usize, per_key: bool) -> Tenants {
        Tenants {
            workers,
            per_key,
            pools: Arc::default(),
        }
    }

    /// The pool of `key`'s requests.
    fn pool(&self, key: &str) -> Pool {
        let key = if self.per_key { key } else { "" };
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if pools.len() >= MAX_KEYS && !pools.contains_key(key) {
            return pools
                .values()
                .next()
                .cloned()
                .expect("a full map has a pool");
        }
        pools
            .entry(key.to_owned())
            .or_insert_with(|| {
                let uncounted = Default::default();
                Pool::new(
                    self.workers,
                    0,
                    Order::Fifo,
                    None,
                    (Refusal::Reports, uncounted),
                )
            })
            .clone()
    }
}

/// `/tenant`'s admission: the request's key's pool.
async fn admit_tenant(
    State((tenants, timing)): State<(Tenants, ServerTiming)>,
    request: Request,
    next: Next,
) -> Response {
    let key = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    admit(State((tenants.pool(&key), timing)), request, next).await
}
