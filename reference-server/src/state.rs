//! What every request handler shares: the effective contract, the pools, metrics, the log.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::HeaderName;
use axum::response::Response;
use plimsoll_spec::Pool;
use tokio_util::sync::CancellationToken;
use tower::util::BoxCloneSyncService;
use tracing::Dispatch;

use crate::admission::{PoolSpec, WorkerPool};
use crate::components::Components;
use crate::config::Config;
use crate::logging::{LogWriter, RequestLog};
use crate::metrics::Metrics;
use crate::problem::Responder;
use crate::upload_budget::UploadBudget;

/// One server's shared state, cheap to clone into every handler and worker; reads through to
/// [`Inner`].
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

/// What an [`AppState`] shares, behind one `Arc`.
pub struct Inner {
    /// The settings the server was started with, the effective contract included.
    pub config: Config,
    /// Every metric `/metrics` exposes.
    pub metrics: Metrics,
    /// The digitize endpoint's workers and queue (T1–T3).
    pub digitize: Arc<WorkerPool>,
    /// The export endpoint's workers and queue (T1–T3).
    pub export: Arc<WorkerPool>,
    /// The relay bridge's workers (R1): overflow queues (FIFO) unless the contract says `reject`.
    pub relay: Arc<WorkerPool>,
    /// The bytes of request bodies held now, against the server's budget (B5).
    pub upload_budget: Arc<UploadBudget>,
    /// Parent of every job's cancellation token: cancelled when a shutdown's drain time is up.
    pub shutdown: CancellationToken,
    /// Cancelled at the first stop signal (and with `shutdown`): relay work is cut, not drained
    /// (R6: the bridge stops without waiting for its workers).
    pub relay_stop: CancellationToken,
    /// The server's own `tracing` dispatcher, applied to every request future so that servers
    /// sharing a process keep separate logs.
    pub dispatch: Dispatch,
    /// The writer behind `dispatch` (its lines are written by a thread of their own).
    pub log: LogWriter,
    /// Requests' lines, to the same writer.
    pub requests: RequestLog,
    /// The header names the contract spells, parsed once.
    pub headers: ContractHeaders,
    /// This server's API, for the relay bridge.
    pub api: ApiHandle,
    next_id: AtomicU64,
    id_prefix: String,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// Builds the pools the contract sizes, with their metrics, around `config`; `dispatch` and
    /// `log` are the server's log, opened by [`crate::Server::new`].
    pub fn new(config: Config, dispatch: Dispatch, log: LogWriter) -> AppState {
        let metrics = Metrics::new(&config.contract);
        let t3 = config.contract.retry_after();
        // clause: R1 — requests beyond the relay workers queue, never refused
        let [digitize, export, relay] = [Pool::Digitize, Pool::Export, Pool::Relay].map(|pool| {
            let limits = config.contract.pool(pool);
            build_pool(
                &config,
                &metrics,
                pool,
                limits.workers,
                limits.queue_capacity.map_or(usize::MAX / 2, |q| q as usize),
                t3.max.seconds(&limits, t3.min_seconds),
            )
        });
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let shutdown = CancellationToken::new();
        let budget_mb = config.contract.upload_budget_mb();
        let upload_budget = UploadBudget::new(
            config
                .components()
                .upload_budget
                .budget_bytes(budget_mb)
                .unwrap_or(u64::MAX),
        );
        AppState(Arc::new(Inner {
            upload_budget,
            headers: ContractHeaders::new(&config),
            metrics,
            digitize,
            export,
            relay,
            relay_stop: shutdown.child_token(),
            shutdown,
            dispatch,
            requests: RequestLog::new(config.components().log_format.clone(), log.clone()),
            log,
            api: ApiHandle::default(),
            next_id: AtomicU64::new(0),
            id_prefix: format!("{:x}", started.as_millis()),
            config,
        }))
    }

    /// The pieces the server is built from (see [`Config::components`]).
    pub fn components(&self) -> &Components {
        self.config.components()
    }

    /// The workers and queue of `pool`, for code told which pool it serves.
    pub fn pool(&self, pool: Pool) -> &Arc<WorkerPool> {
        match pool {
            Pool::Digitize => &self.digitize,
            Pool::Export => &self.export,
            Pool::Relay => &self.relay,
        }
    }

