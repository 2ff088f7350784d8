//! `contract`: the target's claimed effective values (`GET /v1/contract`) against the contract.
//! It is judged from the session before any other request and opens every run (`check` and
//! `load`), since it decides which values the other checks judge by.
//!
//! The claim is only a claim: [`plimsoll_spec::Contract::reconcile`] adopts a claimed value only
//! in a field the contract lets a deployment override, only when overrides are allowed, and only
//! when the result still keeps the contract's rules. Every other difference is refused — the
//! checks keep the contract's own value for it — and fails this check.

use std::time::Instant;

use plimsoll_spec::{Adopted, CheckId, Reconciliation, Refused};

use super::registry::{Check, Run};
use crate::verdict::{CheckResult, Verdict};

const TITLE: &str = "Effective values match the contract";

/// The `contract` check's entry in the registry: the evidence the docs print; its verdict comes
/// from the session, before any request.
pub const CHECK: Check = Check::whole_run(
    CheckId::Contract,
    TITLE,
    "The target's contract endpoint returns its effective values, a claim compared with the \
     contract leaf by leaf. A difference is adopted (the checks judge that value) only in a field \
     the contract lists as overridable, with `--allow-overrides` or on the embedded server, and \
     only if the values still keep the contract's rules; any other difference (a bound, a \
     tolerance, a status, a code, a stage list, a header name) is refused and fails this check, \
     and the checks keep the contract's own value. A claim that is not a readable contract fails \
     too. Adopted and refused differences are listed separately. The load generator's own \
     `[load]` settings are never compared. Another service's claim is served at the path its \
     `[claim]` declares, and judged the same way.",
    Run::Session,
)
.applies_when(applies)
.covers(&["contract-endpoint"]);

/// The claim is judged where the contract says one is served: the reference's contract
/// endpoint, or any contract's `[claim]`.
fn applies(contract: &plimsoll_spec::Contract) -> Result<(), String> {
    match contract.claim_path() {
        Some(_) => Ok(()),
        None => Err(
            "the contract declares no served claim (`[claim]`) and no reference API (`[api]`, \
             whose contract endpoint serves one)"
                .into(),
        ),
    }
}

/// `path: ours → theirs (ENV)`.
pub fn adopted_line(a: &Adopted) -> String {
    format!("{} ({})", a.difference, a.env)
}

/// `path: ours → theirs — reason`.
pub fn refused_line(r: &Refused) -> String {
    format!("{} — {}", r.difference, r.reason)
}

/// Every difference, adopted and refused, for the run manifest's combined list.
pub fn differences(r: &Reconciliation) -> Vec<String> {
    r.adopted
        .iter()
        .map(|a| a.difference.to_string())
        .chain(r.refused.iter().map(|x| x.difference.to_string()))
        .collect()
}

/// A claimed value as an environment variable would set it (`2`, `true`, `"x"`).
fn plain(v: &Option<serde_json::Value>) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "(absent)".into(),
    }
}

/// The `contract` result that opens every run: pass when the claim is readable and nothing was
/// refused; the evidence lists the adopted and the refused differences separately.
pub fn contract_result(r: &Reconciliation, allow_overrides: bool) -> CheckResult {
    let started = Instant::now();
    let evidence = evidence(r);
    let observed = observed(r);
    let verdict = verdict(r);
    CheckResult {
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        evidence,
        ..CheckResult::new(
            CHECK.id,
            TITLE,
            expected(allow_overrides),
            observed,
            verdict,
        )
    }
}

/// [`contract_result`] for a run under `contract`, or not applicable, saying why, when the
/// contract declares no served claim: a run that read none (`load`'s) reports no pass for it.
pub fn contract_result_under(
    contract: &plimsoll_spec::Contract,
    r: &Reconciliation,
    allow_overrides: bool,
) -> CheckResult {
    match applies(contract) {
        Ok(()) => contract_result(r, allow_overrides),
        Err(why) => CheckResult::new(
            CHECK.id,
            TITLE,
            expected(allow_overrides),
            "no claim read".into(),
            Verdict::NotApplicable(why),
        ),
    }
}

/// One line per finding, so a reader sees why the claim is unreadable and each adopted and
/// refused difference apart.
fn evidence(r: &Reconciliation) -> Vec<String> {
    let mut evidence: Vec<String> = Vec::new();
    if let Some(why) = &r.unreadable {
        evidence.push(format!("unreadable: {why}"));
    }
    evidence.extend(
        r.adopted
            .iter()
            .map(|a| format!("adopted: {}", adopted_line(a))),
    );
    evidence.extend(
        r.refused
            .iter()
            .map(|x| format!("refused: {}", refused_line(x))),
    );
    evidence
}

