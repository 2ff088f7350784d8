//! `plimsoll load` as the binary runs it: the command line's [`LoadArgs`] made a plan, the
//! library's run of the profile watched by the terminal report, then the report files.

use plimsoll_conformance::session::{Fatal, Subject};
use plimsoll_conformance::verdict::RunReport;
pub use plimsoll_load::{EngineName, ProfileName};

pub use crate::args::LoadArgs;
use crate::report::{self, Terminal};

/// Runs the profile `args` asks for against `subject` (an external target, or a server the
/// binary started with the contract's own values), drawing it on the terminal and writing the
/// report files asked for.
pub async fn execute(args: &LoadArgs, subject: Subject) -> Result<RunReport, Fatal> {
    let terminal = Terminal::new(&args.reports);
    let result = plimsoll_load::execute(&args.plan(), subject, &terminal).await;
    let step = format!("load-{}", args.profile.as_str());
    report::finish(result, &terminal, &args.reports, &step)
}
