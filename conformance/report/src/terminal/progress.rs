//! The spinner shown while checks run, on an interactive stderr only, so a person sees which
//! check is in flight and logs see only the finished lines.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::text::one_line;

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
