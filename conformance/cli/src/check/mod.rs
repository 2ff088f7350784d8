//! `plimsoll check` as the binary runs it: the command line's [`CheckArgs`] made a plan, the
//! library's run of the suite watched by the terminal report, then the report files.

pub mod matrix;

use plimsoll_conformance::check;
use plimsoll_conformance::session::{Fatal, Subject};
use plimsoll_conformance::verdict::RunReport;

pub use crate::args::CheckArgs;
use crate::report::{self, Terminal};

/// Runs the suite `args` asks for against `subject` (an external target, a bridge, or a server
/// the binary started), drawing it on the terminal and writing the report files asked for.
pub async fn execute(args: &CheckArgs, subject: Subject) -> Result<RunReport, Fatal> {
    let terminal = Terminal::new(&args.reports);
    let result = check::execute(&args.plan(), subject, &terminal).await;
    report::finish(result, &terminal, &args.reports, "check")
}

/// Bridge mode's subject.
pub mod bridge {
    use plimsoll_conformance::session::{Fatal, Subject};

    use super::CheckArgs;

    /// The subject of a bridge run: the checker's two ends listening and, with
    /// `--bridge-command`, the bridge started against them.
    pub async fn subject(args: &CheckArgs) -> Result<Subject, Fatal> {
        plimsoll_conformance::check::bridge::subject(args.bridge_plan()).await
    }
}
