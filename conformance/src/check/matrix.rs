//! `check --fault-set quick`: the suite once per fault of a standard set, and what each check
//! did under each fault, as a matrix on the terminal and in JSON. Each run is a whole
//! `check --fault SPEC` (its own header, lines and summary, its adjusted bounds shown), with its
//! own report files: `--json report.json` writes `report.latency.json` and so on per run, and the
//! matrix itself to `report.json`; `--junit` and `--html` are written per run the same way.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::CheckArgs;
use crate::checks::CheckId;
use crate::report::{MatrixColumn, ReportFiles, matrix_rows};
use crate::session::{Fatal, Subject};
use crate::verdict::{CheckResult, RunReport};
use plimsoll_fault::standard::{QUICK, STANDARD};
use plimsoll_fault::{Fault, NamedFault};

/// A standard set of faults for `--fault-set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultSet {
    /// What every far client's path does to the bytes, one fault at a time: latency with
    /// jitter, a stream sliced into small writes, a bandwidth limit. About two minutes on two
    /// cores against the embedded server.
    Quick,
    /// The quick set, then the faults that reveal what only a fault can: a client trickling its
    /// bytes (B1, B4) and clients that vanish with a reset (B3). About three minutes on two
    /// cores against the embedded server.
    Full,
}

impl FaultSet {
    /// The set's faults, in order.
    pub fn faults(self) -> &'static [NamedFault] {
        match self {
            FaultSet::Quick => &STANDARD[..QUICK],
            FaultSet::Full => STANDARD,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FaultSet::Quick => "quick",
            FaultSet::Full => "full",
        }
    }
}

/// The checks a run under `named` makes: those asked for, else the fault's own choice.
pub fn checks_under(named: &NamedFault, asked: &[CheckId]) -> Vec<CheckId> {
    if !asked.is_empty() {
        return asked.to_vec();
    }
    named.only.to_vec()
}

/// One fault's run of the suite.
pub struct FaultRun {
    /// The standard fault's name: the matrix's column.
    pub name: &'static str,
    /// The fault the run went through.
    pub fault: Fault,
    /// How long the run took on this machine, seconds (start of the subject included).
    pub seconds: f64,
    /// The run's report, as `check --fault` makes it.
    pub report: RunReport,
}

/// Every run of a fault set.
pub struct Matrix {
    /// The set.
    pub set: FaultSet,
    /// One run per fault, in the set's order.
    pub runs: Vec<FaultRun>,
}

impl Matrix {
    /// Checks failed over all runs: one is enough for exit code 1.
    pub fn failed(&self) -> usize {
        self.runs.iter().map(|r| r.report.failed()).sum()
    }
}

impl crate::session::Failures for Matrix {
    fn failures(&self) -> usize {
        self.failed()
    }
}

/// Runs the suite once per fault of `set`, each against a subject `subject` starts for that
/// run's arguments (a fresh embedded server per run, so no run inherits another's state, its
/// relay listener through the run's fault), then prints the matrix and writes it to `--json`.
pub async fn execute(
    args: &CheckArgs,
    set: FaultSet,
    subject: impl AsyncFn(&CheckArgs) -> Result<Subject, Fatal>,
) -> Result<Matrix, Fatal> {
    let mut runs = Vec::new();
    for named in set.faults() {
        let fault = named.fault();
        let run_args = CheckArgs {
            fault: Some(fault),
            fault_set: None,
            only: checks_under(named, &args.only),
            reports: per_run(&args.reports, named.name),
            ..args.clone()
        };
        let started = Instant::now();
        let report = super::execute(&run_args, subject(&run_args).await?).await?;
        runs.push(FaultRun {
            name: named.name,
            fault,
            seconds: started.elapsed().as_secs_f64(),
            report,
        });
    }
    let matrix = Matrix { set, runs };
    println!("{}", text(&matrix));
    write_reports(&matrix, &args.reports)?;
    Ok(matrix)
}

