//! How a terminal line is drawn: the width, the colours and the mark of each verdict, kept in
//! one place so every part of the report agrees on them.

use std::io::IsTerminal;

use plimsoll_conformance::verdict::Verdict;

pub(super) const GREEN: &str = "\x1b[32m";
pub(super) const RED: &str = "\x1b[31m";
pub(super) const YELLOW: &str = "\x1b[33m";
pub(super) const BOLD: &str = "\x1b[1m";
pub(super) const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// The widest a line gets; a narrower terminal narrows it (down to [`MIN_WIDTH`]).
pub const WIDTH: usize = 100;
const MIN_WIDTH: usize = 60;

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
        Verdict::NotApplicable(_) => "○",
        Verdict::Waived(_) => "~",
    }
}

pub(super) fn verdict_colour(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => GREEN,
        Verdict::Fail(_) => RED,
        Verdict::Skip(_) | Verdict::Waived(_) => YELLOW,
        Verdict::NotApplicable(_) => DIM,
    }
}

pub(super) fn paint(text: &str, code: &str, color: bool) -> String {
    if color {
        format!("{code}{text}{RESET}")
    } else {
        text.to_string()
    }
}
