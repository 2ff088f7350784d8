//! The fault matrix as a page: one row per check, one column per fault, each cell its verdict
//! under that fault, linking to the check's section in that fault's own report (the evidence),
//! and the reason in the cell's tooltip.

use maud::{Markup, html};

use super::{anchor, page};
use crate::{MatrixColumn, matrix_rows};

/// The page for the runs of a fault set named `set`.
pub fn render(set: &str, columns: &[MatrixColumn<'_>]) -> String {
    page(
        &format!("Plimsoll fault matrix: {set}"),
        html! {
            header.card {
                h1 { "Plimsoll fault matrix (" (set) ")" }
                p.muted { "Each cell is a check's verdict under one fault; it links to that check in the fault's own report, where its evidence is." }
            }
            (faults(columns))
            (cells(columns))
        },
    )
}

/// One row per fault: its spec, counts and time, and its report.
fn faults(columns: &[MatrixColumn<'_>]) -> Markup {
    html! {
        section.card {
            h2 { "Faults" }
            table.verdicts {
                thead { tr { th { "Fault" } th { "Spec" } th { "Passed" } th { "Failed" } th { "Skipped" } th { "Time" } } }
                tbody {
                    @for col in columns {
                        @let r = col.report;
                        tr class=(if r.failed() > 0 { "fail" } else { "pass" }) {
                            td.key { @match &col.page { Some(page) => a href=(page) { (col.name) }, None => (col.name) } }
                            td.text { code { (col.spec) } }
                            td.num { (r.passed()) }
                            td.num { (r.failed()) }
                            td.num { (r.skipped()) }
                            td.num { (format!("{:.1} s", col.seconds)) }
                        }
                    }
                }
            }
        }
    }
}

/// The matrix itself: checks × faults.
fn cells(columns: &[MatrixColumn<'_>]) -> Markup {
    let ids = matrix_rows(columns.iter().map(|c| c.report));
    html! {
        section.card {
            h2 { "Checks × faults" }
            table.verdicts {
                thead { tr { th { "Check" } @for col in columns { th { (col.name) } } } }
                tbody {
                    @for id in &ids {
                        tr {
                            td.key { code { (id) } }
                            @for col in columns {
                                (cell(col, id))
                            }
                        }
                    }
                }
            }
        }
    }
}

fn cell(col: &MatrixColumn<'_>, id: &str) -> Markup {
    let found = col
        .report
        .results
        .iter()
        .enumerate()
        .find(|(_, r)| r.id.to_string() == id);
    let Some((index, r)) = found else {
        return html! { td.muted title="not run under this fault" { "–" } };
    };
    let word = r.matrix_word();
    let why = r.verdict.reason().unwrap_or(&r.observed);
    let class = r.verdict.label();
    html! {
        td class=(class) title=(why) {
            @match &col.page {
                Some(page) => a href={ (page) "#" (anchor(index, id)) } { span class={ "badge " (class) } { (word) } },
                None => span class={ "badge " (class) } { (word) },
            }
        }
    }
}
