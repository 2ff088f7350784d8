//! What a person watching `plimsoll check` (or `load`) sees, in three parts:
//!
//! 1. a [`header`]: what is checked (the target, or the embedded server and the values it was
//!    scaled to), the contract, trials and strictness;
//! 2. one [`progress_line`] per finished check, at most [`WIDTH`] columns (the observed part
//!    is cut to fit; a spinner names the check in flight on a terminal);
//! 3. a [`summary`]: the counts, every failure, skip and not-applicable pass with its reasons
//!    in full (wrapped, never cut), and one line of next steps.
//!
//! Durations are always seconds with two decimals (one from 10 s on). Colour is plain ANSI and
//! only on an interactive stdout, so piped output and CI logs stay clean.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use plimsoll_spec::Adopted;
use serde_json::Value;

use crate::verdict::{CheckResult, Manifest, NOT_APPLICABLE, RunReport, Verdict};

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// The widest a line gets; a narrower terminal narrows it (down to [`MIN_WIDTH`]).
pub const WIDTH: usize = 100;
const MIN_WIDTH: usize = 60;
/// The id column of a check line (`contract` is the longest id of `check`).
const ID_WIDTH: usize = 8;
/// Where the text of a summary entry's `expected`/`observed`/`why` starts.
const LABEL_INDENT: usize = 4;
const LABEL_WIDTH: usize = 10;

/// How the terminal report is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// ANSI colours (an interactive stdout, not `--quiet`).
    pub color: bool,
    /// Columns a line may take.
    pub width: usize,
}

impl Style {
    /// No colours, [`WIDTH`] columns: CI logs, pipes, tests.
    pub fn plain() -> Style {
        Style {
            color: false,
            width: WIDTH,
        }
    }

    /// Colours and the terminal's width (at most [`WIDTH`]) on an interactive stdout unless
    /// `quiet`; [`Style::plain`] otherwise.
    pub fn detect(quiet: bool) -> Style {
        if quiet || !std::io::stdout().is_terminal() {
            return Style::plain();
        }
        let columns = console::Term::stdout()
            .size_checked()
            .map_or(WIDTH, |(_, cols)| usize::from(cols));
        Style {
            color: true,
            width: columns.clamp(MIN_WIDTH, WIDTH),
        }
    }
}

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

/// A duration as every terminal line shows it: seconds, two decimals under 10 s (`0.23 s`,
/// `4.07 s`), one from there on (`23.4 s`); `?` for a value that is not a time.
pub fn format_duration(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "?".to_string();
    }
    let seconds = ms / 1000.0;
    if seconds < 9.995 {
        format!("{seconds:.2} s")
    } else {
        format!("{seconds:.1} s")
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

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// Cuts `text` to at most `width` characters, marking the cut with `…`.
fn truncate(text: &str, width: usize) -> String {
    if chars(text) <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Word-wraps `text` (one line already) into lines of at most `width` characters, the first
/// starting after `first` characters already on the line and the rest after `indent` spaces.
/// A word longer than a line is split, never cut: every character of `text` is kept.
pub(crate) fn wrap(text: &str, first: usize, indent: usize, width: usize) -> Vec<String> {
    let room = |line: usize| {
        let used = if line == 0 { first } else { indent };
        width.saturating_sub(used).max(20)
    };
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let at = lines.len() - 1;
            let current = chars(&lines[at]);
            let gap = usize::from(current > 0);
            if current + gap + word.len() <= room(at) {
                if gap == 1 {
                    lines[at].push(' ');
                }
                lines[at].extend(word.iter());
                break;
            }
            if current == 0 {
                // Longer than a whole line: split it.
                let rest = word.split_off(room(at));
                lines[at].extend(word.iter());
                word = rest;
            }
            lines.push(String::new());
        }
    }
    let pad = " ".repeat(indent);
    lines
        .into_iter()
        .enumerate()
        .map(|(i, l)| if i == 0 { l } else { format!("{pad}{l}") })
        .collect()
}

/// The verdict's mark and the id, padded to the id column: `✓ T1       ` (in colour, with
/// the columns it takes).
fn mark_and_id(r: &CheckResult, color: bool) -> (String, usize) {
    let text = format!("{} {}", symbol(&r.verdict), one_line(&r.id));
    let columns = (chars(&text) + 1).max(ID_WIDTH + 3);
    let fill = " ".repeat(columns - chars(&text));
    let shown = paint(&text, verdict_colour(&r.verdict), color);
    (format!("{shown}{fill}"), columns)
}

