//! The soak profile's resource verdicts: memory and open files read throughout the run, temp
//! files once it has drained.

use std::collections::BTreeMap;

use plimsoll_conformance::remote::process::{self, ProcessSource};
use plimsoll_conformance::verdict::CheckResult;

use super::super::Ctx;
use super::super::run::{Attempt, Outcome};
use super::super::scrape::Sample;
use super::super::verdicts::{self, Drained, Resource};
use super::Observed;

/// `L-soak.rss`, `L-soak.fds` and `L-soak.temp-files`, in that order.
pub(super) fn verdicts(
    ctx: &Ctx<'_>,
    observed: &Observed,
    drained: &Drained,
    process: &ProcessSource,
    run_ms: f64,
) -> Vec<CheckResult> {
    let so = &ctx.section().soak;
    let readings = Readings {
        ctx,
        samples: &observed.watched[0].samples,
        process,
        settled_ms: settled_ms(ctx, &observed.out.attempts),
        run_ms,
    };
    let rss = readings.stays_flat(
        Resource {
            suffix: "rss",
            title: "Resident memory stays flat",
            unit: "MB",
            scale: 1024.0 * 1024.0,
            allowed: so.rss_growth_mb,
        },
        process::RSS_METRIC,
        |s| s.rss_bytes,
    );
    let fds = readings.stays_flat(
        Resource {
            suffix: "fds",
            title: "Open file descriptors stay flat",
            unit: "fds",
            scale: 1.0,
            allowed: so.fd_growth,
        },
        process::FDS_METRIC,
        |s| s.fds,
    );
    let temp = temp_files(ctx, observed, drained);
    vec![rss, fds, temp]
}

/// When resources have settled, ms: once the users have opened their connections, from the
/// time 90 % of them had their first answer (the last few add a connection each, well within
/// the allowance; waiting for all would take θ·ln N), and never before the warm-up ends.
fn settled_ms(ctx: &Ctx<'_>, attempts: &[Attempt]) -> f64 {
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
    verdicts::percentile(&firsts, 90.0)
        .unwrap_or(warm)
        .max(warm)
}

/// The first watched server's resource readings and the settled part of the run they are
/// judged over, shared by the memory and open-file verdicts.
struct Readings<'a> {
    ctx: &'a Ctx<'a>,
    samples: &'a [Sample],
    process: &'a ProcessSource,
    settled_ms: f64,
    run_ms: f64,
}

impl Readings<'_> {
    /// `(time, value)` of every sample that has the figure.
    fn series(&self, f: fn(&Sample) -> Option<f64>) -> Vec<(f64, f64)> {
        self.samples
            .iter()
            .filter_map(|s| f(s).map(|v| (s.t_ms, v)))
            .collect()
    }

    /// Why the figure cannot be judged, if it cannot: nothing to read it from.
    fn missing(&self, name: &str, v: &[(f64, f64)]) -> Option<String> {
        match self.process {
            ProcessSource::Unavailable(why) => Some(why.clone()),
            ProcessSource::Metrics if v.is_empty() => Some(format!(
                "no --pid given and the target exposes no {name} in /metrics"
            )),
            _ => None,
        }
    }

    /// The figure's verdict: its settled medians and slope within the allowance, with where
    /// it was read from as evidence.
    fn stays_flat(
        &self,
        r: Resource<'_>,
        metric: &str,
        f: fn(&Sample) -> Option<f64>,
    ) -> CheckResult {
        let values = self.series(f);
        let (settled_ms, run_ms) = (self.settled_ms, self.run_ms);
        let mut result = verdicts::stays_flat(
            &self.ctx.expect,
            r,
            verdicts::settled_medians(&values, settled_ms, run_ms),
            verdicts::settled_slope(&values, settled_ms, run_ms),
            self.missing(metric, &values),
        );
        result
            .evidence
            .push(format!("read from {}", self.process.describe()));
        result
    }
}

/// `L-soak.temp-files`: temp files back to their count once drained, with the abandoned
/// requests (those whose temp dirs are at risk) and the most read at once as evidence.
fn temp_files(ctx: &Ctx<'_>, observed: &Observed, drained: &Drained) -> CheckResult {
    let attempts = &observed.out.attempts;
    let samples = &observed.watched[0].samples;
    let abandoned = attempts
        .iter()
        .filter(|a| a.outcome == Outcome::Abandoned)
        .count();
    let max_during = samples.iter().filter_map(|s| s.temp_files).reduce(f64::max);
    verdicts::temp_files(
        &ctx.expect,
        drained,
        ctx.section().soak.temp_files_growth,
        abandoned,
        max_during,
    )
}
