//! The run as a whole over time: what the HTML reports' run-wide charts draw (attempt and
//! answer rates, the refused fraction, latency percentiles, requests in flight), binned here
//! from the requests the checker itself sent and timed, so the renderers only draw.
//!
//! Every time is the checker's own clock, in ms since the run's first request could be sent.
//! The one figure that is the target's claim, its busy and queue gauges ([`Gauge`]), is kept
//! apart and named as such: a chart may draw it, never as an observation.
//!
//! The bins, not the requests, are kept: a soak sends thousands of requests, and the JSON
//! report must stay a size people open.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the series of the requests sent to no pool's endpoint (a health or metrics
/// read, a request the check timed without a pool).
pub const OTHER: &str = "other requests";

/// The most bins a series is cut into: enough for a smooth line at 1400 px, few enough that
/// a bin holds several requests.
const MAX_BINS: f64 = 150.0;

/// The bin widths a run may get, ms: the first that cuts the run into at most [`MAX_BINS`].
/// Never narrower than 100 ms: a narrower bin holds one request or none, and its rate is noise.
const BIN_WIDTHS_MS: [f64; 10] = [
    100.0, 250.0, 500.0, 1000.0, 2000.0, 5000.0, 10_000.0, 30_000.0, 60_000.0, 300_000.0,
];

/// The run over time, per pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunSeries {
    /// The width of every bin, ms (every series of the run shares it).
    pub bin_ms: f64,
    /// The run's length as the series count it: the last request's end, ms.
    pub end_ms: f64,
    /// One series per pool the run loaded, and one of [`OTHER`] requests when it sent any.
    pub pools: Vec<PoolSeries>,
    /// Stretches of the run worth naming on the time axis: each check of a `check` run, the
    /// warm-up of a load run.
    pub phases: Vec<Span>,
    /// When the run's fault (`check --fault`) was on. The proxy carries every request of the
    /// run, so it is the whole run; `None` without a fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Span>,
    /// The `--baseline` run's series, when its report holds one, for the charts to draw beside
    /// this run's. Not written: it is the baseline file's own.
    #[serde(skip)]
    pub baseline: Option<Box<RunSeries>>,
}

/// A named stretch of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Span {
    /// What it was: a check's id, `warm-up`, the fault's spec.
    pub label: String,
    /// Its start, ms since the run's start.
    pub from_ms: f64,
    /// Its end, ms since the run's start.
    pub to_ms: f64,
}

/// One pool's requests over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PoolSeries {
    /// The pool (`digitize`), or [`OTHER`].
    pub pool: String,
    /// Bin `i` covers `[i, i + 1) × bin_ms`.
    pub bins: Vec<Bin>,
    /// What the requests in flight are drawn against: the pool's workers, and its workers
    /// plus queue places (the most it holds without refusing).
    pub limits: Vec<Limit>,
    /// The pool's busy and queue gauges as the target's `/metrics` claimed them, when the run
    /// read them (load runs): its claim, stamped with when the checker read it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gauges: Vec<Gauge>,
    /// The refused fraction the queueing model predicts, when the run has a prediction (the
    /// steady and overload load profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_refused: Option<Band>,
}

/// What the requests of one bin did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bin {
    /// Requests sent in the bin.
    pub sent: u32,
    /// Answers (any status) received in the bin.
    pub answered: u32,
    /// Requests sent in the bin that ended in a success or a refusal: what a refused fraction
    /// counts (the load prediction's denominator).
    pub counted: u32,
    /// Of those, the refusals.
    pub refused: u32,
    /// The most requests in flight (sent, not yet answered or given up) at once in the bin.
    pub in_flight: u32,
    /// Latency of the successful answers received in the bin, 50th percentile, ms.
    pub p50_ms: Option<f64>,
    /// 90th percentile.
    pub p90_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
}

/// A horizontal line on the in-flight chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Limit {
    /// What it is: `workers`, `workers + queue`.
    pub label: String,
    /// Requests.
    pub value: f64,
}

