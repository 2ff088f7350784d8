//! `--json FILE`: the whole run (manifest + results) for scripts and for diffing two runs; for a
//! fault matrix, its cells ([`matrix()`]).
//!
//! Field order is the declaration order in `verdict.rs` and `effective` is a sorted map
//! (serde_json without `preserve_order`), so the same run always yields the same bytes.

use std::path::{Path, PathBuf};

use serde::Serialize;

use plimsoll_conformance::check::matrix::Matrix;
use plimsoll_conformance::verdict::RunReport;

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

/// One cell of the JSON matrix.
#[derive(Serialize)]
struct Cell<'a> {
    id: String,
    fault: String,
    verdict: &'static str,
    /// Why, for a failure, a skip or a waiver; the observation for a pass with something not
    /// applicable.
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<&'a str>,
}

/// One run of the JSON matrix.
#[derive(Serialize)]
struct Run {
    name: &'static str,
    fault: String,
    seconds: f64,
    passed: usize,
    not_applicable: usize,
    failed: usize,
    skipped: usize,
    /// The run's own JSON report (with the evidence), when `--json` was given.
    report: Option<PathBuf>,
}

/// The matrix as JSON: the set, each run's counts and report file, and one cell per check and
/// fault.
pub fn matrix(matrix: &Matrix, report_of: impl Fn(&str) -> Option<PathBuf>) -> serde_json::Value {
    let runs: Vec<Run> = matrix
        .runs
        .iter()
        .map(|run| Run {
            name: run.name,
            fault: run.fault.to_string(),
            seconds: (run.seconds * 10.0).round() / 10.0,
            passed: run.report.passed(),
            not_applicable: run.report.not_applicable(),
            failed: run.report.failed(),
            skipped: run.report.skipped(),
            report: report_of(run.name),
        })
        .collect();
    let cells: Vec<Cell<'_>> = matrix
        .runs
        .iter()
        .flat_map(|run| run.report.results.iter().map(move |r| (run, r)))
        .map(|(run, r)| Cell {
            id: r.id.to_string(),
            fault: run.name.to_owned(),
            verdict: r.matrix_word(),
            why: match r.verdict.reason() {
                Some(why) => Some(why),
                None if r.matrix_word() != "pass" => Some(&r.observed),
                None => None,
            },
        })
        .collect();
    serde_json::json!({
        "fault_set": matrix.set.name(),
        "runs": runs,
        "cells": cells,
    })
}