/// The claim in one line: unreadable, identical, or the overrides adopted (as the environment
/// would set them) and the paths refused.
fn observed(r: &Reconciliation) -> String {
    match (&r.unreadable, r.adopted.is_empty() && r.refused.is_empty()) {
        (Some(why), _) => format!("claim unreadable ({why}); judged by the contract's own values"),
        (None, true) => "identical to the contract".into(),
        (None, false) => {
            let adopted: Vec<String> = r
                .adopted
                .iter()
                .map(|a| format!("{}={}", a.env, plain(&a.difference.theirs)))
                .collect();
            let mut text = format!(
                "adopted {} override(s){}{}; refused {}",
                adopted.len(),
                if adopted.is_empty() { "" } else { ": " },
                adopted.join(", "),
                r.refused.len()
            );
            if !r.refused.is_empty() {
                let paths: Vec<&str> = r
                    .refused
                    .iter()
                    .map(|x| x.difference.path.as_str())
                    .collect();
                text.push_str(&format!(": {}", paths.join(", ")));
            }
            text
        }
    }
}

/// An unreadable claim or any refused difference fails: the checks then judge by values the
/// target does not claim to run with.
fn verdict(r: &Reconciliation) -> Verdict {
    if let Some(why) = &r.unreadable {
        Verdict::Fail(format!(
            "the target's claimed contract is not readable ({why}); every check judges by the contract's own values"
        ))
    } else if !r.refused.is_empty() {
        let shown: Vec<String> = r.refused.iter().take(5).map(refused_line).collect();
        Verdict::Fail(format!(
            "{} claimed value(s) refused, the contract's own apply: {}{}",
            r.refused.len(),
            shown.join("; "),
            if r.refused.len() > shown.len() {
                "; …"
            } else {
                ""
            }
        ))
    } else {
        Verdict::Pass
    }
}

/// What the check expects, which depends on whether overrides may be adopted.
fn expected(allow_overrides: bool) -> String {
    if allow_overrides {
        "the target's effective values equal the contract, except overridable fields (adopted)"
            .into()
    } else {
        "the target's effective values equal the contract (overrides not allowed)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_spec::Contract;

    fn claim(edit: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
        let mut v = serde_json::to_value(Contract::embedded()).unwrap();
        edit(&mut v);
        v
    }

    #[test]
    fn an_identical_claim_passes() {
        let r = Contract::embedded().reconcile(&claim(|_| {}), false);
        let result = contract_result(&r, false);
        assert_eq!(result.verdict, Verdict::Pass);
        assert_eq!(result.observed, "identical to the contract");
        assert!(result.evidence.is_empty());
    }

    #[test]
    fn adopted_overrides_pass_and_are_named() {
        let r = Contract::embedded().reconcile(
            &claim(|v| {
                v["pools"]["digitize"]["queue"]["capacity"] = 2.into();
                v["pools"]["digitize"]["deadline_ms"] = 2000.into();
            }),
            true,
        );
        let result = contract_result(&r, true);
        assert_eq!(result.verdict, Verdict::Pass, "{result:?}");
        assert_eq!(
            result.observed,
            "adopted 2 override(s): DIGITIZE_TIMEOUT_MS=2000, QUEUE_CAPACITY=2; refused 0"
        );
        assert!(
            result.evidence.iter().all(|e| e.starts_with("adopted: ")),
            "{:?}",
            result.evidence
        );
    }

    #[test]
    fn a_looser_bound_or_tolerance_is_refused_and_fails() {
        let r = Contract::embedded().reconcile(
            &claim(|v| {
                v["pools"]["digitize"]["cancellation"]["stop_within_ms"] = 5000.into();
                v["tolerances"]["timeout_late_ms"] = 5000.into();
                v["pools"]["digitize"]["queue"]["capacity"] = 2.into();
            }),
            true,
        );
        let result = contract_result(&r, true);
        let Verdict::Fail(reason) = &result.verdict else {
            panic!("{result:?}")
        };
        assert!(reason.starts_with("2 claimed value(s) refused"), "{reason}");
        assert!(reason.contains("pools.digitize.cancellation.stop_within_ms: 1000 → 5000"));
        assert!(
            result.evidence.contains(
                &"adopted: pools.digitize.queue.capacity: 0 → 2 (QUEUE_CAPACITY)".to_owned()
            ),
            "{:?}",
            result.evidence
        );
        assert_eq!(
            result
                .evidence
                .iter()
                .filter(|e| e.starts_with("refused: "))
                .count(),
            2
        );
        // The checks judge by the contract's own bound and tolerance.
        assert_eq!(r.effective.cancellation().stop_within_ms, 1000);
        assert_eq!(r.effective.tolerances.timeout_late_ms, 300);
    }

    #[test]
    fn an_overridable_difference_without_allow_is_refused() {
        let r = Contract::embedded().reconcile(
            &claim(|v| v["pools"]["digitize"]["queue"]["capacity"] = 2.into()),
            false,
        );
        let result = contract_result(&r, false);
        assert!(result.verdict.is_fail());
        assert!(
            result.evidence[0].contains("--allow-overrides"),
            "{result:?}"
        );
    }

    #[test]
    fn an_unreadable_claim_fails() {
        let r = Contract::embedded().reconcile(&serde_json::json!({"hello": 1}), true);
        let result = contract_result(&r, true);
        assert!(result.verdict.is_fail());
        assert!(
            result.observed.starts_with("claim unreadable"),
            "{result:?}"
        );
    }
}
