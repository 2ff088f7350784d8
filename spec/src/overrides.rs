//! Environment overrides: the one function both the server and the checker use to turn the
//! contract into the values a deployment runs with.

use crate::Violation;
use crate::model::Contract;

/// Why an override was refused; names the variable.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    /// A variable's text is not a value of the field's type, or the result is no contract.
    #[error("{env}={raw}: {message}")]
    BadValue {
        /// The variable (the last one applied when the whole result does not parse).
        env: String,
        /// Its text as set (empty when the whole result does not parse).
        raw: String,
        /// What was expected instead.
        message: String,
    },
    /// Every value parsed, but together they break the effective-value rules.
    #[error("overrides make the contract invalid:\n{}", .0.iter().map(|v| format!("  - {v}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Violation>),
}

/// One applied override, for reports ("the run was scaled").
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Applied {
    /// The clause whose value changed.
    pub clause: crate::ClauseId,
    /// The variable that changed it.
    pub env: String,
    /// The field of the clause's value it replaced.
    pub field: String,
    /// The contract's own value.
    pub from: serde_json::Value,
    /// The value the deployment runs with.
    pub to: serde_json::Value,
}

impl Contract {
    /// Every environment variable that overrides a clause value.
    pub fn override_envs(&self) -> Vec<String> {
        self.clause_list()
            .iter()
            .flat_map(|c| c.overrides.iter().map(|o| o.env.clone()))
            .collect()
    }

    /// Applies overrides from `lookup` (e.g. `|k| std::env::var(k).ok()`), parsing each by the
    /// type of the value it replaces, and re-validates the result.
    pub fn with_overrides(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(Contract, Vec<Applied>), OverrideError> {
        let mut doc = serde_json::to_value(self).expect("a contract serializes");
        let mut applied = Vec::new();
        for clause in self.clause_list() {
            for o in clause.overrides {
                let Some(raw) = lookup(&o.env) else { continue };
                let pointer = format!("/clauses/{}/value/{}", clause.id, o.field);
                let slot = doc.pointer_mut(&pointer).expect("validated override field");
                let bad = |message: &str| OverrideError::BadValue {
                    env: o.env.clone(),
                    raw: raw.clone(),
                    message: message.to_owned(),
                };
                let new = match slot {
                    serde_json::Value::Bool(_) => match raw.trim() {
                        "1" | "true" | "yes" | "on" => serde_json::Value::Bool(true),
                        "0" | "false" | "no" | "off" => serde_json::Value::Bool(false),
                        _ => return Err(bad("expected 1/0, true/false, yes/no or on/off")),
                    },
                    serde_json::Value::Number(n) if n.is_u64() => raw
                        .trim()
                        .parse::<u64>()
                        .map(Into::into)
                        .map_err(|_| bad("expected a non-negative integer"))?,
                    serde_json::Value::Number(_) => raw
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map(serde_json::Value::Number)
                        .ok_or_else(|| bad("expected a number"))?,
                    serde_json::Value::String(_) => serde_json::Value::String(raw.clone()),
                    _ => return Err(bad("this field cannot be overridden")),
                };
                applied.push(Applied {
                    clause: clause.id,
                    env: o.env.clone(),
                    field: o.field.clone(),
                    from: slot.clone(),
                    to: new.clone(),
                });
                *slot = new;
            }
        }
        let contract: Contract =
            serde_json::from_value(doc).map_err(|e| OverrideError::BadValue {
                env: applied.last().map(|a| a.env.clone()).unwrap_or_default(),
                raw: String::new(),
                message: e.to_string(),
            })?;
        let violations = contract.effective_violations();
        if !violations.is_empty() {
            return Err(OverrideError::Invalid(violations));
        }
        Ok((contract, applied))
    }

    /// The contract with this process's environment applied.
    pub fn from_env(&self) -> Result<(Contract, Vec<Applied>), OverrideError> {
        self.with_overrides(|k| std::env::var(k).ok())
    }
}
