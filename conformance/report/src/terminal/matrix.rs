//! A fault matrix (`check --fault-set`) on the terminal: one line per check, one column per
//! fault, then one line per fault with its run's counts and time.

use plimsoll_conformance::check::matrix::Matrix;
use plimsoll_conformance::verdict::CheckResult;

use crate::matrix_rows;

/// The matrix on the terminal: one line per check, one column per fault, then one line per
/// fault with its run's counts and time.
pub fn matrix(matrix: &Matrix) -> String {
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
