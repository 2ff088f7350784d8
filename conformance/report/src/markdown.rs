//! `--markdown FILE`: a run as GitHub-flavoured Markdown, for the page a CI system shows beside
//! its log (GitHub's job summary, a GitLab or Buildkite annotation, a Jenkins artifact): the
//! verdict first, then every check in one table with the ones that did not pass at the top and
//! what was observed and why, waivers, and the figures that regressed against a baseline.
//!
//! Several runs of one gate (`check`, then `load --profile burst`) each write their own file;
//! their tables share one layout (`| step | check | title | verdict | observed / why |`), so a
//! gate concatenates them under one heading of its own, as the repository's action does.

use std::fmt::Write as _;
use std::path::Path;

use plimsoll_conformance::verdict::{CheckResult, RunReport, Verdict};

/// The longest text of one table cell, in characters: a summary page is bounded (GitHub keeps
/// at most 1 MiB of a step's summary), and a reason longer than this is in the other reports.
const CELL: usize = 400;

/// The table's heading row, shared by every run's file.
pub const TABLE_HEAD: &str =
    "| step | check | title | verdict | observed / why |\n|---|---|---|---|---|";

/// Writes `report` as Markdown to `path`; `step` names the run in its rows (`check`,
/// `load-burst`).
pub fn write(path: &Path, report: &RunReport, step: &str) -> std::io::Result<()> {
    std::fs::write(path, render(report, step))
}

/// `report` as Markdown: a heading with the verdict, the run's target and contract, the counts,
/// then one table row per check, those that did not pass first.
pub fn render(report: &RunReport, step: &str) -> String {
    let mut md = String::new();
    let verdict = if report.failed() == 0 { "pass" } else { "FAIL" };
    let _ = writeln!(md, "### `{}`: {verdict}\n", cell(step));
    let m = &report.manifest;
    let _ = writeln!(
        md,
        "Target `{}`, contract {} ({}), strict {}{}.\n",
        cell(&m.target),
        cell(&m.contract_version),
        cell(&m.contract_hash),
        if m.strict { "on" } else { "off" },
        if m.scaled { ", scaled" } else { "" },
    );
    let _ = writeln!(md, "{}.\n", counts(report));
    if let Some(why) = &m.incomplete {
        let _ = writeln!(md, "- incomplete: {}", cell(why));
    }
    for refused in &m.refused {
        let _ = writeln!(
            md,
            "- claimed value refused: {}",
            cell(&format!("{} — {}", refused.difference, refused.reason))
        );
    }
    if m.incomplete.is_some() || !m.refused.is_empty() {
        md.push('\n');
    }
    let _ = writeln!(md, "{TABLE_HEAD}");
    let mut rows: Vec<&CheckResult> = report.results.iter().collect();
    rows.sort_by_key(|r| rank(&r.verdict));
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} |",
            cell(step),
            cell(&r.id.to_string()),
            cell(&r.title),
            label(&r.verdict),
            cell(&why(r)),
        );
    }
    regressions(&mut md, report, step);
    md
}

/// `3 passed, 1 not applicable, 1 failed, 0 skipped, 1 waived`: the not-applicable and waived
/// counts only when there are some.
fn counts(report: &RunReport) -> String {
    let mut parts = vec![format!("{} passed", report.passed())];
    if report.not_applicable() > 0 {
        parts.push(format!("{} not applicable", report.not_applicable()));
    }
    parts.push(format!("{} failed", report.failed()));
    parts.push(format!("{} skipped", report.skipped()));
    if report.waived() > 0 {
        parts.push(format!("{} waived", report.waived()));
    }
    parts.join(", ")
}

/// Where a verdict's rows go: what fails the run first, what a reader must still look at next,
/// passes last.
fn rank(verdict: &Verdict) -> u8 {
    match verdict {
        Verdict::Fail(_) => 0,
        Verdict::Skip(_) => 1,
        Verdict::Waived(_) => 2,
        Verdict::NotApplicable(_) => 3,
        Verdict::Pass => 4,
    }
}

/// A verdict as the table shows it.
fn label(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "✅ pass",
        Verdict::Fail(_) => "❌ fail",
        Verdict::Skip(_) => "⚪ skip",
        Verdict::NotApplicable(_) => "➖ not applicable",
        Verdict::Waived(_) => "🟡 waived",
    }
}

/// What a reader needs for a check that did not pass: what was observed and why it failed, or
/// why it was skipped, waived or not applicable; nothing for a pass.
fn why(r: &CheckResult) -> String {
    match &r.verdict {
        Verdict::Pass => String::new(),
        Verdict::Fail(reason) => [
            (!r.observed.is_empty()).then(|| format!("observed: {}", r.observed)),
            Some(format!("why: {reason}")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; "),
        Verdict::Skip(reason) => format!("skipped: {reason}"),
        Verdict::Waived(reason) => format!("waived: {reason}"),
        Verdict::NotApplicable(reason) => format!("not applicable: {reason}"),
    }
}

/// `**Regressions against the baseline**` and their table, when a figure moved the worse way
/// beyond the runs' noise (`--baseline`).
fn regressions(md: &mut String, report: &RunReport, step: &str) {
    let regressed: Vec<_> = report
        .results
        .iter()
        .flat_map(|r| r.deltas.iter().map(move |d| (r, d)))
        .filter(|(_, d)| d.regressed)
        .collect();
    if regressed.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n**Regressions against the baseline**\n\n\
         | step | check | figure | baseline | this run | threshold |\n|---|---|---|---|---|---|"
    );
    for (r, d) in regressed {
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} | {} |",
            cell(step),
            cell(&r.id.to_string()),
            cell(&d.figure),
            d.unit.format(d.baseline),
            d.unit.format(d.current),
            d.unit.format(d.threshold)
        );
    }
}

/// Text safe inside one table cell: one line, at most [`CELL`] characters, no pipe that would
/// end the cell and no markup a summary page would render (`<`, `>`, `&` escaped).
fn cell(text: &str) -> String {
    let mut flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > CELL {
        flat = flat.chars().take(CELL - 1).collect::<String>() + "…";
    }
    flat.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
}
