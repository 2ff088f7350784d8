//! The Prometheus surface the contract lists (`[observability.metrics]`). A test proves the
//! names and types here are exactly the contract's.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabel {
    pub pool: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub pool: String,
    pub outcome: String,
}

fn wait_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The `outcome` label values of `plimsoll_requests_total`.
pub const OUTCOMES: &[&str] = &[
    "ok",
    "overloaded",
    "timeout",
    "memory_cap_exceeded",
    "stage_failed",
    "invalid",
    "cancelled",
];

/// Every metric of the server.
pub struct Metrics {
    registry: Registry,
    pub workers_busy: Family<PoolLabel, Gauge>,
    pub workers_limit: Family<PoolLabel, Gauge>,
    pub queue_depth: Family<PoolLabel, Gauge>,
    pub queue_wait: Family<PoolLabel, Histogram, fn() -> Histogram>,
    pub requests: Family<OutcomeLabels, Counter>,
    pub cancellations: Family<PoolLabel, Counter>,
    pub temp_files: Gauge,
}

impl Metrics {
    /// Help texts come from the contract's `[[observability.metrics]]`.
    pub fn new(contract: &plimsoll_spec::Contract) -> Metrics {
        let help = |name: &str| {
            contract
                .observability
                .metrics
                .iter()
                .find(|m| m.name.registered_name() == name)
                .map(|m| m.help.trim_end_matches('.').to_owned())
                .unwrap_or_default()
        };
        let mut m = Metrics {
            registry: Registry::default(),
            workers_busy: Family::default(),
            workers_limit: Family::default(),
            queue_depth: Family::default(),
            queue_wait: Family::new_with_constructor(wait_histogram),
            requests: Family::default(),
            cancellations: Family::default(),
            temp_files: Gauge::default(),
        };
        let r = &mut m.registry;
        // Counters are registered without `_total`: the exposition appends it.
        r.register(
            "plimsoll_workers_busy",
            help("plimsoll_workers_busy"),
            m.workers_busy.clone(),
        );
        r.register(
            "plimsoll_workers_limit",
            help("plimsoll_workers_limit"),
            m.workers_limit.clone(),
        );
        r.register(
            "plimsoll_queue_depth",
            help("plimsoll_queue_depth"),
            m.queue_depth.clone(),
        );
        r.register(
            "plimsoll_queue_wait_seconds",
            help("plimsoll_queue_wait_seconds"),
            m.queue_wait.clone(),
        );
        r.register(
            "plimsoll_requests",
            help("plimsoll_requests"),
            m.requests.clone(),
        );
        r.register(
            "plimsoll_cancellations",
            help("plimsoll_cancellations"),
            m.cancellations.clone(),
        );
        r.register(
            "plimsoll_temp_files",
            help("plimsoll_temp_files"),
            m.temp_files.clone(),
        );
        m
    }

    /// Creates every series of a pool at zero, so dashboards and the checker see them before
    /// the first event.
    pub fn register_pool(&self, pool: &str) {
        let _ = self.cancellations.get_or_create(&PoolLabel {
            pool: pool.to_owned(),
        });
        for outcome in OUTCOMES {
            let _ = self.requests.get_or_create(&OutcomeLabels {
                pool: pool.to_owned(),
                outcome: (*outcome).to_owned(),
            });
        }
    }

    /// Counts one finished request.
    pub fn outcome(&self, pool: &str, outcome: &str) {
        self.requests
            .get_or_create(&OutcomeLabels {
                pool: pool.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String");
        out
    }
}
