//! `--baseline REPORT.json`: this run's figures against an earlier run's. A clause can pass in
//! both runs while a figure got worse (refusals twice as slow, a timeout answered later, less
//! goodput); a gate should say so, and with `--fail-on-regression` fail on it. Each figure of a
//! result is compared with the figure of the same name of the same result in the baseline
//! report (its `--json` file): the medians, and a regression only when the median moved the
//! worse way by more than the runs' own noise ([`Delta::between`] says how).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::verdict::figure::{Delta, Figure};
use crate::verdict::series::RunSeries;
use crate::verdict::{CheckResult, REPORT_SCHEMA, Verdict};

/// What `check` and `load` compare with: an earlier run's JSON report, and whether a figure
/// that regressed against it fails its check.
#[derive(Debug, Clone, Default)]
pub struct BaselinePlan {
    /// The earlier run's JSON report (`--baseline`); `None`: nothing to compare.
    pub report: Option<PathBuf>,
    /// Fail a check or verdict whose figure regressed (`--fail-on-regression`).
    pub fail_on_regression: bool,
}

impl BaselinePlan {
    /// The baseline report, read and validated (none: nothing to compare).
    pub fn load(&self) -> Result<Option<Baseline>, BaselineError> {
        self.report.as_deref().map(Baseline::load).transpose()
    }
}

/// Why a baseline report could not be used (the run stops with exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The file could not be read.
    #[error("--baseline {}: {source}", path.display())]
    Read {
        /// The file named.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// Not a JSON report of plimsoll.
    #[error("--baseline {}: not a plimsoll JSON report ({message})", path.display())]
    Parse {
        /// The file named.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A report of another layout: its figures cannot be read as this version writes them.
    #[error(
        "--baseline {}: report schema {found}, this plimsoll reads {REPORT_SCHEMA} (run the baseline again)",
        path.display()
    )]
    Schema {
        /// The file named.
        path: PathBuf,
        /// The schema version it declares (0: none, a report from before figures).
        found: u32,
    },
}

/// The parts of a JSON report a comparison reads.
#[derive(Deserialize)]
struct Stored {
    manifest: StoredManifest,
    results: Vec<StoredResult>,
    #[serde(default)]
    series: Option<RunSeries>,
}

#[derive(Deserialize)]
struct StoredManifest {
    #[serde(default)]
    report_schema: u32,
}

#[derive(Deserialize)]
struct StoredResult {
    id: String,
    #[serde(default)]
    figures: Vec<Figure>,
}

/// The figures of an earlier run, by result id, and its series over time when its report
/// holds one.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    figures: BTreeMap<String, Vec<Figure>>,
    series: Option<RunSeries>,
}

impl Baseline {
    /// Reads the JSON report at `path`.
    pub fn load(path: &Path) -> Result<Baseline, BaselineError> {
        let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Read {
            path: path.to_owned(),
            source,
        })?;
        let stored: Stored = serde_json::from_str(&text).map_err(|e| BaselineError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if stored.manifest.report_schema != REPORT_SCHEMA {
            return Err(BaselineError::Schema {
                path: path.to_owned(),
                found: stored.manifest.report_schema,
            });
        }
        let figures = stored
            .results
            .into_iter()
            .map(|r| (r.id, r.figures))
            .collect();
        Ok(Baseline {
            figures,
            series: stored.series,
        })
    }

    /// Sets the baseline run's series beside `series`, for the HTML report's charts.
    pub fn beside(&self, series: &mut RunSeries) {
        series.baseline = self.series.clone().map(Box::new);
    }

    /// Puts each figure of `result` beside the baseline's ([`CheckResult::deltas`]); with
    /// `fail`, a regression fails a result that did not fail already, saying which figure and
    /// by how much.
    pub fn compare(&self, result: &mut CheckResult, fail: bool) {
        let Some(before) = self.figures.get(&result.id.to_string()) else {
            return;
        };
        result.deltas = result
            .figures
            .iter()
            .filter_map(|now| {
                let was = before.iter().find(|f| f.name == now.name)?;
                Delta::between(was, now)
            })
            .collect();
        let regressed: Vec<String> = result
            .deltas
            .iter()
            .filter(|d| d.regressed)
            .map(ToString::to_string)
            .collect();
        if fail && !regressed.is_empty() && !result.verdict.is_fail() {
            result.verdict = Verdict::Fail(format!(
                "regressed against the baseline (--fail-on-regression): {}",
                regressed.join("; ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use plimsoll_spec::CheckId;

    use super::*;
    use crate::verdict::figure::Unit;

    fn result(samples: Vec<f64>) -> CheckResult {
        let t3 = CheckId::Clause(plimsoll_spec::ClauseId::T3);
        CheckResult {
            figures: vec![Figure::lower("refusal latency", Unit::Ms, samples)],
            ..CheckResult::new(t3, "", String::new(), String::new(), Verdict::Pass)
        }
    }

    fn baseline(samples: Vec<f64>) -> Baseline {
        Baseline {
            figures: BTreeMap::from([("T3".to_owned(), result(samples).figures)]),
            series: None,
        }
    }

    #[test]
    fn a_regression_is_flagged_and_fails_only_when_asked() {
        let was = baseline(vec![5.0, 6.0, 5.0, 7.0, 6.0]);
        let mut flagged = result(vec![40.0, 42.0, 41.0, 39.0, 40.0]);
        was.compare(&mut flagged, false);
        assert!(flagged.deltas[0].regressed);
        assert_eq!(flagged.verdict, Verdict::Pass);
        let mut failed = result(vec![40.0, 42.0, 41.0, 39.0, 40.0]);
        was.compare(&mut failed, true);
        assert!(
            matches!(&failed.verdict, Verdict::Fail(why) if why.contains("refusal latency: 6.0 ms → 40.0 ms")),
            "{:?}",
            failed.verdict
        );
        let mut steady = result(vec![6.0, 5.0, 6.0, 7.0, 5.0]);
        was.compare(&mut steady, true);
        assert!(!steady.deltas[0].regressed);
        assert_eq!(steady.verdict, Verdict::Pass);
    }

    /// A report's series comes back as the JSON report wrote it, and is set beside a run's.
    #[test]
    fn a_report_with_a_series_lends_it_to_the_next_run() {
        use crate::verdict::series::{Sent, Span};
        let sent = Sent {
            sent_ms: 10.0,
            end_ms: 300.0,
            answered: true,
            ok: true,
            refused: false,
        };
        let warm = Span {
            label: "warm-up".into(),
            from_ms: 0.0,
            to_ms: 100.0,
        };
        let series = RunSeries::new(
            vec![("digitize".into(), Vec::new(), vec![sent])],
            vec![warm],
        );
        let text = serde_json::json!({
            "manifest": {"report_schema": REPORT_SCHEMA},
            "results": [],
            "series": series,
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("was.json");
        std::fs::write(&path, text.to_string()).unwrap();
        let baseline = Baseline::load(&path).unwrap();
        let mut now = RunSeries::new(Vec::new(), Vec::new());
        baseline.beside(&mut now);
        assert_eq!(now.baseline.as_deref(), Some(&series));
    }

    #[test]
    fn a_report_of_another_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        std::fs::write(&path, r#"{"manifest": {}, "results": [{"id": "T1"}]}"#).unwrap();
        let e = Baseline::load(&path).unwrap_err().to_string();
        assert!(e.contains("report schema 0"), "{e}");
        std::fs::write(&path, "not json").unwrap();
        let e = Baseline::load(&path).unwrap_err().to_string();
        assert!(e.contains("not a plimsoll JSON report"), "{e}");
    }
}
