//! `plimsoll check`: runs the conformance checks against a target (or the embedded reference
//! server) and reports clause by clause; in bridge mode ([`bridge`]) the relay clauses against
//! a relay bridge whose both ends the checker plays.

pub mod bridge;
mod fault;
pub mod matrix;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use plimsoll_fault::Fault;
use plimsoll_spec::CheckId;

use crate::baseline::{Baseline, BaselinePlan};
pub use crate::checks::contract::contract_result;
use crate::checks::ctx::ms;
use crate::checks::pool::hold_first;
use crate::checks::registry::{self, Run};
use crate::checks::selected;
use crate::observe::Observer;
use crate::remote::{Target, Trust};
pub use crate::session::Fatal;
use crate::session::{self, ContractSource, Opening, Partial, Subject, SubjectPlan};
use crate::verdict::series::{OTHER, RunSeries, Sent, Span, limits};
use crate::verdict::{CheckResult, LaneOutcome, RunReport};
use crate::waivers::Waivers;

/// What `plimsoll check` runs (the binary makes it from the command line): what is checked,
/// which checks run and how, and what their verdicts are judged against besides the target.
#[derive(Debug, Clone)]
pub struct CheckPlan {
    /// What is checked, and how long the run may take.
    pub subject: SubjectPlan,
    /// Fail every check that skips, with its reason.
    pub strict: bool,
    /// Fail the run when one of these checks does not judge its clause (not applicable, or
    /// skipped), with the reason.
    pub require: Vec<CheckId>,
    /// Run only these checks (all when empty); the `contract` check always runs.
    pub only: Vec<CheckId>,
    /// Skip these checks.
    pub skip: Vec<CheckId>,
    /// Known deviations, a TOML file of `[[waiver]]` entries.
    pub waivers: Option<PathBuf>,
    /// Trials per timing check; `None`: the contract's `tolerances.trials`.
    pub trials: Option<u32>,
    /// Run the checks through this fault (the run's base URL moved to a fault proxy).
    pub fault: Option<Fault>,
    /// Seed of the fault's draws.
    pub seed: u64,
    /// An earlier run to compare the figures with.
    pub baseline: BaselinePlan,
}

/// The scaled values, `NAME=VALUE` lines (`conformance/scaled.env`, which the scripts that gate a
/// quick deployment read too).
const SCALED_ENV: &str = include_str!("../../scaled.env");

/// The overrides the embedded server runs with, from [`SCALED_ENV`]: timeouts scaled down so
/// the suite is quick, and a small queue so T2 has something to order; with `full_timeouts`, the
/// contract's own timeouts (every `*_TIMEOUT_MS` left out).
pub fn embedded_overrides(full_timeouts: bool) -> Vec<(&'static str, &'static str)> {
    SCALED_ENV
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .filter(|(name, _)| !(full_timeouts && name.ends_with("_TIMEOUT_MS")))
        .collect()
}

/// How long the run's opening request may take before the target counts as unreachable.
const OPENING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs the suite against `subject` (an external target, or a server the binary started with
/// [`embedded_overrides`]), telling `observer` as it goes; the report files are the caller's.
pub async fn execute(
    plan: &CheckPlan,
    subject: Subject,
    observer: &dyn Observer,
) -> Result<RunReport, Fatal> {
    session::judge(&plan.subject, subject, async |source, subject, partial| {
        let run = Suite {
            plan,
            observer,
            partial,
        };
        run_suite(&run, source, subject).await
    })
    .await
}

/// One run of the suite: its plan, who watches it, and what it has finished so far.
#[derive(Clone, Copy)]
struct Suite<'a> {
    plan: &'a CheckPlan,
    observer: &'a dyn Observer,
    partial: &'a Partial,
}

