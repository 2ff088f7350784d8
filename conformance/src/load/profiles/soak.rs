//! The soak profile's resource verdicts: memory and open files read throughout the run, temp
//! files once it has drained.

use std::collections::BTreeMap;

use super::super::Ctx;
use super::super::run::Outcome;
use super::super::scrape::{self, ProcessSource, Sample};
use super::super::verdicts::{self, Drained, Resource};
use super::Observed;
use crate::verdict::CheckResult;

/// `L-soak.rss`, `L-soak.fds` and `L-soak.temp-files`, in that order.
pub(super) fn verdicts(
    ctx: &Ctx,
    observed: &Observed,
    drained: &Drained,
    process: &ProcessSource,
    run_ms: f64,
) -> Vec<CheckResult> {
    let so = &ctx.section().soak;
    let (attempts, samples) = (&observed.out.attempts, &observed.watched[0].samples);
    let series = |f: fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter_map(|s| f(s).map(|v| (s.t_ms, v)))
            .collect()
    };
    // Resources settle once the users have opened their connections: from the time 90 % of
    // them had their first answer (the last few add a connection each, well within the
    // allowance; waiting for all would take θ·ln N).
    let mut first = BTreeMap::new();
    for a in attempts {
        let end = a.sent_ms + a.latency_ms;
        first
            .entry(a.user)
            .and_modify(|t: &mut f64| *t = t.min(end))
            .or_insert(end);
    }
    let firsts: Vec<f64> = first.into_values().collect();
    let warm = ctx.section().warm_up_ms as f64;
    let settled_ms = verdicts::percentile(&firsts, 90.0)
        .unwrap_or(warm)
        .max(warm);
    let missing = |name: &str, v: &[(f64, f64)]| match process {
        ProcessSource::Unavailable(why) => Some(why.clone()),
        ProcessSource::Metrics if v.is_empty() => Some(format!(
            "no --pid given and the target exposes no {name} in /metrics"
        )),
        _ => None,
    };
    let resource = |r: Resource<'_>, metric: &str, f: fn(&Sample) -> Option<f64>| {
        let values = series(f);
        let mut result = verdicts::stays_flat(
            &ctx.expect,
            r,
            verdicts::settled_medians(&values, settled_ms, run_ms),
            verdicts::settled_slope(&values, settled_ms, run_ms),
            missing(metric, &values),
        );
        result
            .evidence
            .push(format!("read from {}", process.describe()));
        result
    };
    let rss = resource(
        Resource {
            suffix: "rss",
            title: "Resident memory stays flat",
            unit: "MB",
            scale: 1024.0 * 1024.0,
            allowed: so.rss_growth_mb,
        },
        scrape::RSS_METRIC,
        |s| s.rss_bytes,
    );
    let fds = resource(
        Resource {
            suffix: "fds",
            title: "Open file descriptors stay flat",
            unit: "fds",
            scale: 1.0,
            allowed: so.fd_growth,
        },
        scrape::FDS_METRIC,
        |s| s.fds,
    );
    let abandoned = attempts
        .iter()
        .filter(|a| a.outcome == Outcome::Abandoned)
        .count();
    let max_during = samples.iter().filter_map(|s| s.temp_files).reduce(f64::max);
    let temp = verdicts::temp_files(
        &ctx.expect,
        drained,
        so.temp_files_growth,
        abandoned,
        max_during,
    );
    vec![rss, fds, temp]
}
