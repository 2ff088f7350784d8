//! The options of `plimsoll check`: what is checked (with `SubjectArgs`), a bridge instead of a
//! service, which checks run and how, through which fault, and the reports.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;

use plimsoll_conformance::check::matrix::FaultSet;
use plimsoll_conformance::remote::relay::RelayEnd;
use plimsoll_fault::standard::{NamedFault, STANDARD};
use plimsoll_fault::{Fault, FaultLine};
use plimsoll_spec::CheckId;

use super::one_of;
use super::reports::{BaselineArgs, ReportFiles};
use super::subject::SubjectArgs;

/// Where the checker plays a subject's relay without `--relay-listen`: a free loopback port.
const RELAY_ON_LOOPBACK: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));

/// `--fault`'s help: the standard faults' names come from their one table.
fn fault_help() -> String {
    let names: Vec<String> = STANDARD.iter().map(|f| format!("`{}`", f.name)).collect();
    format!(
        "Run the checks through one fault, as Toxiproxy names it (`latency:latency=50,jitter=10`, \
         `slicer:average_size=1,delay=20000`, `reset_peer:timeout=500`, `blackhole`, \
         `bandwidth:rate=64`, `slow_close:delay=300`; each takes \
         `stream=upstream|downstream|both`), or a standard fault by name ({}): every bound the \
         fault lengthens is listed in the report. The relay's WebSocket crosses it too, whichever \
         end dials.",
        names.join(", ")
    )
}

/// `--fault-set`'s help: which faults each set runs, from the standard table.
fn fault_set_help() -> String {
    let names = |faults: &[NamedFault]| faults.iter().map(|f| f.name).collect::<Vec<_>>();
    let quick = names(FaultSet::Quick.faults());
    let more = names(&FaultSet::Full.faults()[quick.len()..]);
    let also = match more.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "nothing more".to_owned(),
    };
    format!(
        "Run the suite once per fault of a standard set (`quick`: {}; `full`: also {also}), then \
         print a matrix of checks × faults; `--json` gets the matrix, and every report file asked \
         for is also written per run with the fault's name (`report.{}.json`).",
        quick.join(", "),
        quick.first().copied().unwrap_or_default()
    )
}

