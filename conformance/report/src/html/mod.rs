//! `--html FILE`: one self-contained page (inline CSS and SVG, no script, no external assets)
//! so it can be attached to a CI run or mailed and still open anywhere.
//!
//! The run as a whole comes first, after the verdicts: its charts over time, per pool
//! ([`charts`]), drawn with `plotters` as inline SVG.
//!
//! Every check gets a timeline picture of its requests ([`timeline`]): one lane per request
//! over time, the wait in the queue hatched, the run solid, coloured by outcome. That picture
//! is what makes a FIFO or refusal verdict believable at a glance.
//!
//! Everything shown comes from the server under test or from the command line, so the page is
//! a `maud` template: every value spliced in is escaped unless it is marked as markup.

mod charts;
pub mod matrix;
mod timeline;

use std::path::Path;

use maud::{DOCTYPE, Markup, PreEscaped, html};
use plimsoll_conformance::checks::contract::{adopted_line, refused_line};
use plimsoll_conformance::verdict::{CheckResult, RunReport, Verdict};

use super::format_ms;

const STYLE: &str = include_str!("style.css");

/// Escaped text, or a muted dash for an empty value (a skipped check observed nothing).
fn or_dash(text: &str) -> Markup {
    html! {
        @if text.trim().is_empty() {
            span.muted { "—" }
        } @else {
            (text)
        }
    }
}

/// An `id` attribute for a check: ids like `T3.retry-after` must still make a valid fragment.
fn anchor(index: usize, id: &str) -> String {
    let slug: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("check-{index}-{slug}")
}

