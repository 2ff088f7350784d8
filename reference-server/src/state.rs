//! What every request handler shares: the effective contract, the pools, metrics, the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plimsoll_spec::model::OverflowPolicy;
use tokio_util::sync::CancellationToken;
use tracing::Dispatch;

use crate::admission::{Discipline, Pool, PoolSpec};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::mutant::Mutant;

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub config: Config,
    pub metrics: Metrics,
    pub digitize: Arc<Pool>,
    pub export: Arc<Pool>,
    /// The relay bridge's workers (R1): overflow queues (FIFO) unless the contract says `reject`.
    pub relay: Arc<Pool>,
    /// Parent of every job's cancellation token: cancelled when a shutdown's drain time is up.
    pub shutdown: CancellationToken,
    pub dispatch: Dispatch,
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
    pub fn new(config: Config, dispatch: Dispatch) -> AppState {
        let metrics = Metrics::new(&config.contract);
        let c = &config.contract.clauses;
        let pool = |name: &'static str, workers: u32, queue: u32, timeout_ms: u64| {
            let workers = workers as usize;
            let workers = if config.is(Mutant::NoAdmissionLimit) {
                usize::MAX / 2
            } else if config.is(Mutant::LimitPlusOne) {
                workers + 1
            } else {
                workers
            };
            let discipline = if config.is(Mutant::Lifo) {
                Discipline::Lifo
            } else {
                Discipline::Fifo
            };
            Pool::new(
                PoolSpec {
                    name,
                    workers,
                    queue_capacity: queue as usize,
                    discipline,
                    max_retry_after_s: Duration::from_millis(timeout_ms).as_secs().max(1),
                    window_samples: c.t3.value.window_samples as usize,
                    min_retry_after_s: c.t3.value.min_seconds,
                    empty_retry_after_s: c.t3.value.empty_window_seconds,
                },
                &metrics,
            )
        };
        let digitize = pool(
            "digitize",
            c.t1.value.digitize_workers,
            c.t2.value.digitize_queue_capacity,
            c.b1.value.digitize_timeout_ms,
        );
        let export = pool(
            "export",
            c.t1.value.export_workers,
            c.t2.value.export_queue_capacity,
            c.b1.value.export_timeout_ms,
        );
        let r1 = &c.r1.value;
        let relay = Pool::new(
            PoolSpec {
                name: "relay",
                workers: if config.is(Mutant::RelayUnbounded) {
                    usize::MAX / 2
                } else {
                    r1.relay_concurrency as usize
                },
                queue_capacity: match r1.overflow {
                    OverflowPolicy::Queue => usize::MAX / 2,
                    OverflowPolicy::Reject => 0,
                },
                discipline: Discipline::Fifo,
                max_retry_after_s: 1,
                window_samples: c.t3.value.window_samples as usize,
                min_retry_after_s: c.t3.value.min_seconds,
                empty_retry_after_s: c.t3.value.empty_window_seconds,
            },
            &metrics,
        );
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        AppState(Arc::new(Inner {
            metrics,
            digitize,
            export,
            relay,
            shutdown: CancellationToken::new(),
            dispatch,
            next_id: AtomicU64::new(0),
            id_prefix: format!("{:x}", started.as_millis()),
            config,
        }))
    }

    /// A fresh request id: unique per process run, sortable by arrival.
    pub fn new_request_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("req-{}-{n:06}", self.id_prefix)
    }
}
