//! What a check is: its id, its title, the evidence it gathers (in words, for the docs) and how
//! it runs. The list of checks itself is [`super::REGISTRY`]; each entry is defined beside the
//! function it runs, in the module of its clause family.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use plimsoll_spec::{CheckId, ClauseId, Contract, ExpandError};

use super::ctx::Ctx;
use crate::remote::Target;
use crate::verdict::CheckResult;

/// A check that talks to the target. Boxed because a table holds functions, not `async fn`s.
pub type RunFn = for<'a> fn(&'a Arc<Target>, &'a mut Ctx) -> BoxFuture<'a, ()>;

/// Whether a check has anything to judge in a contract: `Err` says what the contract would have
/// to declare, as the report's not-applicable reason. Decided before the check runs, from the
/// contract alone: what the contract declares and the target does not serve fails its clause
/// inside the check; only what the contract leaves undeclared makes a check not applicable.
pub type AppliesFn = fn(&Contract) -> Result<(), String>;

/// The reference surface (`[api]`: the digitize and export routes, the hook that holds a
/// worker, the gauges and the served claim): what every check judges that was written for the
/// reference service alone, until its clause is judged for any pool.
pub fn reference_surface(contract: &Contract) -> Result<(), String> {
    if contract.is_reference() {
        Ok(())
    } else {
        Err(
            "the contract declares no reference API ([api]: the pipeline routes, the hook, \
             the gauges and the served claim this check judges)"
                .into(),
        )
    }
}

/// For a clause judged on the reference surface and on what any contract declares for it (B2's
/// over-cap requests, B3's dependency-held pools, F2's bad requests): it applies when either is
/// there; `missing` says, as the not-applicable reason, that neither is.
pub fn reference_or_declared(
    contract: &Contract,
    declared: bool,
    missing: &str,
) -> Result<(), String> {
    if contract.is_reference() || declared {
        Ok(())
    } else {
        Err(missing.to_owned())
    }
}

/// How a check gets its verdict.
#[derive(Clone, Copy)]
pub enum Run {
    /// From the session, before any request: the contract comparison that opens every run.
    Session,
    /// By talking to the target.
    Target(RunFn),
}

/// One entry of the registry.
#[derive(Clone, Copy)]
pub struct Check {
    /// Which check it is, and the clause it judges, if one.
    pub id: CheckId,
    /// The title of a check that judges no single clause (a clause's title is the contract's).
    own_title: Option<&'static str>,
    /// What the client observes that proves the clause, in one paragraph; the docs print it.
    /// For a clause, `{field}` and `{status:CODE}` are filled from the contract as in its prose.
    evidence: &'static str,
    /// How it gets its verdict: from the session, or by talking to the target.
    pub run: Run,
    /// The ids of the contract's `[[implementation]]` rules this check exercises: it sends
    /// requests whose answers tell a reading that keeps the rule from one that does not
    /// (`checks::coverage` validates them and renders docs/rule-coverage.md).
    pub rules: &'static [&'static str],
    /// Whether the contract declares anything for it to judge.
    pub applies: AppliesFn,
}

impl Check {
    /// The check of a clause: its title is the contract's.
    pub const fn clause(id: ClauseId, evidence: &'static str, run: RunFn) -> Check {
        Check {
            id: CheckId::Clause(id),
            own_title: None,
            evidence,
            run: Run::Target(run),
            rules: &[],
            applies: reference_surface,
        }
    }

    /// A check of the run as a whole, with a title of its own.
    pub const fn whole_run(
        id: CheckId,
        title: &'static str,
        evidence: &'static str,
        run: Run,
    ) -> Check {
        Check {
            id,
            own_title: Some(title),
            evidence,
            run,
            rules: &[],
            applies: reference_surface,
        }
    }

    /// The check, judging whatever `applies` finds declared (the reference surface unless
    /// told).
    pub const fn applies_when(self, applies: AppliesFn) -> Check {
        Check { applies, ..self }
    }

    /// The check, declared to exercise the implementation rules `rules` (by id).
    pub const fn covers(self, rules: &'static [&'static str]) -> Check {
        Check { rules, ..self }
    }

    /// The title the reports show: the check's own, else the clause's in `contract`.
    pub fn title(&self, contract: &Contract) -> String {
        match (self.id, self.own_title) {
            (_, Some(title)) => title.to_owned(),
            (CheckId::Clause(id), None) => contract.clause_title(id),
            (id, None) => id.to_string(),
        }
    }

    /// The evidence paragraph with the contract's values filled in.
    pub fn evidence(&self, contract: &Contract) -> Result<String, ExpandError> {
        match self.id {
            CheckId::Clause(id) => contract.expand(&contract.clause(id), self.evidence),
            _ => Ok(self.evidence.to_owned()),
        }
    }
}

/// Runs a check that talks to the target and turns what it recorded into a result.
pub async fn run(check: &Check, run: RunFn, target: &Arc<Target>) -> CheckResult {
    let c = match target.adjustments.unobservable() {
        // Not a request is sent: the fault would withhold every answer the check judges by.
        Some(why) => {
            let mut c = Ctx::new(0.0);
            c.expected = "nothing judged: the run's fault lets nothing through to observe".into();
            c.fault_removes(target, None, why);
            c
        }
        None => {
            let mut c = Ctx::new(baseline(target).await);
            c.temp_before = target.temp_entries();
            run(target, &mut c).await;
            c
        }
    };
    result(check, target, c)
}

/// The result of a check the contract gives nothing to judge: not applicable, saying why,
/// without a request sent.
pub fn not_applicable(check: &Check, target: &Target, why: String) -> CheckResult {
    let mut c = Ctx::new(0.0);
    c.expected = "nothing declared to judge".into();
    c.not_applicable(why);
    result(check, target, c)
}

/// The digitize pool's busy workers before the check: what its gauges are read against.
async fn baseline(target: &Target) -> f64 {
    if target.expected.observability.is_none() {
        return 0.0; // no gauge is declared: the check answers for what the client saw
    }
    target.local.busy_now(target).await
}

/// The finished check's result, from what its context gathered.
fn result(check: &Check, target: &Target, mut c: Ctx) -> CheckResult {
    let verdict = c.verdict();
    CheckResult {
        id: check.id.into(),
        title: check.title(&target.expected),
        expected: c.expected,
        observed: c.observed,
        verdict,
        duration_ms: c.started.elapsed().as_secs_f64() * 1000.0,
        evidence: c.evidence,
        trials_ms: c.trials_ms,
        timeline: c.lanes,
        figures: c.figures,
        deltas: Vec::new(),
        waiver: None,
    }
}
