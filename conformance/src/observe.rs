//! The seam between a run and what a person watching it sees. A run of the checks (or of a load
//! profile) says what happens as it happens — what is judged, each check starting and
//! finishing, the end — to an [`Observer`], and returns its [`RunReport`]; drawing it (the
//! terminal report of `plimsoll-report`) and writing the report files is the caller's: the
//! `plimsoll` binary's. So the checks never depend on their renderers, and a run with nobody
//! watching costs no terminal.

use plimsoll_spec::CheckId;

use crate::verdict::{CheckResult, Manifest, RunReport};

/// What a run tells whoever watches it, in order: [`Observer::header`] once, then for the checks
/// [`Observer::checks`] and a [`Observer::started`]/[`Observer::finished`] pair per check (a
/// check that judges the session rather than the target only finishes; a load profile's
/// verdicts only finish), then [`Observer::summary`] once. A run stopped before its end (a stop
/// signal, `--timeout`) gets no summary: its partial report comes back in
/// [`crate::session::Fatal::Stopped`].
pub trait Observer: Sync {
    /// What is judged (the target, the contract, trials, strictness, a fault), before the first
    /// request that could fail.
    fn header(&self, manifest: &Manifest);

    /// `total` checks run now, one after another.
    fn checks(&self, total: usize);

    /// The check `id`, titled `title` for the target's values, began.
    fn started(&self, id: CheckId, title: &str);

    /// A check or a verdict finished: a check's result with strictness, the baseline's
    /// comparison and its waiver applied; a load verdict's as the profile reached it (the
    /// baseline is compared once every verdict is in, and the summary shows that).
    fn finished(&self, result: &CheckResult);

    /// The run ended with `report`: every result, before the run's last notes (the fault
    /// proxy's counts, a failing bridge's output).
    fn summary(&self, report: &RunReport);
}
