//! `GET /metrics`: the pools' own series in the Prometheus text format, in the service's own
//! names — `pool_busy`, `pool_waiting`, `pool_workers` and `pool_refused_total`, each labelled
//! with its pool — which its contract maps to what the checker cross-checks
//! (`[pools.NAME.metrics]`). The gauges are read from the pools at each scrape, so they never
//! drift from the admission they describe; the refusal counter is the pool's own.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::admission::Pool;

/// A series' labels: its pool.
type Labels = Vec<(&'static str, &'static str)>;

/// The registry, its families, and the pools the gauges are read from.
#[derive(Clone)]
pub(crate) struct Metrics {
    registry: Arc<Registry>,
    busy: Family<Labels, Gauge>,
    waiting: Family<Labels, Gauge>,
    workers: Family<Labels, Gauge>,
    refused: Family<Labels, Counter>,
    pools: Arc<Mutex<Vec<(&'static str, Pool)>>>,
    /// Whether the busy gauge reports at most one, whatever runs (a lying variant's).
    busy_lies: bool,
}

impl Metrics {
    /// The four families, registered; no pool yet.
    pub(crate) fn new(busy_lies: bool) -> Metrics {
        let (busy, waiting, workers) = Default::default();
        let refused = Family::<Labels, Counter>::default();
        let mut registry = Registry::default();
        registry.register("pool_busy", "Requests running", Family::clone(&busy));
        registry.register(
            "pool_waiting",
            "Requests waiting for a worker",
            Family::clone(&waiting),
        );
        registry.register("pool_workers", "Workers", Family::clone(&workers));
        registry.register("pool_refused", "Requests refused", refused.clone());
        Metrics {
            registry: Arc::new(registry),
            busy,
            waiting,
            workers,
            refused,
            pools: Arc::default(),
            busy_lies,
        }
    }

    /// The refusal counter of the pool named `name`, for the pool to count with.
    pub(crate) fn refusals(&self, name: &'static str) -> Counter {
        self.refused.get_or_create(&vec![("pool", name)]).clone()
    }

    /// Reports `pool`'s gauges under `name` from now on.
    pub(crate) fn watch(&self, name: &'static str, pool: &Pool) {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        pools.push((name, pool.clone()));
    }
}

/// The exposition, the gauges set from the pools first.
pub(crate) async fn serve(State(metrics): State<Metrics>) -> Response {
    let pools = metrics
        .pools
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for (name, pool) in pools {
        let now = pool.snapshot();
        let busy = if metrics.busy_lies {
            now.busy.min(1)
        } else {
            now.busy
        };
        let labels = vec![("pool", name)];
        metrics.busy.get_or_create(&labels).set(busy as i64);
        metrics
            .waiting
            .get_or_create(&labels)
            .set(now.waiting as i64);
        metrics
            .workers
            .get_or_create(&labels)
            .set(now.workers as i64);
    }
    let mut text = String::new();
    if let Err(e) = encode(&mut text, &metrics.registry) {
        return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
