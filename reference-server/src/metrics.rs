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

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabel {
    pub pool: &'static str,
}

impl PoolLabel {
    pub fn of(pool: Pool) -> PoolLabel {
        PoolLabel {
            pool: pool.as_str(),
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub pool: &'static str,
    pub outcome: &'static str,
}

fn wait_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

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
        .observability
        .metrics
        .iter()
        .find(|m| m.name == name)
        .map(|m| m.help.trim_end_matches('.').to_owned())
        .unwrap_or_default();
    registry.register(name.registered_name(), help, metric);
}
