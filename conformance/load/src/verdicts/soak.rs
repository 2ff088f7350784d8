//! The soak profile's own verdicts: memory and file descriptors flat over the settled run
//! (`rss`, `fds`), and no temp file left once the load has drained (`temp-files`).

use plimsoll_conformance::verdict::{CheckResult, Verdict};
use plimsoll_spec::MetricName;

use super::{Drained, Expectations, percentile, verdict_of};

/// The median of a resource series' reads in the first quarter of the settled part of a run,
/// `from_ms..to_ms` (from the moment 90 % of the users had their first answer, so connections
/// being opened do not count as growth), and the median of its last quarter: a single spike
/// decides nothing. `None` with fewer than 3 reads in either quarter.
pub fn settled_medians(values: &[(f64, f64)], from_ms: f64, to_ms: f64) -> Option<(f64, f64)> {
    let span = to_ms - from_ms;
    let part = |a: f64, b: f64| -> Vec<f64> {
        values
            .iter()
            .filter(|(t, _)| *t >= from_ms + a * span && *t <= from_ms + b * span)
            .map(|(_, v)| *v)
            .collect()
    };
    let (early, late) = (part(0.0, 0.25), part(0.75, 1.0));
    if span <= 0.0 || early.len() < 3 || late.len() < 3 {
        return None;
    }
    Some((percentile(&early, 50.0)?, percentile(&late, 50.0)?))
}

/// The least-squares slope of a resource series over the settled part of a run, in raw units
/// per minute: how fast it would grow if the run went on. Evidence beside the medians, which
/// decide (a slope over a short run is noise).
pub fn settled_slope(values: &[(f64, f64)], from_ms: f64, to_ms: f64) -> Option<f64> {
    let points: Vec<(f64, f64)> = values
        .iter()
        .filter(|(t, _)| *t >= from_ms && *t <= to_ms)
        .map(|(t, v)| (t / 60_000.0, *v))
        .collect();
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mt, mv) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (t, v)| (a + t / n, b + v / n));
    let (cov, var) = points.iter().fold((0.0, 0.0), |(c, d), (t, v)| {
        (c + (t - mt) * (v - mv), d + (t - mt) * (t - mt))
    });
    (var > 0.0).then(|| cov / var)
}

/// A soak resource and its allowance.
#[derive(Debug, Clone, Copy)]
pub struct Resource<'a> {
    /// Verdict id suffix (`rss`, `fds`).
    pub suffix: &'static str,
    /// The verdict's title (`Resident memory stays flat`).
    pub title: &'a str,
    /// The unit of the allowance and of the figures reported (`MB`, `fds`).
    pub unit: &'a str,
    /// Divides raw readings into `unit`s.
    pub scale: f64,
    /// Allowed growth, in `unit`s.
    pub allowed: u64,
}

/// A soak resource grows no more than its allowance: `medians` is (early, late) from
/// [`settled_medians`], `skip` the reason it could not be read.
pub fn stays_flat(
    expect: &Expectations,
    r: Resource<'_>,
    medians: Option<(f64, f64)>,
    slope: Option<f64>,
    skip: Option<String>,
) -> CheckResult {
    let Resource {
        suffix,
        title,
        unit,
        scale,
        allowed,
    } = r;
    let expected = format!("growth ≤ {allowed} {unit} from the settled start to the end");
    match (medians, skip) {
        (_, Some(reason)) => expect.result(
            suffix,
            title,
            expected,
            "not measured".into(),
            Verdict::Skip(reason),
        ),
        (None, None) => expect.result(
            suffix,
            title,
            expected,
            "no reading".into(),
            Verdict::Skip("too few readings after every user had started: run longer".into()),
        ),
        (Some((early, late)), None) => {
            let grew = (late - early) / scale;
            let verdict = if grew <= allowed as f64 {
                Verdict::Pass
            } else {
                Verdict::Fail(format!("grew {grew:.1} {unit}, allowed {allowed}"))
            };
            let slope = slope.map_or(String::new(), |s| {
                format!(", slope {:+.2} {unit}/min", s / scale)
            });
            expect.result(
                suffix,
                title,
                expected,
                format!(
                    "{:.1} → {:.1} {unit} ({grew:+.1}{slope})",
                    early / scale,
                    late / scale
                ),
                verdict,
            )
        }
    }
}