/// One reading of the target's gauges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gauge {
    /// When the checker read it, ms since the run's start.
    pub at_ms: f64,
    /// The busy workers gauge; `None` when it could not be read.
    pub busy: Option<f64>,
    /// The queue depth gauge.
    pub queued: Option<f64>,
}

/// The accepted interval of a predicted refused fraction, for the stretch it judges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Band {
    /// The model's refused fraction.
    pub predicted: f64,
    /// The least accepted.
    pub low: f64,
    /// The most accepted.
    pub high: f64,
    /// The stretch whose attempts the verdict counts (after the warm-up), ms since the start.
    pub from_ms: f64,
    /// Its end.
    pub to_ms: f64,
}

/// One request as the checker timed it: what a series is binned from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    /// Sent, ms since the run's start.
    pub sent_ms: f64,
    /// Answered or given up, ms since the run's start.
    pub end_ms: f64,
    /// An HTTP answer arrived.
    pub answered: bool,
    /// The answer was a success.
    pub ok: bool,
    /// The answer was the contract's refusal.
    pub refused: bool,
}

/// A time as a usable number: NaN, infinities and negatives (clock hiccups) become 0.
fn clean(ms: f64) -> f64 {
    if ms.is_finite() && ms > 0.0 { ms } else { 0.0 }
}

impl RunSeries {
    /// The bin width for a run of `end_ms`: the narrowest that keeps it to [`MAX_BINS`].
    pub fn bin_width(end_ms: f64) -> f64 {
        let end = clean(end_ms);
        BIN_WIDTHS_MS
            .into_iter()
            .find(|w| end / w <= MAX_BINS)
            .unwrap_or(BIN_WIDTHS_MS[BIN_WIDTHS_MS.len() - 1])
    }

    /// A run whose pools sent `pools` (each a name, its limits and its requests), binned
    /// alike; the run ends at the last request's end or phase's end.
    pub fn new(pools: Vec<(String, Vec<Limit>, Vec<Sent>)>, phases: Vec<Span>) -> RunSeries {
        let end_ms = pools
            .iter()
            .flat_map(|(_, _, sent)| sent.iter().map(|s| clean(s.end_ms).max(clean(s.sent_ms))))
            .chain(phases.iter().map(|p| clean(p.to_ms)))
            .fold(0.0, f64::max);
        let bin_ms = RunSeries::bin_width(end_ms);
        // A run that sent anything has a bin, even when it all happened at time zero.
        let sent_any = pools.iter().any(|(_, _, sent)| !sent.is_empty());
        let bins = ((end_ms / bin_ms).ceil() as usize).max(usize::from(sent_any));
        RunSeries {
            bin_ms,
            end_ms,
            pools: pools
                .into_iter()
                .map(|(pool, limits, sent)| PoolSeries {
                    pool,
                    bins: binned(&sent, bin_ms, bins),
                    limits,
                    gauges: Vec::new(),
                    predicted_refused: None,
                })
                .collect(),
            phases,
            fault: None,
            baseline: None,
        }
    }
}

/// What a pool's requests in flight are drawn against: its workers, and its workers plus its
/// queue places when the queue is bounded (the most it holds without refusing).
pub fn limits(workers: u32, queue: Option<u32>) -> Vec<Limit> {
    let mut out = vec![Limit {
        label: format!("workers ({workers})"),
        value: f64::from(workers),
    }];
    if let Some(queue) = queue.filter(|q| *q > 0) {
        out.push(Limit {
            label: format!("workers + queue ({})", workers + queue),
            value: f64::from(workers + queue),
        });
    }
    out
}

/// The bin of time `t`, the last for a time at the very end.
fn bin_of(t: f64, bin_ms: f64, bins: usize) -> usize {
    ((clean(t) / bin_ms) as usize).min(bins.saturating_sub(1))
}

/// `sorted`'s `q` quantile by nearest rank.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1])
}

