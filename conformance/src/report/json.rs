//! `--json FILE`: the whole run (manifest + results) for scripts and for diffing two runs.
//!
//! Field order is the declaration order in `verdict.rs` and `effective` is a sorted map
//! (serde_json without `preserve_order`), so the same run always yields the same bytes.

use std::path::Path;

use crate::verdict::RunReport;

/// The pretty JSON text, newline-terminated.
pub fn render(report: &RunReport) -> serde_json::Result<String> {
    let mut text = serde_json::to_string_pretty(report)?;
    text.push('\n');
    Ok(text)
}

/// Writes [`render`] to `path`.
pub fn write(path: &Path, report: &RunReport) -> std::io::Result<()> {
    std::fs::write(path, render(report)?)
}
