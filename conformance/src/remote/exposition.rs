//! Reading the server's own reports: the Server-Timing header and the Prometheus text
//! exposition.

use super::*;

/// `queue;dur=1.5, run;dur=20` → (1.5, 20.0), with the embedded contract's metric names.
pub fn parse_server_timing(value: &str) -> Option<(f64, f64)> {
    server_timing_of(
        value,
        &Contract::embedded().observability().server_timing_metrics,
    )
}

/// The durations of the first two of `names` (the contract's `server_timing_metrics`: queue,
/// then run) in a Server-Timing value; None when either is missing or not a finite,
/// non-negative number.
pub fn server_timing_of(value: &str, names: &[String]) -> Option<(f64, f64)> {
    let [queue_name, run_name, ..] = names else {
        return None;
    };
    let mut queue = None;
    let mut run = None;
    for part in value.split(',') {
        let mut fields = part.trim().split(';');
        let name = fields.next()?.trim();
        let dur = fields
            .find_map(|f| f.trim().strip_prefix("dur="))
            .and_then(|d| d.trim().parse::<f64>().ok())
            .filter(|d| d.is_finite() && *d >= 0.0);
        if name == queue_name {
            queue = dur;
        } else if name == run_name {
            run = dur;
        }
    }
    Some((queue?, run?))
}

/// A series as Prometheus writes it, `name{pool="digitize"}`, for messages.
pub fn series(name: MetricName, pool: Pool) -> String {
    format!("{name}{{pool=\"{pool}\"}}")
}

/// The sum of the samples of `name` in a Prometheus text exposition, for one `pool` (or every
/// series when `pool` is empty); None when there is no such sample.
pub fn metric_value(text: &str, name: &str, pool: &str) -> Option<f64> {
    let label = format!("pool=\"{pool}\"");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            let metric = l.split(['{', ' ']).next().unwrap_or_default();
            metric == name && (pool.is_empty() || l.contains(&label))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(|a, b| a + b)
}