/// `plimsoll check`'s command line: what is checked, which checks run and how, and the reports.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CheckArgs {
    /// What is checked: `--target`, `--contract`, `--allow-overrides`, `--temp-dir`.
    #[command(flatten)]
    pub subject: SubjectArgs,
    /// The implementation's log file, if the checker can read it (F3 needs it; must be
    /// readable at the start).
    #[arg(long, value_name = "FILE", help_heading = "Target")]
    pub server_log: Option<PathBuf>,
    /// Play the relay on ADDR for a bridge that dials its relay (seed 003's direction): the
    /// relay checks take the socket the bridge dials instead of dialling the target's relay
    /// endpoint. The embedded server's bridge always dials the checker (on a free loopback port
    /// unless this is given).
    #[arg(long, value_name = "ADDR", help_heading = "Target")]
    pub relay_listen: Option<std::net::SocketAddr>,
    /// Check a relay bridge instead of an HTTP service: start CMD (with `sh -c`), `{relay_url}`
    /// and `{upstream_url}` filled in; the checker plays the relay it dials and the local handler
    /// it relays to, runs R1–R6, and stops it (SIGTERM, timed) at the end.
    #[arg(
        long,
        value_name = "CMD",
        help_heading = "Bridge",
        conflicts_with = "target"
    )]
    pub bridge_command: Option<String>,
    /// Bridge mode for a bridge started by hand: serve its local handler on ADDR (the relay on
    /// `--relay-listen`, else a free loopback port), print both URLs and wait for it to dial.
    #[arg(
        long,
        value_name = "ADDR",
        help_heading = "Bridge",
        conflicts_with = "target"
    )]
    pub upstream_listen: Option<std::net::SocketAddr>,
    /// Fail every check that skips, with its reason (a gate must not pass on missing evidence).
    /// Checks that do not apply to the target stay not applicable, saying why.
    #[arg(long, help_heading = "Run")]
    pub strict: bool,
    /// Fail the run when one of these check ids (comma-separated) judges nothing: not
    /// applicable to the target, or skipped (a gate that must judge these clauses).
    #[arg(long, value_delimiter = ',', value_name = "IDS", help_heading = "Run")]
    pub require: Vec<CheckId>,
    /// Embedded server only: keep the contract's real timeouts instead of scaling them down.
    #[arg(long, help_heading = "Run")]
    pub full_timeouts: bool,
    /// Run only these check ids (comma-separated: T1, ..., R6, API); an unknown id is an error.
    #[arg(long, value_delimiter = ',', value_name = "IDS", help_heading = "Run")]
    pub only: Vec<CheckId>,
    /// Skip these check ids (comma-separated). The `contract` check always runs.
    #[arg(long, value_delimiter = ',', value_name = "IDS", help_heading = "Run")]
    pub skip: Vec<CheckId>,
    /// Known deviations, a TOML file of `[[waiver]]` entries (check, reason, link, expires): a
    /// waived failure is reported as waived and does not fail the run; an expired waiver fails;
    /// one for a check that passes is reported as no longer needed (a failure under --strict).
    #[arg(long, value_name = "FILE", help_heading = "Run")]
    pub waivers: Option<PathBuf>,
    /// Trials per timing check (default: the contract's tolerances.trials).
    #[arg(long, value_name = "N", help_heading = "Run")]
    pub trials: Option<u32>,
    /// Run the checks through one fault: a Toxiproxy toxic or a standard fault by name (the
    /// help's text names the standard faults from their table, [`fault_help`]).
    #[arg(
        long,
        value_name = "SPEC",
        help_heading = "Run",
        value_parser = plimsoll_fault::standard::parse,
        help = fault_help()
    )]
    pub fault: Option<Fault>,
    /// Run the suite once per fault of a standard set, then print a matrix (the help names each
    /// set's faults from the table, [`fault_set_help`]).
    #[arg(
        long,
        value_name = "SET",
        help_heading = "Run",
        help = fault_set_help(),
        value_parser = one_of(&FaultSet::ALL, FaultSet::name),
        hide_possible_values = true,
        conflicts_with_all = ["fault", "bridge_command", "upstream_listen"]
    )]
    pub fault_set: Option<FaultSet>,
    /// Seed of the fault's draws (jitter, slice sizes): the same seed, the same draws.
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = "Run")]
    pub seed: u64,
    /// The reports: `--json`, `--junit`, `--html`, `--quiet`.
    #[command(flatten)]
    pub reports: ReportFiles,
    /// An earlier run to compare the figures with: `--baseline`, `--fail-on-regression`.
    #[command(flatten)]
    pub baseline: BaselineArgs,
}

impl CheckArgs {
    /// Whether a relay bridge is checked (`--bridge-command` or `--upstream-listen`).
    pub fn bridge_mode(&self) -> bool {
        self.bridge_command.is_some() || self.upstream_listen.is_some()
    }

    /// Where the checker plays a subject's relay in this run: on `--relay-listen` (a free
    /// loopback port without it), the bridge's sockets crossing the run's `--fault`, drawn from
    /// its `--seed`, as the checker's own requests do.
    pub fn relay_end(&self) -> RelayEnd {
        RelayEnd {
            addr: self.relay_listen.unwrap_or(RELAY_ON_LOOPBACK),
            line: self.fault.map(|fault| FaultLine::new(fault, self.seed)),
        }
    }

    /// The embedded reference server with every default and no progress display: what a test
    /// starts from (`CheckArgs { trials: Some(2), ..CheckArgs::embedded() }`).
    pub fn embedded() -> CheckArgs {
        CheckArgs {
            reports: ReportFiles::quiet(),
            ..CheckArgs::default()
        }
    }
}