/// One line for a finished check, printed as soon as it finishes, at most `style.width`
/// columns: `✓ T1       Max concurrent digitize requests: busy gauge max 4; …   1.44 s`.
/// A skip shows its reason instead of an observation, because a skipped check observed
/// nothing; the observed part is what gets cut to fit (a failure's is in the summary in full).
pub fn progress_line(r: &CheckResult, style: Style) -> String {
    let (head, head_width) = mark_and_id(r, style.color);
    let duration = format!("{:>7}", format_duration(r.duration_ms));
    let title = one_line(&r.title);
    let detail = match &r.verdict {
        Verdict::Skip(reason) => format!("skipped: {}", one_line(reason)),
        Verdict::Pass | Verdict::Fail(_) => one_line(&r.observed),
    };
    let room = style
        .width
        .saturating_sub(head_width + chars(&duration) + 2);
    let text = if detail.is_empty() {
        truncate(&title, room)
    } else {
        truncate(&format!("{title}: {detail}"), room)
    };
    let fill = " ".repeat(room - chars(&text) + 2);
    // The title stands out; what was observed is dimmed (colour only).
    let title_end = text
        .char_indices()
        .nth(chars(&title) + 1)
        .map_or(text.len(), |(i, _)| i);
    let (title, detail) = text.split_at(title_end);
    format!(
        "{head}{title}{}{fill}{}",
        paint(detail, DIM, style.color && !detail.is_empty()),
        paint(&duration, DIM, style.color)
    )
}

/// What the run checks, before the first check: the target (or the embedded server, with the
/// values it was scaled to), the contract, and how the checks run.
///
/// ```text
/// Checking the embedded reference server on 127.0.0.1:41733
///   scaled: digitize timeout 2 s, export timeout 1 s, upload read timeout 1 s, digitize queue 2
///   contract 1.0.0 (3f2a9c1b), 5 trials per timing check, strict off
/// ```
pub fn header(manifest: &Manifest, style: Style) -> String {
    let embedded = manifest.mode == "embedded";
    let what = if embedded {
        let address = manifest
            .target
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        format!("the embedded reference server on {address}")
    } else {
        one_line(&manifest.target)
    };
    let mut out = paint(&format!("Checking {what}"), BOLD, style.color);
    out.push('\n');

    let mut values = match (&manifest.claim_unreadable, manifest.adopted.is_empty()) {
        (Some(_), _) => "its claim is unreadable: judged by the contract's own values".to_string(),
        (None, true) => "judged by the contract's own values".to_string(),
        (None, false) => {
            let words: Vec<String> = manifest.adopted.iter().map(adopted_words).collect();
            let lead = if embedded {
                "scaled"
            } else {
                "adopted from its claim"
            };
            format!("{lead}: {}", words.join(", "))
        }
    };
    if !manifest.refused.is_empty() {
        values.push_str(&format!(
            "; {} claimed value(s) refused (see `contract`)",
            manifest.refused.len()
        ));
    }
    let run = if is_load(manifest) {
        format!("seed {}", manifest.seed)
    } else {
        format!(
            "{} trial{} per timing check, strict {}",
            manifest.trials,
            if manifest.trials == 1 { "" } else { "s" },
            if manifest.strict {
                "on (a skip fails)"
            } else {
                "off"
            }
        )
    };
    let hash: String = manifest.contract_hash.chars().take(8).collect();
    let contract = format!(
        "contract {} ({hash}), {run}",
        one_line(&manifest.contract_version)
    );
    for line in [values, contract] {
        // `wrap` indents the continuation lines itself.
        out.push_str("  ");
        out.push_str(&wrap(&one_line(&line), 2, 4, style.width).join("\n"));
        out.push('\n');
    }
    out
}

fn is_load(manifest: &Manifest) -> bool {
    manifest.tool.starts_with("plimsoll load")
}