/// The matrix's own report files, where the runs' are suffixed: `--json` (the cells), `--junit`
/// (a suite per fault), `--html` (a page of cells linking to each run's page).
fn write_reports(matrix: &Matrix, reports: &ReportFiles) -> Result<(), Fatal> {
    let write = |path: &Path, text: String| {
        std::fs::write(path, text)
            .map_err(|e| Fatal::Usage(format!("cannot write {}: {e}", path.display())))
    };
    let columns = |page_of: &dyn Fn(&str) -> Option<String>| -> Vec<MatrixColumn<'_>> {
        matrix
            .runs
            .iter()
            .map(|run| MatrixColumn {
                name: run.name,
                spec: run.fault.to_string(),
                seconds: run.seconds,
                report: &run.report,
                page: page_of(run.name),
            })
            .collect()
    };
    if let Some(path) = &reports.json {
        let json = serde_json::to_string_pretty(&json(matrix, reports))
            .map_err(|e| Fatal::Usage(e.to_string()))?;
        write(path, json + "\n")?;
    }
    if let Some(path) = &reports.junit {
        let xml = crate::report::junit::render_matrix(&columns(&|_| None))
            .map_err(|e| Fatal::Usage(e.to_string()))?;
        write(path, xml)?;
    }
    if let Some(path) = &reports.html {
        // Each run's page sits beside the matrix's: linked by its file name.
        let page_of = |name: &str| {
            suffixed(path, name)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        };
        let page = crate::report::html::matrix::render(matrix.set.name(), &columns(&page_of));
        write(path, page)?;
    }
    Ok(())
}

/// `report.json` → `report.latency.json`: where one fault's run writes its report.
fn suffixed(path: &Path, toxic: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{toxic}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{toxic}"),
    };
    path.with_file_name(name)
}

fn per_run(reports: &ReportFiles, toxic: &str) -> ReportFiles {
    let each = |p: &Option<PathBuf>| p.as_deref().map(|p| suffixed(p, toxic));
    ReportFiles {
        json: each(&reports.json),
        junit: each(&reports.junit),
        html: each(&reports.html),
        quiet: reports.quiet,
    }
}

/// The matrix on the terminal: one line per check, one column per fault, then one line per
/// fault with its run's counts and time.
pub fn text(matrix: &Matrix) -> String {
    const COLUMN: usize = 16;
    let mut out = format!(
        "\nFault matrix ({}): {} runs\n{:<10}",
        matrix.set.name(),
        matrix.runs.len(),
        "check"
    );
    for run in &matrix.runs {
        out.push_str(&format!("{:<COLUMN$}", run.name));
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    let ids = matrix_rows(matrix.runs.iter().map(|run| &run.report));
    for id in &ids {
        out.push_str(&format!("{id:<10}"));
        for run in &matrix.runs {
            let word = run
                .report
                .results
                .iter()
                .find(|r| r.id.to_string() == *id)
                .map_or("–", CheckResult::matrix_word);
            out.push_str(&format!("{word:<COLUMN$}"));
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    for run in &matrix.runs {
        let r = &run.report;
        let partly = r.results.iter().filter(|c| c.part_not_applicable()).count();
        out.push_str(&format!(
            "{} ({}): {} passed ({} not applicable, {partly} in part), {} failed, {} skipped in {:.1} s\n",
            run.name,
            run.fault,
            r.passed(),
            r.not_applicable(),
            r.failed(),
            r.skipped(),
            run.seconds
        ));
    }
    out
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
fn json(matrix: &Matrix, reports: &ReportFiles) -> serde_json::Value {
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
            report: per_run(reports, run.name).json,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_writes_its_reports_beside_the_ones_asked_for() {
        assert_eq!(
            suffixed(Path::new("out/report.json"), "latency"),
            PathBuf::from("out/report.latency.json")
        );
        assert_eq!(
            suffixed(Path::new("junit"), "slicer"),
            PathBuf::from("junit.slicer")
        );
        assert_eq!(FaultSet::Quick.faults().len(), 3);
        let trickle = FaultSet::Full
            .faults()
            .iter()
            .find(|f| f.name == "trickle")
            .unwrap();
        assert_eq!(checks_under(trickle, &[]).len(), 2);
        assert!(checks_under(&FaultSet::Full.faults()[0], &[]).is_empty());
    }
}