/// `YYYY-MM-DD HH:MM:SS UTC` from Unix milliseconds; `?` outside the calendar `time` knows.
fn utc_timestamp(unix_ms: u128) -> String {
    let at = i128::try_from(unix_ms)
        .ok()
        .and_then(|ms| ms.checked_mul(1_000_000))
        .and_then(|ns| time::OffsetDateTime::from_unix_timestamp_nanos(ns).ok());
    match at {
        Some(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        None => "?".to_owned(),
    }
}

/// Control characters are not allowed in HTML text (nor in the SVG read as XML): the page
/// shows each as U+FFFD. Only values from the run can hold one; the template holds none.
fn without_controls(page: &str) -> String {
    page.chars()
        .map(|c| match c {
            '\n' | '\t' | '\r' => c,
            c if c.is_control() => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// The whole page as a string.
pub fn render(report: &RunReport) -> String {
    page(
        &format!("Plimsoll check: {}", report.manifest.target),
        html! {
            (header(report))
            (verdict_table(report))
            (charts::section(report))
            @for (i, r) in report.results.iter().enumerate() {
                (check_section(i, r))
            }
        },
    )
}

/// A whole page of ours: the one style sheet inline (a report is one file, opened anywhere),
/// `body` in its `main`, and no control character from a target's text left in it.
fn page(title: &str, body: Markup) -> String {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body { main { (body) } }
        }
    };
    let mut page = without_controls(&page.into_string());
    page.push('\n');
    page
}

/// How the run was made: totals, target, contract, seed, effective values.
fn header(report: &RunReport) -> Markup {
    let m = &report.manifest;
    html! {
        header.card {
            h1 { "Plimsoll conformance report" }
            p.totals {
                span.pass { (report.passed()) " passed" } ", "
                @if report.not_applicable() > 0 {
                    span.not_applicable { (report.not_applicable()) " not applicable" } ", "
                }
                span.fail { (report.failed()) " failed" } ", "
                span.skip { (report.skipped()) " skipped" }
                @if report.waived() > 0 { ", " span.skip { (report.waived()) " waived" } }
            }
            dl.facts {
                dt { "Target" } dd { code { (m.target) } }
                dt { "Mode" } dd { (m.mode) }
                dt { "Contract" } dd { "version " (m.contract_version) " · hash " code { (m.contract_hash) } }
                dt { "Scaled" } dd {
                    @if m.scaled { "yes: the checks judged adopted values, listed below" } @else { "no" }
                }
                dt { "Adopted" } dd {
                    @if m.adopted.is_empty() {
                        "none"
                    } @else {
                        ul { @for a in &m.adopted { li { code { (adopted_line(a)) } } } }
                    }
                }
                dt { "Refused" } dd {
                    @if m.refused.is_empty() {
                        "none"
                    } @else {
                        ul { @for r in &m.refused { li { code { (refused_line(r)) } } } }
                    }
                }
                @if let Some(why) = &m.claim_unreadable {
                    dt { "Claim" } dd { "unreadable: " (why) }
                }
                @if let Some(why) = &m.incomplete {
                    dt { "Incomplete" } dd { strong { (why) } }
                }
                dt { "Trials" } dd { (m.trials) }
                dt { "Seed" } dd { code { (m.seed) } }
                dt { "Tool" } dd { (m.tool) " " (m.version) }
                dt { "Started" } dd { (utc_timestamp(m.started_unix_ms)) }
                @if !m.effective.is_null() {
                    dt { "Effective values" } dd {
                        details {
                            summary { "show" }
                            pre { (serde_json::to_string_pretty(&m.effective).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

/// One row per check, each linking to its section.
fn verdict_table(report: &RunReport) -> Markup {
    html! {
        section.card {
            h2 { "Verdicts" }
            table.verdicts {
                thead {
                    tr {
                        th { "Id" } th { "Clause" } th { "Check" } th { "Verdict" }
                        th { "Expected" } th { "Observed" } th { "Duration" }
                    }
                }
                tbody {
                    @for (i, r) in report.results.iter().enumerate() {
                        @let label = r.verdict.label();
                        tr class=(label) {
                            td.key { a href={ "#" (anchor(i, &r.id.to_string())) } { code { (r.id) } } }
                            td.key { (r.id.clause()) }
                            td { (r.title) }
                            td { span class={ "badge " (label) } { (label) } }
                            td.text { (or_dash(&r.expected)) }
                            td.text { (or_dash(&r.observed)) }
                            td.num { (format_ms(r.duration_ms)) }
                        }
                    }
                }
            }
        }
    }
}

/// A check in full: its facts, its timeline picture, its evidence.
fn check_section(index: usize, r: &CheckResult) -> Markup {
    let label = r.verdict.label();
    let trials: Vec<String> = r.trials_ms.iter().map(|t| format!("{t:.1}")).collect();
    html! {
        section class={ "card check " (label) } id=(anchor(index, &r.id.to_string())) {
            h2 { span class={ "badge " (label) } { (label) } " " code { (r.id) } " " (r.title) }
            dl.facts {
                dt { "Clause" } dd { (r.id.clause()) }
                dt { "Expected" } dd { (or_dash(&r.expected)) }
                dt { "Observed" } dd { (or_dash(&r.observed)) }
                @match &r.verdict {
                    Verdict::Pass => {}
                    Verdict::Fail(why)
                    | Verdict::Skip(why)
                    | Verdict::NotApplicable(why)
                    | Verdict::Waived(why) => {
                        dt { "Reason" } dd.reason { (why) }
                    }
                }
                @if let Some(note) = &r.waiver {
                    dt { "Waiver" } dd { (note) }
                }
                @if !r.deltas.is_empty() {
                    dt { "Against the baseline" }
                    dd { @for d in &r.deltas { div.reason[d.regressed] { (d) } } }
                }
                dt { "Duration" } dd { (format_ms(r.duration_ms)) }
                @if !trials.is_empty() {
                    dt { "Trials (ms)" } dd.mono { (trials.join(", ")) }
                }
            }
            @if !r.timeline.is_empty() {
                h3 { "Timeline (" (r.timeline.len()) " requests)" }
                (timeline::svg(index, &r.timeline))
            }
            @if !r.evidence.is_empty() {
                h3 { "Evidence" }
                ul.evidence { @for line in &r.evidence { li { code { (line) } } } }
            }
        }
    }
}

/// Writes [`render`] to `path`.
pub fn write(path: &Path, report: &RunReport) -> std::io::Result<()> {
    std::fs::write(path, render(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_timestamp(1_709_210_096_000), "2024-02-29 12:34:56 UTC");
        assert_eq!(utc_timestamp(u128::MAX), "?");
    }
}
