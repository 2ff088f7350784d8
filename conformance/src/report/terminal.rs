//! What a person watching `plimsoll check` sees: one line per finished check, a spinner naming
//! the check in flight, and a fixed-width table at the end.
//!
//! Colour is plain ANSI and only on request, so piped output and CI logs stay clean.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::format_ms;
use crate::verdict::{CheckResult, RunReport, Verdict};

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// The mark a verdict gets in every terminal rendering.
pub fn symbol(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "✓",
        Verdict::Fail(_) => "✗",
        Verdict::Skip(_) => "–",
    }
}

fn verdict_colour(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => GREEN,
        Verdict::Fail(_) => RED,
        Verdict::Skip(_) => YELLOW,
    }
}

fn paint(text: &str, code: &str, color: bool) -> String {
    if color {
        format!("{code}{text}{RESET}")
    } else {
        text.to_string()
    }
}

/// Flattens text to one line and drops control characters: values come from the server under
/// test, and a stray newline or escape sequence must not break (or hijack) the terminal layout.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last_space = false;
    for c in text.chars() {
        let c = if c.is_whitespace() || c.is_control() {
            ' '
        } else {
            c
        };
        if c == ' ' {
            if !last_space && !out.is_empty() {
                out.push(' ');
            }
            last_space = true;
        } else {
            out.push(c);
            last_space = false;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// Cuts `text` to at most `width` characters, marking the cut with `…`.
fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Pads to `width` characters (counted as chars, which is what the table's glyphs occupy).
fn pad(text: &str, width: usize, right_align: bool) -> String {
    let fill = " ".repeat(width.saturating_sub(text.chars().count()));
    if right_align {
        format!("{fill}{text}")
    } else {
        format!("{text}{fill}")
    }
}

/// One line for a finished check, printed as soon as it finishes:
/// `✓ T1 Title: observed … (expected …)  12 ms`. A skip shows its reason instead, because a
/// skipped check has observed nothing.
pub fn progress_line(r: &CheckResult, color: bool) -> String {
    let colour = verdict_colour(&r.verdict);
    let head = paint(
        &format!("{} {}", symbol(&r.verdict), one_line(&r.id)),
        colour,
        color,
    );
    let body = match &r.verdict {
        Verdict::Skip(reason) => format!("skipped: {}", one_line(reason)),
        Verdict::Pass | Verdict::Fail(_) => format!(
            "observed {} (expected {})",
            one_line(&r.observed),
            one_line(&r.expected)
        ),
    };
    let duration = paint(&format_ms(r.duration_ms), DIM, color);
    format!("{head} {}: {body}  {duration}", one_line(&r.title))
}

/// Column caps: wide enough for the usual contract values, narrow enough for 120 columns.
const COLUMNS: [(&str, usize, bool); 6] = [
    ("id", 24, false),
    ("clause", 10, false),
    ("verdict", 7, false),
    ("expected", 30, false),
    ("observed", 30, false),
    ("ms", 9, true),
];

/// The end-of-run table (id | clause | verdict | expected | observed | ms), the totals line
/// `N passed, M failed, K skipped`, then the reason of every failure and skip in full, since
/// the table has to truncate.
pub fn summary_table(report: &RunReport, color: bool) -> String {
    let rows: Vec<[String; 6]> = report
        .results
        .iter()
        .map(|r| {
            [
                one_line(&r.id),
                one_line(&r.clause),
                r.verdict.label().to_string(),
                one_line(&r.expected),
                one_line(&r.observed),
                if r.duration_ms.is_finite() {
                    format!("{:.0}", r.duration_ms)
                } else {
                    "?".to_string()
                },
            ]
        })
        .collect();

    let widths: Vec<usize> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (name, cap, _))| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain(std::iter::once(name.len()))
                .max()
                .unwrap_or(0)
                .min(*cap)
        })
        .collect();

    let mut out = String::new();
    let header: Vec<String> = COLUMNS
        .iter()
        .zip(&widths)
        .map(|((name, _, right), w)| pad(name, *w, *right))
        .collect();
    out.push_str(&paint(&header.join(" | "), BOLD, color));
    out.push('\n');
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&rule.join("-+-"));
    out.push('\n');

    for (row, r) in rows.iter().zip(&report.results) {
        let cells: Vec<String> = row
            .iter()
            .zip(COLUMNS.iter().zip(&widths))
            .enumerate()
            .map(|(i, (cell, ((_, _, right), w)))| {
                let cell = pad(&truncate(cell, *w), *w, *right);
                // Colour after padding so escape codes never count towards the width.
                if i == 2 {
                    paint(&cell, verdict_colour(&r.verdict), color)
                } else {
                    cell
                }
            })
            .collect();
        out.push_str(&cells.join(" | "));
        out.push('\n');
    }

    let not_applicable = match report.not_applicable() {
        0 => String::new(),
        n => format!(" ({n} not applicable)"),
    };
    let totals = format!(
        "{} passed{not_applicable}, {} failed, {} skipped",
        report.passed(),
        report.failed(),
        report.skipped()
    );
    // One colour for the whole line keeps it a single greppable string.
    let totals_colour = if report.failed() > 0 { RED } else { GREEN };
    out.push('\n');
    out.push_str(&paint(&totals, totals_colour, color));
    out.push('\n');

    let reasons = |title: &str, want_fail: bool, out: &mut String| {
        let picked: Vec<(&CheckResult, &String)> = report
            .results
            .iter()
            .filter_map(|r| match &r.verdict {
                Verdict::Fail(why) if want_fail => Some((r, why)),
                Verdict::Skip(why) if !want_fail => Some((r, why)),
                _ => None,
            })
            .collect();
        if picked.is_empty() {
            return;
        }
        out.push('\n');
        out.push_str(title);
        out.push('\n');
        for (r, why) in picked {
            let head = paint(
                &format!("{} {}", symbol(&r.verdict), one_line(&r.id)),
                verdict_colour(&r.verdict),
                color,
            );
            out.push_str(&format!(
                "  {head} [{}] {}: {}\n",
                one_line(&r.clause),
                one_line(&r.title),
                one_line(why)
            ));
        }
    };
    reasons("Failures:", true, &mut out);
    reasons("Skipped:", false, &mut out);
    let not_applicable: Vec<&CheckResult> = report
        .results
        .iter()
        .filter(|r| r.not_applicable())
        .collect();
    if !not_applicable.is_empty() {
        out.push_str("\nNot applicable (passed):\n");
        for r in not_applicable {
            out.push_str(&format!(
                "  {} {} [{}] {}: {}\n",
                paint(symbol(&r.verdict), verdict_colour(&r.verdict), color),
                one_line(&r.id),
                one_line(&r.clause),
                one_line(&r.title),
                one_line(&r.observed)
            ));
        }
    }
    out
}

