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

/// The sum of the samples of `series` in a Prometheus text exposition: every sample of its
/// name that carries each of its labels with the same value (others may be there too); None
/// when there is none. Label values are compared unescaped (`\"`, `\\`, `\n`).
pub fn series_value(text: &str, series: &plimsoll_spec::model::Series) -> Option<f64> {
    text.lines()
        .filter_map(sample)
        .filter(|(name, labels, _)| {
            *name == series.name
                && (series.labels.iter())
                    .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, value)| value)
        .reduce(|a, b| a + b)
}

/// A sample's labels, by name, unescaped.
type Labels = Vec<(String, String)>;

/// One sample line, `name{label="value",…} value [timestamp]`: its name, labels and value;
/// None for a comment, a blank line or anything malformed.
fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let (name, mut rest) = line.split_at(end);
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = label_set(body)?;
        labels = parsed;
        rest = after;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name, labels, value))
}

/// The labels of a sample, read from just after its `{`: the pairs and what follows the `}`.
fn label_set(mut s: &str) -> Option<(Labels, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let (key, rest) = s.split_once('=')?;
        let mut chars = rest.strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let close = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key.trim().to_owned(), value));
        s = &rest[1 + close + 1..];
    }
}

#[cfg(test)]
mod tests {
    use plimsoll_spec::model::Series;

    use super::*;

    fn series(name: &str, labels: &[(&str, &str)]) -> Series {
        Series {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        }
    }

    /// A series is picked by its name and every declared label, however the exposition orders
    /// or escapes them; its samples are summed; a prefix of another name is not it.
    #[test]
    fn a_series_is_read_by_name_and_labels() {
        let text = "# HELP pool_busy Busy.\n# TYPE pool_busy gauge\n\
                    pool_busy{pool=\"reports\",key=\"a\"} 2\n\
                    pool_busy{key=\"b\", pool=\"reports\"} 1 1700000000\n\
                    pool_busy{pool=\"search\"} 5\n\
                    pool_busy_max{pool=\"reports\"} 9\n\
                    odd{note=\"a \\\"quoted\\\" \\\\ value\"} 3\n\
                    plain 7\n";
        assert_eq!(
            series_value(text, &series("pool_busy", &[("pool", "reports")])),
            Some(3.0)
        );
        assert_eq!(series_value(text, &series("pool_busy", &[])), Some(8.0));
        assert_eq!(
            series_value(
                text,
                &series("pool_busy", &[("pool", "reports"), ("key", "b")])
            ),
            Some(1.0)
        );
        assert_eq!(
            series_value(text, &series("odd", &[("note", "a \"quoted\" \\ value")])),
            Some(3.0)
        );
        assert_eq!(series_value(text, &series("plain", &[])), Some(7.0));
        assert_eq!(
            series_value(text, &series("pool_busy", &[("pool", "lookup")])),
            None
        );
        assert_eq!(series_value(text, &series("pool", &[])), None);
        assert_eq!(
            series_value("pool_busy{pool=\"x\" 1\n", &series("pool_busy", &[])),
            None
        );
    }
}
