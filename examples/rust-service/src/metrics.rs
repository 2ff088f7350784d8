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
    /// How the series misreport what runs (a lying variant's), if they do.
    lie: Option<SeriesLie>,
}

/// A way the pools' series can misreport what runs, one series each, for the variants that lie
/// to the checker's cross-check (T1): each must fail by what the client saw, not by what the
/// service says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesLie {
    /// The busy gauge reports at most one, whatever runs.
    BusyCappedAtOne,
    /// The queue gauge reports nothing waiting, whatever waits.
    NothingWaiting,
    /// The workers gauge reports one worker more than the pool has.
    OneMoreWorker,
    /// The refusal counter never counts.
    RefusalsUncounted,
}

impl SeriesLie {
    /// What the gauge `gauge` lies about reports of `actual` under `lie` (the truth when the
    /// lie is about another series, or there is none).
    fn gauge(lie: Option<SeriesLie>, gauge: SeriesLie, actual: usize) -> i64 {
        let reported = match lie {
            Some(lie) if lie == gauge => lie.told(actual),
            _ => actual,
        };
        i64::try_from(reported).unwrap_or(i64::MAX)
    }

    /// The value this lie tells of `actual`.
    fn told(self, actual: usize) -> usize {
        match self {
            SeriesLie::BusyCappedAtOne => actual.min(1),
            SeriesLie::NothingWaiting => 0,
            SeriesLie::OneMoreWorker => actual + 1,
            SeriesLie::RefusalsUncounted => actual,
        }
    }
}

impl Metrics {
    /// The four families, registered; no pool yet.
    pub(crate) fn new(lie: Option<SeriesLie>) -> Metrics {
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
            lie,
        }
    }

    /// The refusal counter of the pool named `name`, for the pool to count with (one the
    /// exposition never shows, when the refusals go uncounted).
    pub(crate) fn refusals(&self, name: &'static str) -> Counter {
        let shown = self.refused.get_or_create(&vec![("pool", name)]).clone();
        if self.lie == Some(SeriesLie::RefusalsUncounted) {
            return Counter::default();
        }
        shown
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
        let labels = vec![("pool", name)];
        let lie = metrics.lie;
        for (family, gauge, actual) in [
            (&metrics.busy, SeriesLie::BusyCappedAtOne, now.busy),
            (&metrics.waiting, SeriesLie::NothingWaiting, now.waiting),
            (&metrics.workers, SeriesLie::OneMoreWorker, now.workers),
        ] {
            family
                .get_or_create(&labels)
                .set(SeriesLie::gauge(lie, gauge, actual));
        }
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
