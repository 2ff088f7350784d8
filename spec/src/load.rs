//! Loading a contract: TOML → [`Contract`], then the rules a contract must satisfy. Every
//! refusal names the field and, when the contract came from text, its line.

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use toml::de::{DeTable, DeValue};

use crate::model::{Clause, Contract};
use crate::{ErrorCode, Stage};

/// The contract shipped with this build.
pub const EMBEDDED_TOML: &str = include_str!("../contract.toml");

/// Why a contract was refused.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },
    #[error("{origin}: invalid contract:\n{}", list(.violations))]
    Invalid {
        origin: String,
        violations: Vec<Violation>,
    },
}

fn list(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("  - {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One broken rule: the dotted field path, the line it is on, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: `{}`: {}", self.field, self.message),
            None => write!(f, "`{}`: {}", self.field, self.message),
        }
    }
}

impl Contract {
    /// The embedded contract, parsed and validated once.
    pub fn embedded() -> &'static Contract {
        static EMBEDDED: OnceLock<Contract> = OnceLock::new();
        EMBEDDED.get_or_init(|| {
            Contract::from_toml(EMBEDDED_TOML, "spec/contract.toml")
                .expect("the embedded contract is validated by the spec crate's tests")
        })
    }

    /// Reads and validates a contract file.
    pub fn from_file(path: &Path) -> Result<Contract, ContractError> {
        let text = std::fs::read_to_string(path).map_err(|source| ContractError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Contract::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates contract text; `origin` names it in messages.
    pub fn from_toml(text: &str, origin: &str) -> Result<Contract, ContractError> {
        let contract: Contract = toml::from_str(text).map_err(|e| ContractError::Syntax {
            origin: origin.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let mut violations = contract.violations();
        if violations.is_empty() {
            return Ok(contract);
        }
        if let Ok(table) = DeTable::parse(text) {
            for v in &mut violations {
                v.line = locate(text, table.get_ref(), &v.field);
            }
        }
        Err(ContractError::Invalid {
            origin: origin.to_owned(),
            violations,
        })
    }

    /// Every rule of a contract document: the effective-value rules plus the headroom rules the
    /// seed argues in prose, which bind the document but not a deployment's overrides (a test
    /// deployment may scale timeouts down on purpose).
    pub fn violations(&self) -> Vec<Violation> {
        let mut out = self.effective_violations();
        let b1 = &self.clauses.b1.value;
        for (field, timeout, reference) in [
            (
                "digitize_timeout_ms",
                b1.digitize_timeout_ms,
                b1.reference_digitize_ms,
            ),
            (
                "export_timeout_ms",
                b1.export_timeout_ms,
                b1.reference_export_ms,
            ),
        ] {
            let needed = b1.headroom_factor.saturating_mul(reference);
            if timeout < needed {
                out.push(violation(
                    &format!("clauses.B1.value.{field}"),
                    format!(
                        "{timeout} ms is below the headroom rule: at least {}x the reference duration ({reference} ms) = {needed} ms",
                        b1.headroom_factor
                    ),
                ));
            }
        }
        let b2 = &self.clauses.b2.value;
        if b2.memory_cap_mb <= b2.reference_peak_mb {
            out.push(violation(
                "clauses.B2.value.memory_cap_mb",
                format!(
                    "{} MB does not exceed the documented peak of the reference workload ({} MB)",
                    b2.memory_cap_mb, b2.reference_peak_mb
                ),
            ));
        }
        out
    }

    /// The rules every effective contract (document or after overrides) must satisfy.
    pub fn effective_violations(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut envs = std::collections::BTreeSet::new();
        for clause in self.clause_list() {
            let at = |f: &str| format!("clauses.{}.{f}", clause.id);
            for (field, text) in [
                ("title", clause.title),
                ("statement", clause.statement),
                ("rationale", clause.rationale),
                ("verification", clause.verification),
                ("source.section", &clause.source.section),
            ] {
                if text.trim().is_empty() {
                    out.push(violation(&at(field), "must not be empty".into()));
                }
                if let Err(e) = self.expand(&clause, text) {
                    out.push(violation(&at(field), e));
                }
            }
            if !self.sources.contains_key(&clause.source.doc) {
                out.push(violation(
                    &at("source.doc"),
                    format!(
                        "`{}` is not a key of [sources] ({})",
                        clause.source.doc,
                        self.sources.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            for o in clause.overrides {
                if !envs.insert(o.env.clone()) {
                    out.push(violation(
                        &at("overrides"),
                        format!("`{}` overrides two fields", o.env),
                    ));
                }
                match clause.value.get(&o.field) {
                    Some(v) if !v.is_object() && !v.is_array() => {}
                    _ => out.push(violation(
                        &at("overrides"),
                        format!(
                            "`{}` names `{}`, which is not a scalar field of value",
                            o.env, o.field
                        ),
                    )),
                }
            }
        }

        let c = &self.clauses;
        let mut range = |field: &str, value: u64, min: u64, max: u64| {
            if value < min || value > max {
                out.push(violation(
                    field,
                    format!("{value} is out of range {min}..={max}"),
                ));
            }
        };
        range(
            "clauses.T1.value.digitize_workers",
            c.t1.value.digitize_workers.into(),
            1,
            1024,
        );
        range(
            "clauses.T1.value.export_workers",
            c.t1.value.export_workers.into(),
            1,
            1024,
        );
        range(
            "clauses.T2.value.digitize_queue_capacity",
            c.t2.value.digitize_queue_capacity.into(),
            0,
            100_000,
        );
        range(
            "clauses.T2.value.export_queue_capacity",
            c.t2.value.export_queue_capacity.into(),
            0,
            100_000,
        );
        range(
            "clauses.T3.value.window_samples",
            c.t3.value.window_samples.into(),
            1,
            100_000,
        );
        range(
            "clauses.T3.value.min_seconds",
            c.t3.value.min_seconds,
            1,
            86_400,
        );
        range(
            "clauses.B1.value.digitize_timeout_ms",
            c.b1.value.digitize_timeout_ms,
            1,
            86_400_000,
        );
        range(
            "clauses.B1.value.export_timeout_ms",
            c.b1.value.export_timeout_ms,
            1,
            86_400_000,
        );
        range(
            "clauses.B1.value.headroom_factor",
            c.b1.value.headroom_factor,
            1,
            1000,
        );
        range(
            "clauses.B2.value.memory_cap_mb",
            c.b2.value.memory_cap_mb,
            1,
            1 << 20,
        );
        range(
            "clauses.B3.value.stop_within_ms",
            c.b3.value.stop_within_ms,
            1,
            60_000,
        );
        range(
            "clauses.B3.value.checkpoint_interval_ms",
            c.b3.value.checkpoint_interval_ms,
            1,
            c.b3.value.stop_within_ms.saturating_sub(1).max(1),
        );
        range(
            "clauses.R1.value.relay_concurrency",
            c.r1.value.relay_concurrency.into(),
            1,
            1024,
        );
        range(
            "clauses.R4.value.overflow_factor",
            c.r4.value.overflow_factor.into(),
            2,
            100,
        );
        range(
            "clauses.R5.value.max_frame_body_bytes",
            c.r5.value.max_frame_body_bytes,
            64,
            1 << 24,
        );
        range("tolerances.trials", self.tolerances.trials.into(), 1, 100);
        range(
            "api.digitize.max_pixels",
            self.api.digitize.max_pixels,
            1,
            1 << 32,
        );

        for (name, p) in self.api.digitize.params.iter() {
            if !(p.min <= p.default && p.default <= p.max) {
                out.push(violation(
                    &format!("api.digitize.params.{name}"),
                    format!(
                        "needs min <= default <= max, got {} <= {} <= {}",
                        p.min, p.default, p.max
                    ),
                ));
            }
        }
        if !self
            .api
            .export
            .formats
            .contains(&self.api.export.default_format)
        {
            out.push(violation(
                "api.export.default_format",
                "is not one of `formats`".into(),
            ));
        }

        for code in ErrorCode::ALL {
            let n = self.errors.iter().filter(|e| e.code == code).count();
            if n != 1 {
                out.push(violation(
                    "errors",
                    format!("code `{code}` must appear exactly once, found {n}"),
                ));
            }
        }
        let ids: Vec<&str> = self.clause_list().iter().map(|c| c.id).collect();
        for (i, e) in self.errors.iter().enumerate() {
            let at = |f: &str| format!("errors.{i}.{f}");
            if !(400..=599).contains(&e.status) {
                out.push(violation(
                    &at("status"),
                    format!("{} is not an error status", e.status),
                ));
            }
            if !ids.contains(&e.clause.as_str()) {
                out.push(violation(
                    &at("clause"),
                    format!("`{}` is not a clause id", e.clause),
                ));
            }
            if e.retry_after && e.status != 503 {
                out.push(violation(
                    &at("retry_after"),
                    "Retry-After is only sent with 503".into(),
                ));
            }
        }
        for code in &c.f2.value.codes {
            if self
                .errors
                .iter()
                .find(|e| e.code == *code)
                .is_none_or(|e| e.clause != "F2")
            {
                out.push(violation(
                    "clauses.F2.value.codes",
                    format!("`{code}` is not an F2 error in [[errors]]"),
                ));
            }
        }

        for (name, stages) in [
            ("digitize", &self.stages.digitize),
            ("export", &self.stages.export),
        ] {
            let unique: std::collections::BTreeSet<_> = stages.iter().collect();
            if stages.is_empty()
                || unique.len() != stages.len()
                || stages.contains(&Stage::Queue)
                || stages.contains(&Stage::Relay)
            {
                out.push(violation(
                    &format!("stages.{name}"),
                    "needs distinct stages, none of them `queue` or `relay`".into(),
                ));
            }
        }

        let mut names = std::collections::BTreeSet::new();
        for (i, m) in self.observability.metrics.iter().enumerate() {
            if !m.name.starts_with("plimsoll_") || !names.insert(&m.name) {
                out.push(violation(
                    &format!("observability.metrics.{i}.name"),
                    format!("`{}` must be unique and start with plimsoll_", m.name),
                ));
            }
        }
        out
    }
}

fn violation(field: &str, message: String) -> Violation {
    Violation {
        field: field.to_owned(),
        line: None,
        message,
    }
}

/// A clause with its id, seen without its value type (for renderers and validation).
pub struct ClauseRef<'a> {
    pub id: &'static str,
    pub title: &'a str,
    pub category: crate::model::Category,
    pub statement: &'a str,
    pub rationale: &'a str,
    pub verification: &'a str,
    pub source: &'a crate::model::SourceRef,
    pub overrides: &'a [crate::model::Override],
    /// The clause's value as JSON (field name → value).
    pub value: serde_json::Map<String, serde_json::Value>,
}

impl<'a> ClauseRef<'a> {
    fn new<V: serde::Serialize>(id: &'static str, c: &'a Clause<V>) -> Self {
        let value = match serde_json::to_value(&c.value) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        ClauseRef {
            id,
            title: &c.title,
            category: c.category,
            statement: &c.statement,
            rationale: &c.rationale,
            verification: &c.verification,
            source: &c.source,
            overrides: &c.overrides,
            value,
        }
    }
}

impl Contract {
    /// Every clause in id order (T, B, F, R).
    pub fn clause_list(&self) -> Vec<ClauseRef<'_>> {
        let c = &self.clauses;
        vec![
            ClauseRef::new("T1", &c.t1),
            ClauseRef::new("T2", &c.t2),
            ClauseRef::new("T3", &c.t3),
            ClauseRef::new("B1", &c.b1),
            ClauseRef::new("B2", &c.b2),
            ClauseRef::new("B3", &c.b3),
            ClauseRef::new("F1", &c.f1),
            ClauseRef::new("F2", &c.f2),
            ClauseRef::new("F3", &c.f3),
            ClauseRef::new("F4", &c.f4),
            ClauseRef::new("R1", &c.r1),
            ClauseRef::new("R2", &c.r2),
            ClauseRef::new("R3", &c.r3),
            ClauseRef::new("R4", &c.r4),
            ClauseRef::new("R5", &c.r5),
            ClauseRef::new("R6", &c.r6),
        ]
    }

    /// The status and title of an error code.
    pub fn error(&self, code: ErrorCode) -> &crate::model::ErrorSpec {
        self.errors
            .iter()
            .find(|e| e.code == code)
            .expect("validation guarantees every code is in [[errors]]")
    }
}

impl Contract {
    /// Fills a clause text's placeholders so prose never repeats a value: `{field}` is a field of
    /// the clause's value, `{status:CODE}` the HTTP status of an error code.
    pub fn expand(&self, clause: &ClauseRef<'_>, template: &str) -> Result<String, String> {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("unclosed `{{` in {template:?}"))?;
            let name = &rest[open + 1..open + close];
            let text = if let Some(code) = name.strip_prefix("status:") {
                let code: ErrorCode = code.parse()?;
                self.errors
                    .iter()
                    .find(|e| e.code == code)
                    .map(|e| e.status.to_string())
                    .ok_or_else(|| format!("`{code}` has no status in [[errors]]"))?
            } else {
                match clause.value.get(name) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(v) if !v.is_object() && !v.is_array() => v.to_string(),
                    _ => {
                        return Err(format!(
                            "placeholder `{{{name}}}` is not a scalar field of {}'s value",
                            clause.id
                        ));
                    }
                }
            };
            out.push_str(&text);
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// [`Contract::expand`] for texts already validated.
    pub fn text(&self, clause: &ClauseRef<'_>, template: &str) -> String {
        self.expand(clause, template)
            .unwrap_or_else(|_| template.to_owned())
    }
}

/// Line (1-based) of a dotted field path in the TOML text; falls back to the nearest ancestor.
fn locate(text: &str, root: &DeTable<'_>, field: &str) -> Option<usize> {
    let mut best = None;
    let mut table = Some(root);
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    for part in field.split('.') {
        let spanned = if let Some(t) = table {
            t.get(part)
        } else if let Some(a) = array {
            part.parse::<usize>().ok().and_then(|i| a.get(i))
        } else {
            None
        };
        let Some(spanned) = spanned else { break };
        best = Some(spanned.span().start);
        (table, array) = match spanned.get_ref() {
            DeValue::Table(t) => (Some(t), None),
            DeValue::Array(a) => (None, Some(&a[..])),
            _ => (None, None),
        };
    }
    best.map(|offset| text[..offset.min(text.len())].matches('\n').count() + 1)
}