/// No temp file outlives its request: once the load has drained (every request answered or
/// abandoned by its client, busy and queue depth 0), the temp files are back to the count read
/// before the load, plus `allowed` (the contract's `temp_files_growth`).
///
/// Judged only after the drain, and exactly: while requests are in flight each holds a temp dir
/// of its own, so a reading taken during the run cannot tell one leaked dir from one in use.
/// `abandoned` (how many requests their clients gave up on, the requests whose temp dirs are at
/// risk) and `max_during` (the most temp files read at once while running) are evidence.
pub fn temp_files(
    expect: &Expectations,
    drained: &Drained,
    allowed: u64,
    abandoned: usize,
    max_during: Option<f64>,
) -> CheckResult {
    let (before, after) = (&drained.temp_before, &drained.temp_after);
    let verdict = if !after.comparable(before) && !expect.temp_declared {
        Verdict::NotApplicable(format!(
            "the contract declares no per-request temp files for pool `{}`, and no --temp-dir was \
             given to look in",
            expect.pool
        ))
    } else if !after.comparable(before) {
        Verdict::Skip(format!(
            "no {} in /metrics and no --temp-dir to look in, before and after the load",
            MetricName::TempFiles
        ))
    } else {
        verdict_of(&after.left_behind(before, allowed))
    };
    let mut r = expect.result(
        "temp-files",
        "No temp file outlives its request",
        format!(
            "once the load has drained (every request answered, busy 0, queue 0): temp files back to the count before the load (+{allowed})"
        ),
        format!(
            "{} before the load, {} after it drained",
            before.describe(),
            after.describe()
        ),
        verdict,
    );
    r.evidence
        .push(format!("{abandoned} requests abandoned by their clients"));
    if let Some(max) = max_during {
        r.evidence.push(format!(
            "while running: at most {max} temp files at once (each request in flight holds one)"
        ));
    }
    match drained.drained_ms {
        Some(ms) => r
            .evidence
            .push(format!("the pool drained {ms:.0} ms after the last answer")),
        None => r.evidence.push(
            "the pool never drained: read after the drain timeout, when no request may still be running"
                .into(),
        ),
    }
    r
}

#[cfg(test)]
mod tests {
    use super::super::TempCount;
    use super::super::tests::expect;
    use super::*;

    #[test]
    fn settled_medians_compare_early_and_late_reads() {
        let flat: Vec<(f64, f64)> = (0..100)
            .map(|i| (f64::from(i) * 10.0, 100.0 + f64::from(i % 3)))
            .collect();
        let (a, b) = settled_medians(&flat, 0.0, 1000.0).unwrap();
        assert!((b - a).abs() <= 2.0);
        let leak: Vec<(f64, f64)> = (0..100)
            .map(|i| (f64::from(i) * 10.0, 100.0 + f64::from(i)))
            .collect();
        let (a, b) = settled_medians(&leak, 0.0, 1000.0).unwrap();
        assert!(b - a > 50.0);
        assert!(settled_medians(&[], 0.0, 1000.0).is_none());
    }

    #[test]
    fn the_slope_is_growth_per_minute_over_the_settled_part() {
        // One read a second for ten minutes: flat with noise, then a leak of 3 units a minute.
        let flat: Vec<(f64, f64)> = (0..600)
            .map(|i| (f64::from(i) * 1000.0, 100.0 + f64::from(i % 5)))
            .collect();
        assert!(settled_slope(&flat, 0.0, 600_000.0).unwrap().abs() < 0.05);
        let leak: Vec<(f64, f64)> = (0..600)
            .map(|i| (f64::from(i) * 1000.0, 100.0 + f64::from(i) / 20.0))
            .collect();
        let slope = settled_slope(&leak, 0.0, 600_000.0).unwrap();
        assert!((slope - 3.0).abs() < 1e-9, "{slope}");
        // Reads before the settled start are not counted.
        let ramp: Vec<(f64, f64)> = (0..600)
            .map(|i| {
                (
                    f64::from(i) * 1000.0,
                    if i < 60 { f64::from(i) } else { 60.0 },
                )
            })
            .collect();
        assert!(settled_slope(&ramp, 60_000.0, 600_000.0).unwrap().abs() < 1e-9);
        assert!(settled_slope(&leak[..2], 0.0, 600_000.0).is_none());
    }

    fn drained(before: Option<f64>, after: Option<f64>) -> Drained {
        Drained {
            drained_ms: Some(5.0),
            temp_before: TempCount {
                gauge: before,
                folder: None,
            },
            temp_after: TempCount {
                gauge: after,
                folder: None,
            },
            ..Drained::default()
        }
    }

    #[test]
    fn one_leaked_temp_dir_fails_and_none_passes() {
        let x = expect();
        let ok = temp_files(&x, &drained(Some(0.0), Some(0.0)), 0, 12, Some(4.0));
        assert_eq!(ok.verdict, Verdict::Pass, "{ok:?}");
        assert!(ok.evidence[0].starts_with("12 requests abandoned"));
        let one = temp_files(&x, &drained(Some(0.0), Some(1.0)), 0, 12, Some(4.0));
        assert!(one.verdict.is_fail(), "{one:?}");
        // Whatever was there before the load is not this run's leak.
        let before = temp_files(&x, &drained(Some(3.0), Some(3.0)), 0, 12, None);
        assert_eq!(before.verdict, Verdict::Pass);
        let unseen = temp_files(&x, &drained(None, None), 0, 12, None);
        assert!(matches!(unseen.verdict, Verdict::Skip(_)), "{unseen:?}");
    }
}
