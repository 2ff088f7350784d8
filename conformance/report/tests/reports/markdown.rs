//! The Markdown summary, read back by a GitHub-flavoured Markdown parser (tables on): one table
//! whose rows are the run's checks, failures first, each cell one cell even when the text holds
//! pipes and markup, and the regression table when a figure regressed.

use plimsoll_conformance::verdict::figure::{Delta, Unit};
use plimsoll_report::markdown;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::*;

/// Every table of `md`, as rows of cell texts (the heading row first).
fn tables(md: &str) -> Vec<Vec<Vec<String>>> {
    let mut tables = Vec::new();
    let (mut table, mut row, mut cell) = (Vec::new(), Vec::new(), None::<String>);
    for event in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::TableCell) => cell = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(c) = cell.as_mut() {
                    c.push_str(&t);
                }
            }
            Event::End(TagEnd::TableCell) => row.push(cell.take().unwrap_or_default()),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => {
                table.push(std::mem::take(&mut row))
            }
            Event::End(TagEnd::Table) => tables.push(std::mem::take(&mut table)),
            _ => {}
        }
    }
    tables
}

#[test]
fn the_summary_is_one_table_of_the_checks_failures_first() {
    let run = sample();
    let md = markdown::render(&run, "check");
    preview("plimsoll-summary.md", &md);
    assert!(md.starts_with("### `check`: FAIL\n"), "{md}");
    assert!(md.contains("1 passed, 1 failed, 1 skipped"), "{md}");
    let tables = tables(&md);
    assert_eq!(tables.len(), 1, "{md}");
    let rows = &tables[0];
    assert_eq!(
        rows[0],
        ["step", "check", "title", "verdict", "observed / why"]
    );
    assert_eq!(rows.len(), 1 + run.results.len(), "{md}");
    for row in &rows[1..] {
        assert_eq!(
            row.len(),
            5,
            "one cell each, pipes and markup escaped: {row:?}"
        );
        assert_eq!(row[0], "check");
    }
    let ids: Vec<&str> = rows[1..].iter().map(|r| r[1].as_str()).collect();
    assert_eq!(
        ids,
        ["T3", "F4", "T1"],
        "the failure, the skip, then the pass"
    );
    assert_eq!(rows[1][3], "❌ fail");
    assert!(rows[1][4].contains(FAIL_REASON), "{:?}", rows[1]);
    assert!(
        rows[1][4].contains(HOSTILE),
        "the text survives, escaped: {:?}",
        rows[1]
    );
    assert!(!md.contains(HOSTILE), "no raw markup in the page");
    assert_eq!(rows[2][4], format!("skipped: {SKIP_REASON}"));
    assert_eq!(rows[3][4], "");
}

#[test]
fn regressions_against_a_baseline_get_a_table_of_their_own() {
    let mut run = sample();
    for r in &mut run.results {
        r.verdict = Verdict::Pass;
    }
    run.results[0].deltas = vec![Delta {
        figure: "refusal latency".into(),
        unit: Unit::Ms,
        baseline: 1.0,
        current: 9.0,
        threshold: 2.0,
        regressed: true,
    }];
    let md = markdown::render(&run, "load-burst");
    assert!(md.starts_with("### `load-burst`: pass\n"), "{md}");
    let tables = tables(&md);
    assert_eq!(tables.len(), 2, "{md}");
    assert_eq!(
        tables[1][1],
        [
            "load-burst",
            "T1",
            "refusal latency",
            "1.0 ms",
            "9.0 ms",
            "2.0 ms"
        ]
    );
}
