//! What a person watching `plimsoll check` (or `load`) sees, in three parts:
//!
//! 1. a [`header()`]: what is checked (the target, or the embedded server and the values it was
//!    scaled to), the contract, trials and strictness;
//! 2. one [`progress_line`] per finished check, at most [`WIDTH`] columns (the observed part
//!    is cut to fit; a spinner names the check in flight on a terminal);
//! 3. a [`summary()`]: the counts, every failure, skip and not-applicable pass with its reasons
//!    in full (wrapped, never cut), and one line of next steps.
//!
//! A fault matrix (`check --fault-set`) ends with its table of checks × faults ([`matrix()`]).
//!
//! Durations are always seconds with two decimals (one from 10 s on). Colour is plain ANSI and
//! only on an interactive stdout, so piped output and CI logs stay clean.

mod check_line;
mod header;
mod matrix;
mod progress;
mod style;
mod summary;
mod text;

use std::path::Path;

use plimsoll_conformance::verdict::{Manifest, RunReport};

pub use check_line::progress_line;
pub use header::{adopted_words, header};
pub use matrix::matrix;
pub use progress::Progress;
pub use style::{Style, WIDTH, symbol};
pub use summary::{stopped_line, summary};
pub use text::wrap;

/// A duration as every terminal line shows it: seconds, two decimals under 10 s (`0.23 s`,
/// `4.07 s`), one from there on (`23.4 s`); `?` for a value that is not a time.
pub fn format_duration(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "?".to_string();
    }
    let seconds = ms / 1000.0;
    if seconds < 9.995 {
        format!("{seconds:.2} s")
    } else {
        format!("{seconds:.1} s")
    }
}

/// Whether the run is `plimsoll load`: its verdicts all judge the same load, so the header
/// names a seed instead of trials and the summary adds no times up.
fn is_load(manifest: &Manifest) -> bool {
    manifest.tool.starts_with("plimsoll load")
}

/// Everything a run prints on a plain terminal, at once: the [`header()`], a blank line, one
/// [`progress_line`] per result and the [`summary()`]. A run prints the same parts as it goes;
/// this is for tests and previews.
pub fn transcript(report: &RunReport, html: Option<&Path>, style: Style) -> String {
    let mut out = header(&report.manifest, style);
    out.push('\n');
    for r in &report.results {
        out.push_str(&progress_line(r, style));
        out.push('\n');
    }
    out.push_str(&summary(report, html, style));
    out
}