/// `sent` cut into `bins` bins of `bin_ms`.
fn binned(sent: &[Sent], bin_ms: f64, bins: usize) -> Vec<Bin> {
    let mut out = vec![Bin::default(); bins];
    if bins == 0 {
        return out;
    }
    let mut latencies = vec![Vec::new(); bins];
    for s in sent {
        let (start, end) = (clean(s.sent_ms), clean(s.end_ms).max(clean(s.sent_ms)));
        let at = &mut out[bin_of(start, bin_ms, bins)];
        at.sent += 1;
        if s.ok || s.refused {
            at.counted += 1;
        }
        if s.refused {
            at.refused += 1;
        }
        if s.answered {
            out[bin_of(end, bin_ms, bins)].answered += 1;
        }
        if s.ok {
            latencies[bin_of(end, bin_ms, bins)].push(end - start);
        }
    }
    for (bin, mut l) in out.iter_mut().zip(latencies) {
        l.sort_by(f64::total_cmp);
        bin.p50_ms = quantile(&l, 0.50);
        bin.p90_ms = quantile(&l, 0.90);
        bin.p99_ms = quantile(&l, 0.99);
    }
    // In flight: a sweep over sends (+1) and ends (−1), an end before a send at the same time;
    // each bin starts with what was in flight when it began.
    let mut events: Vec<(f64, i64)> = sent
        .iter()
        .flat_map(|s| {
            let start = clean(s.sent_ms);
            [(start, 1), (clean(s.end_ms).max(start), -1)]
        })
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut next) = (0i64, 0usize);
    for (i, bin) in out.iter_mut().enumerate() {
        let bin_end = (i + 1) as f64 * bin_ms;
        let mut most = now;
        while next < events.len() && (events[next].0 < bin_end || i + 1 == bins) {
            now += events[next].1;
            most = most.max(now);
            next += 1;
        }
        bin.in_flight = u32::try_from(most.max(0)).unwrap_or(u32::MAX);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(sent_ms: f64, end_ms: f64) -> Sent {
        Sent {
            sent_ms,
            end_ms,
            answered: true,
            ok: true,
            refused: false,
        }
    }

    #[test]
    fn bins_count_sends_answers_refusals_and_what_was_in_flight() {
        let refused = Sent {
            ok: false,
            refused: true,
            ..ok(100.0, 110.0)
        };
        let abandoned = Sent {
            answered: false,
            ok: false,
            ..ok(50.0, 700.0)
        };
        let run = RunSeries::new(
            vec![(
                "digitize".into(),
                Vec::new(),
                vec![ok(0.0, 300.0), ok(10.0, 320.0), refused, abandoned],
            )],
            Vec::new(),
        );
        assert_eq!(run.bin_ms, 100.0);
        assert_eq!(run.end_ms, 700.0);
        let bins = &run.pools[0].bins;
        assert_eq!(bins.len(), 7);
        let counts = |b: &Bin| (b.sent, b.counted, b.refused, b.answered);
        assert_eq!(
            counts(&bins[0]),
            (3, 2, 0, 0),
            "the abandoned one is not counted"
        );
        assert_eq!(counts(&bins[1]), (1, 1, 1, 1));
        assert_eq!(bins[3].answered, 2);
        assert_eq!(bins[3].p50_ms, Some(300.0));
        assert_eq!(bins[3].p99_ms, Some(310.0));
        assert_eq!(bins[1].p50_ms, None, "a refusal is not a latency");
        assert_eq!(bins[0].in_flight, 3);
        assert_eq!(bins[1].in_flight, 4);
        assert_eq!(
            bins[2].in_flight, 3,
            "three still in flight when the bin began"
        );
        assert_eq!(bins[6].in_flight, 1, "the abandoned one, until 700 ms");
    }

    #[test]
    fn an_empty_run_has_no_bins_and_long_runs_wider_ones() {
        let run = RunSeries::new(
            vec![("digitize".into(), Vec::new(), Vec::new())],
            Vec::new(),
        );
        assert!(run.pools[0].bins.is_empty());
        assert_eq!(RunSeries::bin_width(60_000.0), 500.0);
        assert_eq!(RunSeries::bin_width(f64::NAN), 100.0);
        assert_eq!(RunSeries::bin_width(1e12), 300_000.0);
    }
}