async fn run_suite(
    run: &Suite<'_>,
    source: &ContractSource,
    subject: &Subject,
) -> Result<RunReport, Fatal> {
    let (plan, partial) = (run.plan, run.partial);
    let judging = Judging::of(plan)?;
    if subject.upstream.is_some() {
        return bridge::run_suite(run, &judging, source, subject).await;
    }
    let trust = Trust::load(plan.subject.ca_file.as_deref()).map_err(Fatal::Usage)?;
    // The opening requests (`/v1/contract`) are answered at once by any honest target. No
    // connection is kept idle after them: a service whose limit counts connections would give
    // one a worker for the whole run.
    let client = trust
        .apply(reqwest::Client::builder())
        .pool_max_idle_per_host(0)
        .connect_timeout(OPENING_TIMEOUT)
        .timeout(OPENING_TIMEOUT)
        .build()
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    let Opening {
        reconciliation,
        allow_overrides,
        mut manifest,
    } = session::open(&client, "plimsoll".into(), &plan.subject, source, subject).await?;
    let expected = reconciliation.effective.clone();
    manifest.trials = plan.trials.unwrap_or(expected.tolerances.trials);
    manifest.strict = plan.strict;
    let faulted = fault::begin(plan, &subject.url, &expected, &mut manifest).await?;
    partial.begin(&manifest);
    // What is checked, before the first request that could fail.
    run.observer.header(&manifest);
    let base = faulted.as_ref().map_or(&subject.url, |f| &f.base);
    let target = Arc::new(
        Target::new(
            base.clone(),
            expected,
            subject.temp_dir.clone(),
            subject.server_log.clone(),
            manifest.trials,
        )
        .with_trust(&trust)
        .with_relay(subject.relay.clone())
        .with_process(subject.process(plan.subject.pid))
        .with_adjustments(
            faulted
                .as_ref()
                .map(|f| f.adjustments.clone())
                .unwrap_or_default(),
        ),
    );

    // Hooks make saturation, timeouts and failures deterministic; most checks need them. Through
    // a fault that withholds every answer no check sends a request, so neither does the probe.
    if target.adjustments.unobservable().is_none() && target.expected.hooks.is_some() {
        hooks_on(&target).await?;
    }

    // A standard fault (`--fault trickle`) makes the checks it was chosen for, unless asked.
    let only = match plan.fault.as_ref().and_then(plimsoll_fault::standard::of) {
        Some(named) => matrix::checks_under(named, &plan.only),
        None => plan.only.clone(),
    };
    let checks: Vec<_> = selected(&only, &plan.skip).collect();
    let (results, series) = run_checks(run, &judging, &checks, &target, |_| {
        contract_result(&reconciliation, allow_overrides)
    })
    .await;
    let report = RunReport {
        manifest,
        results,
        series: Some(series),
    };
    run.observer.summary(&report);
    fault::end(faulted, subject.relay.as_deref());
    Ok(report)
}

/// Whether the target takes test hooks: a hold on the first stage is obeyed, not refused.
async fn hooks_on(target: &Target) -> Result<(), Fatal> {
    let probe = target
        .digitize(Some(&hold_first(target, 1)))
        .await
        .map_err(|e| Fatal::Unreachable(e.to_string()))?;
    if target.is_error(&probe, target.expected.hooks().disabled_code) {
        return Err(Fatal::Hooks(format!(
            "the target refuses test hooks: start it with {}=1",
            target.expected.hooks().env
        )));
    }
    Ok(())
}

/// What a finished check's verdict is judged against besides the target: the `--baseline`
/// run's figures and the `--waivers`, both read before the first request, so a bad file stops
/// the run at once (exit 2).
pub(crate) struct Judging {
    baseline: Option<Baseline>,
    waivers: Waivers,
}

impl Judging {
    fn of(plan: &CheckPlan) -> Result<Judging, Fatal> {
        let usage = |e: &dyn std::fmt::Display| Fatal::Usage(e.to_string());
        let waivers = match &plan.waivers {
            Some(path) => Waivers::load(path).map_err(|e| usage(&e))?,
            None => Waivers::default(),
        };
        let baseline = plan.baseline.load().map_err(|e| usage(&e))?;
        Ok(Judging { baseline, waivers })
    }

    /// The baseline first (a regression may fail the check), then the check's waiver (which
    /// may waive that failure as any other).
    fn judge(&self, result: &mut CheckResult, plan: &CheckPlan, today: time::Date) {
        if let Some(baseline) = &self.baseline {
            baseline.compare(result, plan.baseline.fail_on_regression);
        }
        self.waivers.apply_one(result, today, plan.strict);
    }
}

