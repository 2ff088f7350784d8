//! A run's reports, as the binary makes them: the terminal while it runs ([`Terminal`], the
//! library's [`Observer`] drawn with the report renderers), then the files asked for
//! ([`finish`]), a stopped run's too, marked incomplete.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use plimsoll_conformance::observe::Observer;
use plimsoll_conformance::session::Fatal;
use plimsoll_conformance::verdict::{CheckResult, Manifest, RunReport};
use plimsoll_report::{self as render, Progress, Style, terminal};
use plimsoll_spec::CheckId;

use crate::args::ReportFiles;

/// The terminal report of one run: its header, a line per finished check (above a spinner
/// naming the check in flight, on an interactive terminal), its summary.
pub struct Terminal {
    style: Style,
    /// The run's `--html` file, which the summary's next steps point at.
    html: Option<PathBuf>,
    /// The spinner while the checks run.
    progress: Mutex<Option<Progress>>,
}

impl Terminal {
    /// The terminal report of a run writing `files`, drawn as `--quiet` and the terminal allow.
    pub fn new(files: &ReportFiles) -> Terminal {
        Terminal {
            style: files.style(),
            html: files.html.clone(),
            progress: Mutex::new(None),
        }
    }

    fn progress(&self) -> MutexGuard<'_, Option<Progress>> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes the spinner so what follows starts on a clean line.
    fn clear(&self) {
        if let Some(progress) = self.progress().take() {
            progress.finish();
        }
    }

    /// The last line of a run that was stopped: why, and how far it got.
    fn stopped(&self, report: &RunReport) {
        self.clear();
        println!("{}", terminal::stopped_line(report));
    }
}

impl Observer for Terminal {
    fn header(&self, manifest: &Manifest) {
        println!("{}", terminal::header(manifest, self.style));
    }

    fn checks(&self, total: usize) {
        *self.progress() = Some(Progress::new(total, self.style.color));
    }

    fn started(&self, id: CheckId, title: &str) {
        if let Some(progress) = self.progress().as_ref() {
            progress.start(id.as_str(), title);
        }
    }

    /// One line per finished check: above the spinner on a terminal, plain lines in CI logs.
    fn finished(&self, result: &CheckResult) {
        let line = terminal::progress_line(result, self.style);
        match self.progress().as_ref() {
            Some(progress) => progress.line(&line),
            None => println!("{line}"),
        }
    }

    fn summary(&self, report: &RunReport) {
        self.clear();
        print!(
            "{}",
            terminal::summary(report, self.html.as_deref(), self.style)
        );
    }
}

/// Writes each report file `files` asks for (all are attempted; the first error is returned);
/// `step` names the run in the Markdown summary (`check`, `load-burst`).
pub fn write(files: &ReportFiles, report: &RunReport, step: &str) -> std::io::Result<()> {
    render::write_all(
        report,
        &render::Files {
            json: files.json.as_deref(),
            junit: files.junit.as_deref(),
            html: files.html.as_deref(),
            markdown: files.markdown.as_deref(),
            step,
        },
    )
}

/// After a run: its report files. A run stopped by a signal or `--timeout` ends its terminal
/// report with why, and its files hold what finished, marked incomplete; it stays a
/// [`Fatal::Stopped`] (exit code 2).
pub fn finish(
    result: Result<RunReport, Fatal>,
    terminal: &Terminal,
    files: &ReportFiles,
    step: &str,
) -> Result<RunReport, Fatal> {
    match result {
        Ok(report) => {
            write(files, &report, step)?;
            Ok(report)
        }
        Err(Fatal::Stopped {
            why,
            partial: Some(report),
        }) => {
            terminal.stopped(&report);
            write(files, &report, step)?;
            Err(Fatal::Stopped {
                why,
                partial: Some(report),
            })
        }
        Err(e) => Err(e),
    }
}