/// An adopted value in words, from its field and the claimed value:
/// `clauses.B1.value.digitize_timeout_ms` = 2000 reads `digitize timeout 2 s`,
/// `…digitize_queue_capacity` = 2 reads `digitize queue 2`, `…memory_cap_mb` = 512 reads
/// `memory cap 512 MB`, a flag reads `on`/`off`.
pub fn adopted_words(a: &Adopted) -> String {
    let field = a
        .difference
        .path
        .rsplit('.')
        .next()
        .unwrap_or(&a.difference.path);
    let theirs = a.difference.theirs.as_ref();
    let (name, value) = if let Some(name) = field.strip_suffix("_ms") {
        let value = match theirs.and_then(Value::as_f64) {
            Some(ms) if ms >= 1000.0 && ms % 100.0 == 0.0 => {
                format!("{} s", trim_zeros(ms / 1000.0))
            }
            Some(ms) => format!("{} ms", trim_zeros(ms)),
            None => plain(theirs),
        };
        (name, value)
    } else if let Some(name) = field.strip_suffix("_mb") {
        (name, format!("{} MB", plain(theirs)))
    } else if let Some(name) = field.strip_suffix("_capacity") {
        (name, plain(theirs))
    } else {
        let value = match theirs {
            Some(Value::Bool(on)) => if *on { "on" } else { "off" }.to_string(),
            other => plain(other),
        };
        (field, value)
    };
    one_line(&format!("{} {value}", name.replace('_', " ")))
}

fn trim_zeros(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

fn plain(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "(absent)".into(),
    }
}

/// The end of the run: the counts and the time of all checks, every failure (expected, observed, why),
/// skip (why) and not-applicable pass (why) in full, wrapped to `style.width` and never cut,
/// then one line of next steps. It repeats no line a passing check already printed.
///
/// `html` is the `--html` file of the run, if any (the next steps point at it).
pub fn summary(report: &RunReport, html: Option<&Path>, style: Style) -> String {
    let color = style.color;
    let not_applicable = match report.not_applicable() {
        0 => String::new(),
        n => format!(" ({n} not applicable)"),
    };
    // Checks run one after the other, so their times add up; a load profile's verdicts all
    // judge the same load, so theirs do not.
    let took = if is_load(&report.manifest) {
        String::new()
    } else {
        format!(" in {}", format_duration(super::total_ms(report)))
    };
    let totals = format!(
        "{} passed{not_applicable}, {} failed, {} skipped{took}",
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
    for (title, picked) in [
        ("Failed", failed),
        ("Skipped", skipped),
        ("Not applicable (passed)", not_applicable),
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

    out.push('\n');
    let next = format!("Next: {}", next_steps(report, html).join("; "));
    for line in wrap(&next, 0, 6, style.width) {
        out.push_str(&paint(&line, DIM, color));
        out.push('\n');
    }
    out
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
        Verdict::Skip(why) => facts.push(("why", one_line(why))),
        Verdict::Pass => facts.push((
            "why",
            one_line(
                r.observed
                    .strip_prefix(NOT_APPLICABLE)
                    .unwrap_or(&r.observed),
            ),
        )),
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
        Some(path) => format!("{} (request timelines)", path.display()),
        None => "--html report.html (request timelines)".to_string(),
    });
    if report.manifest.mode == "embedded" {
        steps.push("--target URL (your own service)".to_string());
    } else if report.skipped() > 0 && !report.manifest.strict {
        steps.push("--strict (a skip fails)".to_string());
    }
    steps.push(if is_load(&report.manifest) {
        "docs/load.md".to_string()
    } else {
        "docs/conformance.md".to_string()
    });
    steps
}

/// Everything a run prints on a plain terminal, at once: the [`header`], a blank line, one
/// [`progress_line`] per result and the [`summary`]. A run prints the same parts as it goes;
/// this is for tests and previews.
pub fn transcript(report: &RunReport, html: Option<&Path>, style: Style) -> String {
    let mut out = header(&report.manifest, style);
    out.push('\n');
    for r in &report.results {
        out.push_str(&progress_line(r, style));
        out.push('\n');
    }
    out.push_str(&summary(report, html, style));
    out
}

/// A spinner naming the check in flight, with finished-check lines printed above it.
///
/// It draws only on an interactive stderr and when enabled; otherwise [`Progress::line`]
/// prints plain lines to stdout and the other methods do nothing, so callers need no branches.
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

    /// A finished check's line: above the spinner (and counted) when it draws, on stdout
    /// otherwise.
    pub fn line(&self, line: &str) {
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => println!("{line}"),
        }
    }

    /// Removes the spinner so the summary starts on a clean line.
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