    /// Answers errors: the one way every endpoint turns an error into a response.
    pub fn problems(&self) -> Responder<'_> {
        Responder {
            contract: &self.config.contract,
            mapper: self.components().answers.as_ref(),
            metrics: &self.metrics,
            retry_after_header: &self.headers.retry_after,
        }
    }

    /// Waits (at most 2 s) until every line logged so far is on the log's sink; false if the
    /// sink is stuck.
    pub fn flush_log(&self) -> bool {
        self.log.flush(Duration::from_secs(2))
    }

    /// The id of a request with these headers (F4): its well-formed client id, else a fresh one.
    /// The HTTP API and a relay envelope refused before it reaches the API both take it here.
    pub fn request_id_of(&self, headers: &axum::http::HeaderMap) -> String {
        let f4 = &self.config.contract.clauses().f4.value;
        headers
            .get(&self.headers.request_id)
            .and_then(|v| v.to_str().ok())
            .filter(|v| f4.accepts(v))
            .map_or_else(|| self.new_request_id(), str::to_owned)
    }

    /// A fresh request id: unique per process run, sortable by arrival.
    pub fn new_request_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        // `req-{prefix}-{n:06}`, without `format!`: one of these per request.
        let mut id = Vec::with_capacity(self.id_prefix.len() + 12);
        id.extend_from_slice(b"req-");
        id.extend_from_slice(self.id_prefix.as_bytes());
        id.push(b'-');
        crate::logging::push_padded(&mut id, n, 6);
        String::from_utf8(id).unwrap_or_default()
    }
}

/// One pool, sized by the server's [`crate::admission::PoolSizing`], its queue served by its
/// [`crate::admission::QueueDiscipline`], its Retry-After from its
/// [`crate::retry_after::RetryAfterPolicy`].
fn build_pool(
    config: &Config,
    metrics: &Metrics,
    pool: Pool,
    workers: u32,
    queue_capacity: usize,
    max_retry_after_s: u64,
) -> Arc<WorkerPool> {
    let parts = config.components();
    WorkerPool::new(
        PoolSpec {
            pool,
            workers: parts.sizing.workers(pool, workers as usize),
            queue_capacity: parts.sizing.queue_capacity(pool, queue_capacity),
            discipline: parts.discipline.clone(),
            max_retry_after_s,
        },
        parts
            .retry_after
            .estimator(pool, config.contract.retry_after()),
        metrics,
    )
}

/// The header names the contract spells, parsed once.
pub struct ContractHeaders {
    /// The request id every response carries (F4).
    pub request_id: HeaderName,
    /// The delay a refusal advises (T3).
    pub retry_after: HeaderName,
    /// A job's queue and run times, so a checker can place it on a timeline.
    pub server_timing: HeaderName,
    /// The test hooks' directives (read on every pipeline request).
    pub hook: HeaderName,
}

impl ContractHeaders {
    fn new(config: &Config) -> ContractHeaders {
        let c = &config.contract;
        ContractHeaders {
            request_id: header_name(&c.observability().request_id_header),
            retry_after: header_name(&c.retry_after().header),
            server_timing: header_name(&c.observability().server_timing_header),
            hook: header_name(&c.hooks().header),
        }
    }
}

/// A header name the contract spells (validated as a token when the contract is written).
fn header_name(name: &str) -> HeaderName {
    HeaderName::try_from(name)
        .unwrap_or_else(|_| HeaderName::from_static("x-plimsoll-invalid-header-name"))
}

/// The server's API, built once by `server` and handed to the relay bridge, which performs
/// envelopes against it in-process (same routes, request ids, log lines and hooks as HTTP). The
/// API holds this state, so the handle is cleared when serving ends, breaking that cycle.
#[derive(Default)]
pub struct ApiHandle(RwLock<Option<ApiService>>);

/// The server's API as the bridge calls it: a service, so the bridge never names the HTTP layer.
pub type ApiService = BoxCloneSyncService<Request, Response, Infallible>;

impl ApiHandle {
    /// Hands the bridge the API, once it is built.
    pub fn set(&self, api: ApiService) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(api);
    }

    /// Drops the API when serving ends, breaking the cycle through the state.
    pub fn clear(&self) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// The API, while the server serves.
    pub fn get(&self) -> Option<ApiService> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
