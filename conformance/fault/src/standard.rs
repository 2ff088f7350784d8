//! The standard faults, by name: what `--fault NAME` runs, the columns of a fault matrix
//! (`--fault-set quick|full`), and the names broken variants declare the fault that reveals
//! them by. Each is a spec of the `--fault` grammar, so a matrix cell can be replayed with
//! `--fault SPEC` (or Toxiproxy, for the toxics it has).

use plimsoll_spec::CheckId;

use super::spec::{Fault, SpecError};

/// A fault of the standard set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedFault {
    /// Its name: `--fault NAME`, its matrix column, the suffix of its run's report files.
    pub name: &'static str,
    /// The fault, as `--fault` takes it.
    pub spec: &'static str,
    /// The checks a run under it makes when none are chosen (`--only`): empty for all.
    pub only: &'static [CheckId],
    /// What it stands for, and why it runs the checks it runs.
    pub why: &'static str,
}

impl NamedFault {
    /// The fault itself.
    pub fn fault(&self) -> Fault {
        self.spec.parse().expect("a standard fault's spec parses")
    }
}

/// Every standard fault; the quick set is the first [`QUICK`].
pub const STANDARD: &[NamedFault] = &[
    NamedFault {
        name: "latency",
        spec: "latency:latency=20,jitter=5",
        only: &[],
        why: "a far client: 20 ± 5 ms each way",
    },
    NamedFault {
        name: "slicer",
        spec: "slicer:average_size=1024,size_variation=512,delay=20",
        only: &[],
        why: "a stream cut into writes of 512 to 1536 bytes, 20 µs apart",
    },
    NamedFault {
        name: "bandwidth",
        spec: "bandwidth:rate=10000",
        only: &[],
        why: "a 10 MB/s link; B1's trickled upload runs (15 MB cannot cross within 1.5 s)",
    },
    NamedFault {
        name: "trickle",
        spec: "slicer:average_size=100,size_variation=25,delay=50000,stream=upstream",
        only: &[CheckId::B1, CheckId::B4],
        why: "a client sending 1.5 to 2.5 KB/s: B1's and B4's timers bound how long a client may take to send, so they run (a trickled upload and a trickled head); every other check's requests would cross slower than its tolerances",
    },
    NamedFault {
        name: "vanish",
        spec: "reset_peer:on_close=1,stream=upstream",
        only: &[],
        why: "clients that vanish: every close of a client reaches the server as a reset (RST), so B3's dropped clients are reset ones, and so is the relay socket R6 drops",
    },
];

/// How many of [`STANDARD`] make the quick set: what every far client's path does to the bytes.
pub const QUICK: usize = 3;

/// The standard fault called `name`.
pub fn named(name: &str) -> Option<&'static NamedFault> {
    STANDARD.iter().find(|f| f.name == name)
}

/// What `--fault` takes: a standard fault's name, or a spec.
pub fn parse(text: &str) -> Result<Fault, SpecError> {
    match named(text.trim()) {
        Some(named) => named.spec.parse(),
        None => text.parse(),
    }
}

/// The standard fault that is `fault`, if one is.
pub fn of(fault: &Fault) -> Option<&'static NamedFault> {
    STANDARD.iter().find(|f| f.fault() == *fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_standard_fault_parses_and_its_name_is_one_of_a_kind() {
        for (i, f) in STANDARD.iter().enumerate() {
            assert_eq!(of(&f.fault()).map(|n| n.name), Some(f.name));
            assert!(STANDARD[..i].iter().all(|g| g.name != f.name));
        }
        assert_eq!(
            named("trickle").map(|f| f.only),
            Some(&[CheckId::B1, CheckId::B4][..])
        );
        assert_eq!(parse("vanish").ok(), Some(named("vanish").unwrap().fault()));
    }
}
