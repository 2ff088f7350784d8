//! Judging a target's *claimed* effective values (`GET /v1/contract`) against the contract.
//!
//! The server under test may lie. A claimed value is adopted only where the contract says a
//! deployment may change it (an `overrides` entry of a pool, a section or a clause), only when the caller allows overrides, and
//! only when the result still satisfies every effective-value rule. Everything else — bounds
//! like `stop_within_ms`, tolerances, statuses, codes, stages, header names — stays the
//! contract's own, and each such difference is reported as refused.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::ClauseId;
use crate::model::Contract;

/// One leaf where the claim differs from the contract.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Difference {
    /// Dotted path, e.g. `pools.digitize.deadline_ms`.
    pub path: String,
    /// The contract's value (`None`: the contract has no such field).
    pub ours: Option<Value>,
    /// The claimed value (`None`: the claim leaves the field out).
    pub theirs: Option<Value>,
}

impl Difference {
    /// Whether both values are numbers (both non-negative integers, or neither) or both
    /// booleans: a claimed value of any other kind is never adopted.
    fn same_type(&self) -> bool {
        matches!(
            (&self.ours, &self.theirs),
            (Some(Value::Number(a)), Some(Value::Number(b))) if a.is_u64() == b.is_u64()
        ) || matches!(
            (&self.ours, &self.theirs),
            (Some(Value::Bool(_)), Some(Value::Bool(_)))
        )
    }
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or("(absent)".to_owned(), Value::to_string);
        write!(
            f,
            "{}: {} → {}",
            self.path,
            show(&self.ours),
            show(&self.theirs)
        )
    }
}

/// A difference taken over as the target's effective value.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Adopted {
    /// The field and both values.
    pub difference: Difference,
    /// The clause whose value the field is.
    pub clause: ClauseId,
    /// The environment variable that overrides this field.
    pub env: String,
}

/// A difference the checker does not accept, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct Refused {
    /// The field and both values.
    pub difference: Difference,
    /// Why the contract's own value applies instead, for the report.
    pub reason: String,
}

/// The outcome: what the checks judge by, and what was adopted or refused on the way.
#[derive(Debug, Clone)]
pub struct Reconciliation {
    /// The contract with the adopted values: the expectations of every check.
    pub effective: Contract,
    /// The claimed values the checks judge by, each an allowed override.
    pub adopted: Vec<Adopted>,
    /// The claimed values the checks ignore; any of them makes the claim unacceptable.
    pub refused: Vec<Refused>,
    /// The claim could not be read as a contract at all (then nothing is adopted).
    pub unreadable: Option<String>,
}

impl Reconciliation {
    /// Whether the claim is acceptable: readable, and no difference refused.
    pub fn accepted(&self) -> bool {
        self.unreadable.is_none() && self.refused.is_empty()
    }
}

impl Contract {
    /// Compares a target's claimed effective contract with this one. `[load]` holds the
    /// checker's own settings, not promises of the implementation: never compared, always ours.
    /// Schema defaults are filled in on both sides first, so a claim that leaves out a field
    /// with a default (e.g. `errors[].retry_after = false`) is not a difference.
    pub fn reconcile(&self, claimed: &Value, allow_overrides: bool) -> Reconciliation {
        let mut ours = serde_json::to_value(self).expect("a contract serializes");
        strip_load(&mut ours);
        let (theirs, unreadable) = self.normalized_claim(claimed);
        let mut adopted = Vec::new();
        let mut refused = Vec::new();
        for difference in differences(&ours, &theirs) {
            match self.judge(difference, unreadable.is_none(), allow_overrides) {
                Ok(adoption) => adopted.push(adoption),
                Err(refusal) => refused.push(refusal),
            }
        }
        let effective = self.with_adopted(&mut adopted, &mut refused);
        Reconciliation {
            effective,
            adopted,
            refused,
            unreadable,
        }
    }

    /// The claim as this contract's serialization spells it (schema defaults filled in, no
    /// `[load]`), and why it does not parse as a contract, if it does not.
    fn normalized_claim(&self, claimed: &Value) -> (Value, Option<String>) {
        let mut theirs = claimed.clone();
        strip_load(&mut theirs);
        if let Some(map) = theirs.as_object_mut() {
            map.insert(
                "load".to_owned(),
                serde_json::to_value(&self.load).expect("serializes"),
            );
        }
        let unreadable = match serde_json::from_value::<Contract>(theirs.clone()) {
            Ok(parsed) => {
                theirs = serde_json::to_value(parsed).expect("a contract serializes");
                None
            }
            Err(e) => Some(format!("the claimed contract does not parse: {e}")),
        };
        strip_load(&mut theirs);
        (theirs, unreadable)
    }