/// Runs `checks` in order against `target`, each started and finished with the observer
/// (`session` answers the checks that judge the session rather than the target); `--strict`
/// turns skips into failures, then the `--baseline` comparison, then each check's waiver, if any.
/// Returns the results and the run's series, binned from every check's timeline.
async fn run_checks(
    suite: &Suite<'_>,
    judging: &Judging,
    checks: &[&'static registry::Check],
    target: &Arc<Target>,
    session: impl Fn(&registry::Check) -> CheckResult,
) -> (Vec<CheckResult>, RunSeries) {
    let (plan, partial, observer) = (suite.plan, suite.partial, suite.observer);
    observer.checks(checks.len());
    let mut results = Vec::new();
    let mut started_ms = Vec::new();
    let today = crate::waivers::today();
    let t0 = Instant::now();
    for check in checks {
        let result = match (check.run, (check.applies)(&target.expected)) {
            (_, Err(why)) => {
                observer.started(check.id, &check.title(&target.expected));
                registry::not_applicable(check, target, why)
            }
            (Run::Session, Ok(())) => session(check),
            (Run::Target(run), Ok(())) => {
                partial.running(check.id.as_str());
                observer.started(check.id, &check.title(&target.expected));
                registry::run(check, run, target).await
            }
        };
        // The check's clock started `duration_ms` before its result was made, just now: its
        // timeline's zero, on the run's clock.
        started_ms.push((ms(t0.elapsed()) - result.duration_ms).max(0.0));
        let mut result = if plan.strict {
            CheckResult {
                verdict: result.verdict.strict(),
                ..result
            }
        } else {
            result
        };
        if plan.require.contains(&check.id) {
            result.verdict = result.verdict.required();
        }
        judging.judge(&mut result, plan, today);
        observer.finished(&result);
        partial.finished(&result);
        results.push(result);
    }
    let mut series = run_series(&results, &started_ms, target);
    if let Some(baseline) = &judging.baseline {
        baseline.beside(&mut series);
    }
    (results, series)
}

/// The run over time: every check's timeline moved onto the run's clock, a series per pool
/// in the order the run first loaded it (requests to no pool's endpoint are [`OTHER`]), each
/// drawn against the pool's workers and queue, with each check a phase and the fault, if any,
/// on throughout.
fn run_series(results: &[CheckResult], started_ms: &[f64], target: &Target) -> RunSeries {
    let mut pools: Vec<(String, Vec<Sent>)> = Vec::new();
    let mut phases = Vec::new();
    for (r, &at) in results.iter().zip(started_ms) {
        if r.timeline.is_empty() {
            continue;
        }
        phases.push(Span {
            label: r.id.to_string(),
            from_ms: at,
            to_ms: at + r.duration_ms.max(0.0),
        });
        for lane in &r.timeline {
            let pool = lane.pool.as_deref().unwrap_or(OTHER);
            let at_pool = match pools.iter().position(|(name, _)| name == pool) {
                Some(i) => i,
                None => {
                    pools.push((pool.to_owned(), Vec::new()));
                    pools.len() - 1
                }
            };
            pools[at_pool].1.push(Sent {
                sent_ms: at + lane.start_ms,
                end_ms: at + lane.end_ms,
                answered: lane.status.is_some(),
                ok: lane.outcome == LaneOutcome::Ok,
                refused: lane.outcome == LaneOutcome::Refused,
            });
        }
    }
    let pools = pools
        .into_iter()
        .map(|(name, sent)| {
            let limits = target
                .expected
                .pools
                .get(&name)
                .map_or_else(Vec::new, |pool| {
                    limits(pool.workers, pool.queue.capacity.places())
                });
            (name, limits, sent)
        })
        .collect();
    let mut series = RunSeries::new(pools, phases);
    series.fault = target.adjustments.fault.as_ref().map(|spec| Span {
        label: spec.clone(),
        from_ms: 0.0,
        to_ms: series.end_ms,
    });
    series
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scaled value is an override the embedded contract declares, and the contract with
    /// them is one the loader accepts (a typo in `scaled.env` fails here, not in a run).
    #[test]
    fn the_scaled_values_are_overrides_the_contract_accepts() {
        let contract = plimsoll_spec::Contract::embedded();
        for full in [false, true] {
            let values = embedded_overrides(full);
            assert!(values.iter().any(|(name, _)| *name == "QUEUE_CAPACITY"));
            let env: std::collections::HashMap<_, _> = values.iter().copied().collect();
            let (_, applied) = contract
                .with_overrides(|name| env.get(name).map(|v| (*v).to_owned()))
                .unwrap_or_else(|e| panic!("the scaled values (full timeouts {full}): {e}"));
            assert_eq!(applied.len(), values.len(), "{values:?}");
        }
        assert!(
            embedded_overrides(true)
                .iter()
                .all(|(name, _)| !name.ends_with("_TIMEOUT_MS"))
        );
    }
}