/// A spinner naming the check in flight, with finished-check lines printed above it.
///
/// It draws only on an interactive stderr and when enabled; otherwise every method is a
/// no-op, so callers need no branches (and can use [`Progress::is_active`] to print the
/// lines themselves in CI logs).
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// `total` is the number of checks that will run.
    pub fn new(total: usize, enabled: bool) -> Self {
        if !enabled || !std::io::stderr().is_terminal() {
            return Self { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg}  {elapsed}")
            .expect("the template is a constant and valid");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(100));
        Self { bar: Some(bar) }
    }

    /// Whether anything is drawn.
    pub fn is_active(&self) -> bool {
        self.bar.is_some()
    }

    /// Names the check that just began.
    pub fn start(&self, id: &str, title: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} {}", one_line(id), one_line(title)));
        }
    }

    /// Prints a finished check's line above the spinner and counts it.
    pub fn finish_one(&self, line: &str) {
        if let Some(bar) = &self.bar {
            bar.println(line);
            bar.inc(1);
        }
    }

    /// Removes the spinner so the summary table starts on a clean line.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    /// An early return (e.g. `?`) must not leave a half-drawn spinner on the terminal.
    fn drop(&mut self) {
        if let Some(bar) = &self.bar
            && !bar.is_finished()
        {
            bar.finish_and_clear();
        }
    }
}
