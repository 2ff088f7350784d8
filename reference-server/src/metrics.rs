//! The Prometheus surface the contract lists (`[observability.metrics]`). Names, pool labels and
//! outcome labels are the spec's enums ([`MetricName`], [`Pool`], [`Outcome`]), never strings of
//! our own; a test proves the names and types here are exactly the contract's.

use plimsoll_spec::{Contract, MetricName, Outcome, Pool};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

/// The labels of a per-pool series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabel {
    /// The pool, as the contract spells it (`digitize`, `export`, `relay`).
    pub pool: &'static str,
}

impl PoolLabel {
    /// The labels of `pool`'s series.
    pub fn of(pool: Pool) -> PoolLabel {
        PoolLabel {
            pool: pool.as_str(),
        }
    }
}

/// The labels of `plimsoll_requests_total`: which pool, and how the request ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// The pool, as the contract spells it.
    pub pool: &'static str,
    /// How the request ended, as the contract spells it (`ok`, `overloaded`, …).
    pub outcome: &'static str,
}

fn wait_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Every metric of the server.
pub struct Metrics {
    registry: Registry,
    /// `plimsoll_workers_busy`: jobs running now, per pool.
    pub workers_busy: Family<PoolLabel, Gauge>,
    /// `plimsoll_workers_limit`: worker slots, per pool (T1, R1).
    pub workers_limit: Family<PoolLabel, Gauge>,
    /// `plimsoll_queue_depth`: requests waiting for a slot, per pool.
    pub queue_depth: Family<PoolLabel, Gauge>,
    /// `plimsoll_queue_wait_seconds`: arrival to worker start, per pool.
    pub queue_wait: Family<PoolLabel, Histogram, fn() -> Histogram>,
    /// `plimsoll_requests_total`: finished requests by outcome; counted through
    /// [`Metrics::outcome`], which skips the family's lookup.
    pub requests: Family<OutcomeLabels, Counter>,
    /// `plimsoll_cancellations_total`: jobs stopped because their client went away (B3).
    pub cancellations: Family<PoolLabel, Counter>,
    /// `plimsoll_temp_files`: per-request temp directories present now, counted at each scrape.
    pub temp_files: Gauge,
    /// Every `requests` series, taken from the family once: counting an answer is then one
    /// atomic add, not a lock and a hash lookup (it is on every refusal's path).
    outcomes: Vec<(Pool, Outcome, Counter)>,
}

impl Metrics {
    /// Help texts come from the contract's `[[observability.metrics]]`.
    pub fn new(contract: &Contract) -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            workers_busy: Family::default(),
            workers_limit: Family::default(),
            queue_depth: Family::default(),
            queue_wait: Family::new_with_constructor(wait_histogram),
            requests: Family::default(),
            cancellations: Family::default(),
            temp_files: Gauge::default(),
            outcomes: Vec::new(),
        };
        let r = &mut m.registry;
        for (name, gauges) in [
            (MetricName::WorkersBusy, &m.workers_busy),
            (MetricName::WorkersLimit, &m.workers_limit),
            (MetricName::QueueDepth, &m.queue_depth),
        ] {
            register(r, contract, name, gauges.clone());
        }
        register(
            r,
            contract,
            MetricName::QueueWaitSeconds,
            m.queue_wait.clone(),
        );
        register(r, contract, MetricName::RequestsTotal, m.requests.clone());
        register(
            r,
            contract,
            MetricName::CancellationsTotal,
            m.cancellations.clone(),
        );
        register(r, contract, MetricName::TempFiles, m.temp_files.clone());
        m.outcomes = Pool::ALL
            .into_iter()
            .flat_map(|pool| Outcome::ALL.map(|outcome| (pool, outcome)))
            .map(|(pool, outcome)| {
                let counter = m.requests.get_or_create(&outcome_labels(pool, outcome));
                (pool, outcome, counter.clone())
            })
            .collect();
        m
    }

    /// Creates every series of a pool at zero, so dashboards and the checker see them before
    /// the first event.
    pub fn register_pool(&self, pool: Pool) {
        let _ = self.cancellations.get_or_create(&PoolLabel::of(pool));
        for outcome in Outcome::ALL {
            let _ = self.requests.get_or_create(&outcome_labels(pool, outcome));
        }
    }

    /// Counts one finished request.
    pub fn outcome(&self, pool: Pool, outcome: Outcome) {
        match self
            .outcomes
            .iter()
            .find(|(p, o, _)| *p == pool && *o == outcome)
        {
            Some((_, _, counter)) => counter.inc(),
            None => self
                .requests
                .get_or_create(&outcome_labels(pool, outcome))
                .inc(),
        };
    }

    /// Counts one request whose client went away before its answer.
    pub fn cancelled(&self, pool: Pool) {
        self.cancellations.get_or_create(&PoolLabel::of(pool)).inc();
        self.outcome(pool, Outcome::Cancelled);
    }

    /// Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String");
        out
    }
}

fn outcome_labels(pool: Pool, outcome: Outcome) -> OutcomeLabels {
    OutcomeLabels {
        pool: pool.as_str(),
        outcome: outcome.as_str(),
    }
}

/// Registers `metric` under its client-library name (counters without `_total`: the exposition
/// appends it) with the contract's help text.
fn register(registry: &mut Registry, contract: &Contract, name: MetricName, metric: impl Metric) {
    let help = contract
        .observability()
        .metrics
        .iter()
        .find(|m| m.name == name)
        .map(|m| m.help.trim_end_matches('.').to_owned())
        .unwrap_or_default();
    registry.register(name.registered_name(), help, metric);
}
