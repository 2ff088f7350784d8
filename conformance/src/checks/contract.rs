//! `contract`: the target's effective values (`GET /v1/contract`) against the contract. It is
//! judged from the session before any other request and opens every run (`check` and `load`),
//! since it decides which values the other checks judge by.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::registry::{Check, CheckId, Run};
use crate::verdict::{CheckResult, Verdict};

const TITLE: &str = "Effective values match the contract";

pub const CHECK: Check = Check::whole_run(
    CheckId::Contract,
    TITLE,
    "The target's contract endpoint returns its effective values; they must equal the contract \
     leaf by leaf, or, with `--allow-overrides` or on the embedded scaled server, the differences \
     are allowed and each is listed as evidence. The load generator's own `[load]` settings are \
     never compared.",
    Run::Session,
);

/// Differences between the contract and a target's effective values. `[load]` holds the load
/// generator's own settings, not promises of the implementation, so it is never compared.
pub fn contract_differences(
    contract: &plimsoll_spec::Contract,
    effective: &serde_json::Value,
) -> Vec<String> {
    let without_load = |v: &serde_json::Value| {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("load");
        }
        v
    };
    let ours = serde_json::to_value(contract).expect("a contract serializes");
    diff(&without_load(&ours), &without_load(effective))
}

/// The `contract` result that opens every run: pass when the values match or differences are
/// allowed (and then listed as evidence).
pub fn contract_result(differences: &[String], scaled: bool) -> CheckResult {
    let started = Instant::now();
    let verdict = if differences.is_empty() || scaled {
        Verdict::Pass
    } else {
        Verdict::Fail(format!(
            "{} value(s) differ from the contract; pass --allow-overrides to judge the target's own values",
            differences.len()
        ))
    };
    CheckResult {
        id: CHECK.id.to_string(),
        clause: CHECK.id.to_string(),
        title: TITLE.into(),
        expected: "the target's effective values equal the contract".into(),
        observed: if differences.is_empty() {
            "identical".into()
        } else {
            format!(
                "{} difference(s){}",
                differences.len(),
                if scaled { " (allowed: scaled run)" } else { "" }
            )
        },
        verdict,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        evidence: differences.to_vec(),
        trials_ms: Vec::new(),
        timeline: Vec::new(),
    }
}

/// Leaf-by-leaf differences between two JSON documents, as `path: expected → actual`.
pub fn diff(expected: &serde_json::Value, actual: &serde_json::Value) -> Vec<String> {
    fn leaves(v: &serde_json::Value, path: String, out: &mut BTreeMap<String, String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    leaves(
                        v,
                        if path.is_empty() {
                            k.clone()
                        } else {
                            format!("{path}.{k}")
                        },
                        out,
                    );
                }
            }
            other => {
                out.insert(path, other.to_string());
            }
        }
    }
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    leaves(expected, String::new(), &mut a);
    leaves(actual, String::new(), &mut b);
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| {
            format!(
                "{k}: {} → {}",
                a.get(k).map_or("(absent)", String::as_str),
                b.get(k).map_or("(absent)", String::as_str)
            )
        })
        .collect()
}
