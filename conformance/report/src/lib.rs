//! `plimsoll-report`: renderings of a [`RunReport`]: the terminal while running, and the files a
//! run leaves behind (`--json`, `--junit`, `--html`, `--markdown`), so people and CI systems
//! each get a form they read.
//!
//! Its own crate because rendering is one job with its own dependencies (HTML templates, JUnit
//! XML, a spinner): the checks and the load profiles produce the verdict model
//! (`plimsoll_conformance::verdict`) and say what happens through
//! `plimsoll_conformance::observe::Observer`, and never call a renderer, so a change to a
//! report rebuilds neither, and they build without these dependencies. The `plimsoll` binary
//! draws its terminal with [`terminal`] and writes the files with [`write_all`].

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod terminal;

use std::path::{Path, PathBuf};

use plimsoll_conformance::verdict::RunReport;

/// One fault's run in a fault matrix, as the matrix's reports render it (`--fault-set`).
pub struct MatrixColumn<'a> {
    /// The fault's name: the column's heading.
    pub name: &'a str,
    /// The fault as its spec.
    pub spec: String,
    /// How long the run took, seconds.
    pub seconds: f64,
    /// The run's report.
    pub report: &'a RunReport,
    /// Where the run's own HTML report is, relative to the matrix's page, when one was written.
    pub page: Option<String>,
}

/// Every check any of `runs` made, in the order of the run that made the most: a fault
/// matrix's rows.
pub fn matrix_rows<'a>(runs: impl IntoIterator<Item = &'a RunReport>) -> Vec<String> {
    runs.into_iter()
        .max_by_key(|r| r.results.len())
        .map(|r| r.results.iter().map(|c| c.id.to_string()).collect())
        .unwrap_or_default()
}

pub use html::write as write_html;
pub use json::write as write_json;
pub use junit::write as write_junit;
pub use terminal::{Progress, Style, header, progress_line, summary};

/// `report.json` → `report.latency.json`: where one fault's run of a fault matrix writes the
/// report asked for at `path`.
pub fn suffixed(path: &Path, fault: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{fault}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{fault}"),
    };
    path.with_file_name(name)
}

/// The report files a run leaves behind; `None` skips that format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Files<'a> {
    /// `--json`: the run's manifest and every result with its evidence.
    pub json: Option<&'a Path>,
    /// `--junit`: one testcase per check.
    pub junit: Option<&'a Path>,
    /// `--html`: a self-contained page with the run's charts over time and the requests'
    /// timelines.
    pub html: Option<&'a Path>,
    /// `--markdown`: the summary a CI system shows beside its log.
    pub markdown: Option<&'a Path>,
    /// The run's name in the Markdown summary's rows (`check`, `load-burst`).
    pub step: &'a str,
}

/// Writes every report file that was asked for.
///
/// All requested files are attempted even when one fails, so a bad `--html` path does not
/// also cost the CI system its JUnit file; the first error is returned.
pub fn write_all(report: &RunReport, files: &Files<'_>) -> std::io::Result<()> {
    let mut first_err = None;
    let mut note = |result: std::io::Result<()>, path: &Path| {
        if let Err(e) = result {
            first_err.get_or_insert_with(|| {
                std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display()))
            });
        }
    };
    if let Some(path) = files.json {
        note(json::write(path, report), path);
    }
    if let Some(path) = files.junit {
        note(junit::write(path, report), path);
    }
    if let Some(path) = files.html {
        note(html::write(path, report), path);
    }
    if let Some(path) = files.markdown {
        note(markdown::write(path, report, files.step), path);
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The time of all checks of a run together (a check's time that is not a time counts 0).
pub(crate) fn total_ms(report: &RunReport) -> f64 {
    report
        .results
        .iter()
        .map(|r| r.duration_ms)
        .filter(|ms| ms.is_finite() && *ms > 0.0)
        .sum()
}

/// Milliseconds as people read them: `12 ms`, `1.35 s`; `?` for a value that is not a time.
pub(crate) fn format_ms(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        "?".to_string()
    } else if ms < 10.0 {
        format!("{ms:.1} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

/// A duration from milliseconds that never panics: checks may hand over NaN or negatives
/// after a clock hiccup, and `Duration::from_secs_f64` would abort the whole report.
pub(crate) fn duration_from_ms(ms: f64) -> std::time::Duration {
    if ms.is_finite() && ms > 0.0 {
        std::time::Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(std::time::Duration::MAX)
    } else {
        std::time::Duration::ZERO
    }
}
