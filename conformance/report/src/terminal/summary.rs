//! The end of the run: the counts, every failure, skip and not-applicable pass in full, and
//! what to do next. Check lines are cut to fit; this is where nothing is cut.

use std::path::Path;

use plimsoll_conformance::verdict::figure::Delta;
use plimsoll_conformance::verdict::{CheckResult, RunReport, Verdict};

use super::check_line::mark_and_id;
use super::style::{BOLD, DIM, GREEN, RED, Style, paint};
use super::text::{one_line, wrap};
use super::{format_duration, is_load};
use crate::total_ms;

/// Where the text of a summary entry's `expected`/`observed`/`why` starts.
const LABEL_INDENT: usize = 4;
const LABEL_WIDTH: usize = 10;

/// The line a stopped run ends with: why, and how far it got.
pub fn stopped_line(report: &RunReport) -> String {
    format!(
        "\nincomplete: {} ({} checks finished: {} passed, {} failed, {} skipped)",
        report.manifest.incomplete.as_deref().unwrap_or("stopped"),
        report.results.len(),
        report.passed(),
        report.failed(),
        report.skipped()
    )
}

/// The end of the run: the counts and the time of all checks, every failure (expected,
/// observed, why), skip (why) and not-applicable pass (why) in full, wrapped to `style.width`
/// and never cut, then one line of next steps. It repeats no line a passing check already
/// printed.
///
/// `html` is the `--html` file of the run, if any (the next steps point at it).
pub fn summary(report: &RunReport, html: Option<&Path>, style: Style) -> String {
    let color = style.color;
    let not_applicable = match report.not_applicable() {
        0 => String::new(),
        n => format!(", {n} not applicable"),
    };
    // Checks run one after the other, so their times add up; a load profile's verdicts all
    // judge the same load, so theirs do not.
    let took = if is_load(&report.manifest) {
        String::new()
    } else {
        format!(" in {}", format_duration(total_ms(report)))
    };
    let waived = match report.waived() {
        0 => String::new(),
        n => format!(", {n} waived"),
    };
    let totals = format!(
        "{} passed{not_applicable}, {} failed, {} skipped{waived}{took}",
        report.passed(),
        report.failed(),
        report.skipped(),
    );
    // One colour for the whole line keeps it a single greppable string.
    let totals_colour = if report.failed() > 0 { RED } else { GREEN };
    let mut out = String::from("\n");
    out.push_str(&paint(&totals, totals_colour, color));
    out.push('\n');

    let failed: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| r.verdict.is_fail())
        .collect();
    let skipped: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Skip(_)))
        .collect();
    let not_applicable: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| r.not_applicable())
        .collect();
    let waived: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| r.waiver.is_some())
        .collect();
    for (title, picked) in [
        ("Failed", failed),
        ("Skipped", skipped),
        ("Not applicable (nothing judged)", not_applicable),
        ("Waivers", waived),
    ] {
        if picked.is_empty() {
            continue;
        }
        out.push('\n');
        out.push_str(&paint(&format!("{title}:"), BOLD, color));
        out.push('\n');
        for r in picked {
            entry(&mut out, r, style);
        }
    }
    against_the_baseline(&mut out, report, style);

    out.push('\n');
    let next = format!("Next: {}", next_steps(report, html).join("; "));
    for line in wrap(&next, 0, 6, style.width) {
        out.push_str(&paint(&line, DIM, color));
        out.push('\n');
    }
    out
}

/// Every figure compared with `--baseline`, one line each, the regressed ones marked.
fn against_the_baseline(out: &mut String, report: &RunReport, style: Style) {
    let deltas: Vec<(&CheckResult, &Delta)> = report
        .results
        .iter()
        .flat_map(|r| r.deltas.iter().map(move |d| (r, d)))
        .collect();
    if deltas.is_empty() {
        return;
    }
    let regressed = deltas.iter().filter(|(_, d)| d.regressed).count();
    out.push('\n');
    let title = format!(
        "Against the baseline: {} figure(s), {regressed} regressed:",
        deltas.len()
    );
    out.push_str(&paint(&title, BOLD, style.color));
    out.push('\n');
    for (r, d) in deltas {
        let colour = if d.regressed { RED } else { DIM };
        let text = format!("{} {d}", r.id);
        let lines = wrap(&text, LABEL_INDENT, LABEL_INDENT + 2, style.width);
        let first = format!("{}{}", " ".repeat(LABEL_INDENT), lines[0]);
        for line in std::iter::once(&first).chain(&lines[1..]) {
            out.push_str(&paint(line, colour, style.color));
            out.push('\n');
        }
    }
}

/// One failure, skip or not-applicable pass in the summary: the id and title, then each fact
/// on its own wrapped lines.
fn entry(out: &mut String, r: &CheckResult, style: Style) {
    let (head, _) = mark_and_id(r, style.color);
    out.push_str(&format!("{head}{}\n", one_line(&r.title)));
    let mut facts: Vec<(&str, String)> = Vec::new();
    match &r.verdict {
        Verdict::Fail(why) => {
            facts.push(("expected", one_line(&r.expected)));
            facts.push(("observed", one_line(&r.observed)));
            facts.push(("why", one_line(why)));
        }
        Verdict::Skip(why) | Verdict::NotApplicable(why) | Verdict::Waived(why) => {
            facts.push(("why", one_line(why)));
        }
        Verdict::Pass => {}
    }
    if let Some(note) = &r.waiver {
        facts.push(("waiver", note.to_string()));
    }
    let indent = LABEL_INDENT + LABEL_WIDTH;
    for (label, text) in facts {
        if text.is_empty() {
            continue;
        }
        let lead = format!("{}{label:<LABEL_WIDTH$}", " ".repeat(LABEL_INDENT));
        let lines = wrap(&text, indent, indent, style.width);
        out.push_str(&format!("{}{}\n", paint(&lead, DIM, style.color), lines[0]));
        for line in &lines[1..] {
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// What to do after this run, most useful first: the timelines, then checking one's own
/// service (after an embedded run) or `--strict` (after skips that passed), then the docs.
fn next_steps(report: &RunReport, html: Option<&Path>) -> Vec<String> {
    let mut steps = Vec::new();
    steps.push(match html {
        Some(path) => format!("{} (charts, timelines)", path.display()),
        None => "--html report.html (charts, timelines)".to_string(),
    });
    if report.manifest.mode == "embedded" {
        steps.push("--target URL (your own service)".to_string());
    } else if report.skipped() > 0 && !report.manifest.strict {
        steps.push("--strict (a skip fails)".to_string());
    }
    steps.push(if is_load(&report.manifest) {
        "docs/load.md".to_string()
    } else {
        "docs/gate.md".to_string()
    });
    steps
}
