//! Where a run's reports go and how the terminal one looks (`--json`, `--junit`, `--html`,
//! `--markdown`, `--quiet`), and what its figures are compared with (`--baseline`, `--fail-on-regression`):
//! the `Reports` options `check` and `load` share.

use std::path::PathBuf;

use plimsoll_report::Style;

/// The reports of a run, as the command line names them: the files it leaves behind (`--json`,
/// `--junit`, `--html`) and how the terminal one looks (`--quiet`). One set of options for
/// every command that judges a target.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Reports")]
pub struct ReportFiles {
    /// Write the JSON report here (the run's manifest and every result with its evidence).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a JUnit XML report here (one testcase per check).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write a self-contained HTML report here (with the run's charts over time, per pool, and a
    /// timeline of the requests per check).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write a Markdown summary here (GitHub-flavoured: the verdict, the checks that did not
    /// pass first with why, regressions), for a CI system's job summary page.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// No spinner and no colours on the terminal (also when stdout is not a terminal).
    #[arg(long)]
    pub quiet: bool,
}

impl ReportFiles {
    /// No files, no progress display: what tests start from.
    pub fn quiet() -> ReportFiles {
        ReportFiles {
            quiet: true,
            ..ReportFiles::default()
        }
    }

    /// How the terminal report is drawn: colours and the terminal's width on an interactive
    /// stdout unless `--quiet`, plain lines of at most [`plimsoll_report::terminal::WIDTH`]
    /// columns otherwise.
    pub fn style(&self) -> Style {
        Style::detect(self.quiet)
    }
}

/// The options `check` and `load` share for comparing with an earlier run.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct BaselineArgs {
    /// Compare this run's figures (latencies, lateness, refused fraction, goodput) with those of
    /// an earlier run's JSON report (`--json`): each with its change, a regression flagged when
    /// it moved the worse way beyond the runs' own noise.
    #[arg(long, value_name = "REPORT", help_heading = "Reports")]
    pub baseline: Option<PathBuf>,
    /// Fail a check or verdict whose figure regressed against `--baseline` (exit code 1).
    #[arg(long, requires = "baseline", help_heading = "Reports")]
    pub fail_on_regression: bool,
}
