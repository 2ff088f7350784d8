//! The conformance checks and their registry. A check talks to the target only through
//! [`crate::remote::Target`] and records what it measured in a [`ctx::Ctx`]; its entry (id,
//! title, evidence, run function) sits beside its function, in the module of its clause family.
//! [`REGISTRY`] lists them in run order, and the runner, `--only`/`--skip`, the reports, the
//! docs' check table and the mutation matrix all derive from it.

pub mod coverage;
pub mod ctx;
pub mod pool;
pub mod refusal;
pub mod registry;
pub(crate) mod upload;

pub mod api;
pub mod bounds;
pub mod contract;
pub mod failure;
pub mod relay;
pub mod throughput;

pub use plimsoll_spec::{CheckId, UnknownCheck};
pub use registry::{Check, Run};

use plimsoll_spec::Contract;

/// Every check, in run order: the contract first (it decides which values the others judge),
/// then the clauses, F4 and API last since they judge every reply of the run.
pub static REGISTRY: &[Check] = &[
    contract::CHECK,
    throughput::t1::CHECK,
    throughput::t2::CHECK,
    throughput::t3::CHECK,
    throughput::t4::CHECK,
    throughput::t5::CHECK,
    throughput::t6::CHECK,
    bounds::b1::CHECK,
    bounds::b2::CHECK,
    bounds::b3::CHECK,
    bounds::b4::CHECK,
    bounds::b5::CHECK,
    failure::f1::CHECK,
    failure::f2::CHECK,
    failure::f3::CHECK,
    relay::r1::CHECK,
    relay::r2::CHECK,
    relay::r3::CHECK,
    relay::r4::CHECK,
    relay::r5::CHECK,
    relay::r6::CHECK,
    failure::f4::CHECK,
    api::CHECK,
];

/// The checks a run makes, in run order: those `only` names (all when empty) that `skip` does
/// not. The contract check always runs: every other verdict depends on it.
pub fn selected<'a>(
    only: &'a [CheckId],
    skip: &'a [CheckId],
) -> impl Iterator<Item = &'static Check> + 'a {
    REGISTRY.iter().filter(move |check| {
        matches!(check.run, Run::Session)
            || ((only.is_empty() || only.contains(&check.id)) && !skip.contains(&check.id))
    })
}

/// The docs' table of checks (id, title, evidence), with the contract's values filled in.
pub fn markdown_table(contract: &Contract) -> String {
    let mut md = String::from("| id | check | what the client observes |\n|---|---|---|\n");
    for check in REGISTRY {
        let evidence = check
            .evidence(contract)
            .unwrap_or_else(|e| panic!("{}'s evidence does not expand: {e}", check.id));
        md.push_str(&format!(
            "| {} | {} | {evidence} |\n",
            check.id,
            check.title(contract)
        ));
    }
    md
}

/// `total` cut into pieces of at most `max` (at least 1), the last one the remainder: the
/// stalled uploads that fill B5's budget, the waves of T3's crowd that fit the connection cap.
pub(crate) fn pieces(total: u64, max: u64) -> Vec<u64> {
    let max = max.max(1);
    let mut out = vec![max; (total / max) as usize];
    if !total.is_multiple_of(max) {
        out.push(total % max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_holds_every_id_once() {
        let ids: Vec<CheckId> = REGISTRY.iter().map(|c| c.id).collect();
        for id in CheckId::all() {
            assert_eq!(
                ids.iter().filter(|x| **x == id).count(),
                1,
                "{id} in {ids:?}"
            );
        }
        assert_eq!(ids.len(), CheckId::all().count());
    }

    #[test]
    fn the_contract_opens_and_f4_and_api_close_the_run() {
        let ids: Vec<String> = REGISTRY.iter().map(|c| c.id.to_string()).collect();
        assert_eq!(ids.first().map(String::as_str), Some("contract"));
        assert_eq!(ids[ids.len() - 2..], ["F4", "API"]);
    }

    #[test]
    fn every_evidence_text_expands_against_the_contract() {
        let contract = Contract::embedded();
        for check in REGISTRY {
            let text = check.evidence(contract).unwrap();
            assert!(!text.contains('{'), "{}: {text}", check.id);
            assert!(
                !text.contains("  "),
                "{}: a doubled space in {text:?}",
                check.id
            );
        }
    }

    #[test]
    fn selection_keeps_the_contract_and_run_order() {
        let t1 = CheckId::Clause(plimsoll_spec::ClauseId::T1);
        let api = CheckId::Api;
        let only: Vec<String> = selected(&[api, t1], &[])
            .map(|c| c.id.to_string())
            .collect();
        assert_eq!(only, ["contract", "T1", "API"]);
        let skipped: Vec<CheckId> = selected(&[], &[t1, CheckId::Contract])
            .map(|c| c.id)
            .collect();
        assert_eq!(skipped.len(), REGISTRY.len() - 1);
        assert!(!skipped.contains(&t1));
    }
}
