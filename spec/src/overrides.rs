//! Environment overrides: the one function both the server and the checker use to turn the
//! contract into the values a deployment runs with.

use crate::model::{Contract, Override};
use crate::{ClauseId, Violation};

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
    /// The clause whose promise the value is part of.
    pub clause: crate::ClauseId,
    /// The variable that changed it.
    pub env: String,
    /// The field it replaced, as a dotted path of the contract (`pools.digitize.workers`).
    pub field: String,
    /// The contract's own value.
    pub from: serde_json::Value,
    /// The value the deployment runs with.
    pub to: serde_json::Value,
}

/// Where an override applies: the field it replaces, as a dotted path of the contract, and the
/// clause whose promise that field is part of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideSite<'c> {
    /// The dotted path of the field (`pools.digitize.queue.capacity`).
    pub path: String,
    /// The dotted path of the table that declares the override (`pools.digitize`).
    pub owner: String,
    /// The clause whose value the field is (`T2`).
    pub clause: ClauseId,
    /// The override as declared, its `field` relative to its table.
    pub spec: &'c Override,
}

impl Contract {
    /// Every override of the contract, each with the field it replaces: the pools', the
    /// sections' (`[connections]`, `[upload]`) and the clauses'.
    pub fn override_sites(&self) -> Vec<OverrideSite<'_>> {
        let mut out = Vec::new();
        for (name, pool) in &self.pools {
            for o in &pool.overrides {
                out.push(site(format!("pools.{name}"), pool.routes.is_empty(), o));
            }
        }
        for (name, limit) in &self.rate_limits {
            for o in &limit.overrides {
                out.push(site(format!("rate_limits.{name}"), false, o));
            }
        }
        for o in self.connections.iter().flat_map(|c| &c.overrides) {
            out.push(site("connections".into(), false, o));
        }
        for o in self.upload.iter().flat_map(|u| &u.overrides) {
            out.push(site("upload".into(), false, o));
        }
        for clause in self.clause_list() {
            for o in clause.overrides {
                out.push(OverrideSite {
                    path: format!("clauses.{}.value.{}", clause.id, o.field),
                    owner: format!("clauses.{}.value", clause.id),
                    clause: clause.id,
                    spec: o,
                });
            }
        }
        out
    }

    /// Every environment variable that overrides a value of the contract.
    pub fn override_envs(&self) -> Vec<String> {
        self.override_sites()
            .iter()
            .map(|s| s.spec.env.clone())
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
        for site in self.override_sites() {
            let o = site.spec;
            let Some(raw) = lookup(&o.env) else { continue };
            let pointer = format!("/{}", site.path.replace('.', "/"));
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
                clause: site.clause,
                env: o.env.clone(),
                field: site.path.clone(),
                from: slot.clone(),
                to: new.clone(),
            });
            *slot = new;
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

/// The site of `o`, declared in the table at `owner` (a dotted path of the service's
/// declaration; `relay_pool`: a pool fed by no route). Its clause is the one that judges the
/// field ([`crate::model::judged_by`]); a field no clause judges is refused by validation.
fn site(owner: String, relay_pool: bool, o: &Override) -> OverrideSite<'_> {
    let path = format!("{owner}.{}", o.field);
    OverrideSite {
        clause: crate::model::judged_by(&path, relay_pool).unwrap_or(ClauseId::T1),
        path,
        owner,
        spec: o,
    }
}
