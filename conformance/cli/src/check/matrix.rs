//! `plimsoll check --fault-set quick|full`: the suite once per standard fault of the set, each a
//! whole `check --fault NAME` against a subject of its own (its own header, lines and summary,
//! its adjusted bounds shown) with its own report files (`--json report.json` writes
//! `report.latency.json` and so on per run), then the matrix of checks × faults: on the
//! terminal, and as the report files asked for (`report.json` gets the cells).

use std::path::{Path, PathBuf};
use std::time::Instant;

use plimsoll_conformance::check::matrix::checks_under;
pub use plimsoll_conformance::check::matrix::{FaultRun, FaultSet, Matrix};
use plimsoll_conformance::session::{Fatal, Subject};
use plimsoll_report::{self as render, MatrixColumn, suffixed};

/// The matrix on the terminal: one line per check, one column per fault, then one line per
/// fault with its run's counts and time.
pub use plimsoll_report::terminal::matrix as text;

use super::CheckArgs;
use crate::args::ReportFiles;

/// Runs the suite once per fault of `set`, each against a subject `subject` starts for that
/// run's arguments (a fresh embedded server per run, so no run inherits another's state, its
/// relay listener through the run's fault), then prints the matrix and writes its reports.
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
/// (a suite per fault), `--html` (a page of cells linking to each run's page), `--markdown`
/// (each run's section, `check-FAULT`).
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
        let cells = render::json::matrix(matrix, |name| per_run(reports, name).json);
        let json = serde_json::to_string_pretty(&cells).map_err(|e| Fatal::Usage(e.to_string()))?;
        write(path, json + "\n")?;
    }
    if let Some(path) = &reports.junit {
        let xml = render::junit::render_matrix(&columns(&|_| None))
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
        let page = render::html::matrix::render(matrix.set.name(), &columns(&page_of));
        write(path, page)?;
    }
    if let Some(path) = &reports.markdown {
        // One section per fault's run, each in the layout a gate concatenates.
        let sections: Vec<String> = matrix
            .runs
            .iter()
            .map(|run| render::markdown::render(&run.report, &format!("check-{}", run.name)))
            .collect();
        write(path, sections.join("\n"))?;
    }
    Ok(())
}

/// The report files of the run under the fault called `toxic`: each one asked for, suffixed.
fn per_run(reports: &ReportFiles, toxic: &str) -> ReportFiles {
    let each = |p: &Option<PathBuf>| p.as_deref().map(|p| suffixed(p, toxic));
    ReportFiles {
        json: each(&reports.json),
        junit: each(&reports.junit),
        html: each(&reports.html),
        markdown: each(&reports.markdown),
        quiet: reports.quiet,
    }
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
