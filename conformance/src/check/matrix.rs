//! `check --fault-set quick`: the suite once per fault of a standard set, and what each check
//! did under each fault, as a matrix. Each run is a whole `check --fault SPEC` (its own plan,
//! subject and report), one [`FaultRun`] per fault; the binary runs them and writes the
//! matrix's reports (the terminal table, the JSON cells, a JUnit suite per fault, an HTML page
//! linking each run's).

use plimsoll_fault::standard::{QUICK, STANDARD};
use plimsoll_fault::{Fault, NamedFault};
use plimsoll_spec::CheckId;

use crate::verdict::RunReport;

/// A standard set of faults for `--fault-set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultSet {
    /// What every far client's path does to the bytes, one fault at a time: latency with
    /// jitter, a stream sliced into small writes, a bandwidth limit. About two minutes on two
    /// cores against the embedded server.
    Quick,
    /// The quick set, then the faults that reveal what only a fault can: a client trickling its
    /// bytes (B1, B4) and clients that vanish with a reset (B3). About three minutes on two
    /// cores against the embedded server.
    Full,
}

impl FaultSet {
    /// Every set, in the order `--fault-set` lists them.
    pub const ALL: [FaultSet; 2] = [FaultSet::Quick, FaultSet::Full];

    /// The set's faults, in order.
    pub fn faults(self) -> &'static [NamedFault] {
        match self {
            FaultSet::Quick => &STANDARD[..QUICK],
            FaultSet::Full => STANDARD,
        }
    }

    /// The set's name, as `--fault-set` takes it.
    pub fn name(self) -> &'static str {
        match self {
            FaultSet::Quick => "quick",
            FaultSet::Full => "full",
        }
    }
}

/// The checks a run under `named` makes: those asked for, else the fault's own choice.
pub fn checks_under(named: &NamedFault, asked: &[CheckId]) -> Vec<CheckId> {
    if !asked.is_empty() {
        return asked.to_vec();
    }
    named.only.to_vec()
}

/// One fault's run of the suite.
pub struct FaultRun {
    /// The standard fault's name: the matrix's column.
    pub name: &'static str,
    /// The fault the run went through.
    pub fault: Fault,
    /// How long the run took on this machine, seconds (start of the subject included).
    pub seconds: f64,
    /// The run's report, as `check --fault` makes it.
    pub report: RunReport,
}

/// Every run of a fault set.
pub struct Matrix {
    /// The set.
    pub set: FaultSet,
    /// One run per fault, in the set's order.
    pub runs: Vec<FaultRun>,
}

impl Matrix {
    /// Checks failed over all runs: one is enough for exit code 1.
    pub fn failed(&self) -> usize {
        self.runs.iter().map(|r| r.report.failed()).sum()
    }
}

impl crate::session::Failures for Matrix {
    fn failures(&self) -> usize {
        self.failed()
    }

    fn judged(&self) -> bool {
        self.runs.iter().any(|r| r.report.judged_a_clause())
    }
}