    /// One difference adopted (`Ok`) or refused (`Err`, with the reason), judged on its own.
    fn judge(
        &self,
        difference: Difference,
        readable: bool,
        allow_overrides: bool,
    ) -> Result<Adopted, Refused> {
        let reason = match self.overridable(&difference.path) {
            _ if !readable => "the claim is not a readable contract".into(),
            None => "not an overridable field: the contract's own value applies".into(),
            Some(_) if !allow_overrides => {
                "overridable, but overrides are not allowed (--allow-overrides)".into()
            }
            Some((_, env)) if !difference.same_type() => {
                format!("{env} takes a value of the contract's type")
            }
            Some((clause, env)) => {
                return Ok(Adopted {
                    difference,
                    clause,
                    env,
                });
            }
        };
        Err(Refused { difference, reason })
    }

    /// This contract with the adopted values, if they still make a valid effective contract;
    /// otherwise this contract as it is, every adoption moved to `refused` with the reason.
    fn with_adopted(&self, adopted: &mut Vec<Adopted>, refused: &mut Vec<Refused>) -> Contract {
        let mut effective_doc = serde_json::to_value(self).expect("a contract serializes");
        for adoption in adopted.iter() {
            let difference = &adoption.difference;
            let pointer = format!("/{}", difference.path.replace('.', "/"));
            if let (Some(slot), Some(v)) = (effective_doc.pointer_mut(&pointer), &difference.theirs)
            {
                *slot = v.clone();
            }
        }
        let violations = match serde_json::from_value::<Contract>(effective_doc) {
            Ok(c) if c.effective_violations().is_empty() => return c,
            Ok(c) => c.effective_violations(),
            Err(e) => {
                let reason = format!("the claimed values do not form a contract: {e}");
                refused.extend(adopted.drain(..).map(|a| Refused {
                    difference: a.difference,
                    reason: reason.clone(),
                }));
                return self.clone();
            }
        };
        refused.extend(blame(std::mem::take(adopted), &violations));
        self.clone()
    }

    /// The clause and environment variable that may override the field at `path`, if any.
    fn overridable(&self, path: &str) -> Option<(ClauseId, String)> {
        self.override_sites()
            .into_iter()
            .find(|site| site.path == path)
            .map(|site| (site.clause, site.spec.env.clone()))
    }
}

/// The adoptions refused because `violations` broke the contract's rules: each override whose
/// field a violated rule names is to blame, with that rule's words; the others are named as not
/// adopted because of them (the overrides are adopted all or none). When no rule names an
/// override's field, every one carries the rules' words.
fn blame(adopted: Vec<Adopted>, violations: &[crate::Violation]) -> Vec<Refused> {
    let guilty = |a: &Adopted| violations.iter().any(|v| v.field == a.difference.path);
    let culprits: Vec<String> = adopted
        .iter()
        .filter(|a| guilty(a))
        .map(|a| format!("`{}` ({})", a.difference.path, a.env))
        .collect();
    let rules = violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    adopted
        .into_iter()
        .map(|a| {
            let reason = if culprits.is_empty() || guilty(&a) {
                format!("the claimed values break the contract's rules: {rules}")
            } else {
                format!(
                    "not adopted because of {}, which breaks the contract's rules (overrides are adopted all or none)",
                    culprits.join(", ")
                )
            };
            Refused {
                difference: a.difference,
                reason,
            }
        })
        .collect()
}

/// Drops `[load]`: the checker's own settings, never a claim's.
fn strip_load(v: &mut Value) {
    if let Some(map) = v.as_object_mut() {
        map.remove("load");
    }
}

/// Whether two JSON values say the same thing: numbers by value, so `2` is `2.0` (JSON has one
/// number type, and a claim's encoder may write a TOML float without its fraction), the rest as
/// written, arrays and objects member by member.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Leaf-by-leaf differences of two JSON documents (arrays compare whole, numbers by value).
pub fn differences(ours: &Value, theirs: &Value) -> Vec<Difference> {
    fn leaves(v: &Value, path: String, out: &mut BTreeMap<String, Value>) {
        match v {
            Value::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    leaves(v, p, out);
                }
            }
            other => {
                out.insert(path, other.clone());
            }
        }
    }
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    leaves(ours, String::new(), &mut a);
    leaves(theirs, String::new(), &mut b);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| !matches!((a.get(*k), b.get(*k)), (Some(x), Some(y)) if same(x, y)))
        .map(|k| Difference {
            path: k.clone(),
            ours: a.get(k).cloned(),
            theirs: b.get(k).cloned(),
        })
        .collect()
}
