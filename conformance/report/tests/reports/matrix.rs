//! A fault matrix's own files (`check --fault-set … --junit --html`): a JUnit suite per fault,
//! and a page whose cells link to each check in its fault's report, the hostile string escaped.

use plimsoll_report::html::matrix;
use plimsoll_report::{MatrixColumn, junit};

use super::*;
use crate::xml::well_formed;

fn columns(run: &RunReport) -> Vec<MatrixColumn<'_>> {
    ["latency", "vanish"]
        .into_iter()
        .map(|name| MatrixColumn {
            name,
            spec: format!("{name}:x=1"),
            seconds: 1.5,
            report: run,
            page: Some(format!("report.{name}.html")),
        })
        .collect()
}

#[test]
fn the_matrix_junit_has_a_suite_per_fault() {
    let run = sample();
    let xml = junit::render_matrix(&columns(&run)).unwrap();
    preview("plimsoll-matrix-junit.xml", &xml);
    well_formed(&xml).unwrap_or_else(|e| panic!("not well-formed XML ({e}):\n{xml}"));
    let parsed = quick_junit::Report::deserialize_from_str(&xml).expect("parses as JUnit XML");
    let names: Vec<&str> = parsed.test_suites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            format!("{} under latency", junit::SUITE_NAME),
            format!("{} under vanish", junit::SUITE_NAME)
        ]
    );
    assert_eq!((parsed.tests, parsed.failures), (6, 2));
}

#[test]
fn the_matrix_page_links_each_cell_to_its_fault_report() {
    let run = sample();
    let page = matrix::render("full", &columns(&run));
    preview("plimsoll-matrix.html", &page);
    for name in ["latency", "vanish"] {
        assert!(
            page.contains(&format!("href=\"report.{name}.html#check-")),
            "{page}"
        );
    }
    // One cell per check and fault, the failing one with its reason as the tooltip.
    assert_eq!(page.matches("<td class=\"fail\"").count(), 2);
    assert!(page.contains(&format!("title=\"{FAIL_REASON}\"")), "{page}");
    assert!(!page.contains(HOSTILE), "a hostile string must be escaped");
}
