//! `plimsoll contract upgrade`: a contract written in language 1 (contracts 1.x, which could
//! describe only the digitize service's shape) rewritten in language 2, where the service's pools,
//! refusals, connections and uploads are data of their own.
//!
//! Language 1 kept every value in a clause (`clauses.T1.value.digitize_workers`); language 2 keeps
//! it in the service's declaration (`pools.digitize.workers`) and leaves the clause only the
//! values that are its own (B1's `headroom_factor`, B2's `reference_peak_mb`). The conversion is
//! mechanical: every value, override and placeholder moves to its new path, nothing is guessed.
//! The document's own `version` is the team's to bump; comments are not carried over.

use toml::{Table, Value};

use crate::model::LANGUAGE;

/// Why a document could not be upgraded.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The text is not TOML.
    #[error("not TOML: {0}")]
    Syntax(String),
    /// The document already names a language.
    #[error("the document is already written in contract language {0}")]
    AlreadyCurrent(i64),
    /// A field language 1 requires is missing or of the wrong type.
    #[error("not a language-1 contract: `{0}` is missing or not of its type")]
    Missing(String),
}

/// Where each language-1 clause value went: (clause, old field, new dotted path).
const MOVES: &[(&str, &str, &str)] = &[
    ("T1", "digitize_workers", "pools.digitize.workers"),
    ("T1", "export_workers", "pools.export.workers"),
    (
        "T2",
        "digitize_queue_capacity",
        "pools.digitize.queue.capacity",
    ),
    ("T2", "export_queue_capacity", "pools.export.queue.capacity"),
    ("T2", "order", "pools.digitize.queue.order"),
    (
        "T3",
        "retry_after_header",
        "refusals.overloaded.hint.header",
    ),
    ("T3", "format", "refusals.overloaded.hint.format"),
    ("T3", "estimator", "refusals.overloaded.hint.estimator"),
    (
        "T3",
        "window_samples",
        "refusals.overloaded.hint.window_samples",
    ),
    ("T3", "min_seconds", "refusals.overloaded.hint.min_seconds"),
    (
        "T3",
        "empty_window_seconds",
        "refusals.overloaded.hint.empty_window_seconds",
    ),
    ("T3", "max", "refusals.overloaded.hint.max"),
    ("B1", "digitize_timeout_ms", "pools.digitize.deadline_ms"),
    ("B1", "export_timeout_ms", "pools.export.deadline_ms"),
    ("B1", "upload_read_timeout_ms", "upload.read_timeout_ms"),
    ("B1", "reference_digitize_ms", "pools.digitize.reference_ms"),
    ("B1", "reference_export_ms", "pools.export.reference_ms"),
    ("B2", "memory_cap_mb", "pools.digitize.memory_cap_mb"),
    (
        "B3",
        "stop_within_ms",
        "pools.digitize.cancellation.stop_within_ms",
    ),
    (
        "B3",
        "checkpoint_interval_ms",
        "pools.digitize.cancellation.checkpoint_interval_ms",
    ),
    ("B4", "head_timeout_ms", "connections.head_timeout_ms"),
    ("B4", "max_connections", "connections.max_connections"),
    ("B5", "upload_budget_mb", "upload.budget_mb"),
    ("R1", "relay_concurrency", "pools.relay.workers"),
    ("R1", "overflow", "pools.relay.queue.capacity"),
];

/// Language-1 values that stay in their clause in language 2.
const KEPT: &[(&str, &str)] = &[("B1", "headroom_factor"), ("B2", "reference_peak_mb")];

/// Rewrites a language-1 contract document in language 2.
pub fn upgrade(text: &str) -> Result<String, UpgradeError> {
    let old: Table = toml::from_str(text).map_err(|e| UpgradeError::Syntax(e.to_string()))?;
    if let Some(language) = old.get("language") {
        return Err(UpgradeError::AlreadyCurrent(
            language.as_integer().unwrap_or_default(),
        ));
    }
    let v1 = Language1(&old);
    let service = v1.service()?;
    let mut clauses = v1.table("clauses")?.clone();
    for (id, clause) in clauses.iter_mut() {
        let clause = clause
            .as_table_mut()
            .ok_or_else(|| UpgradeError::Missing(format!("clauses.{id}")))?;
        move_out_of(id, clause);
    }
    let mut out = Table::new();
    out.insert("language".into(), Value::Integer(LANGUAGE.into()));
    out.extend(service);
    out.insert("clauses".into(), Value::Table(clauses));
    for (key, value) in old {
        if !matches!(key.as_str(), "stages" | "clauses") {
            out.insert(key, value);
        }
    }
    rename_placeholders(&mut out);
    Ok(in_reading_order(&out))
}

/// The document's top-level sections in the order a reader meets them (the language, what the
/// contract is, the service, its clauses, then the rest as they came), whatever order the TOML
/// library keeps a table's keys in.
fn in_reading_order(doc: &Table) -> String {
    const FIRST: [&str; 8] = [
        "language",
        "contract",
        "sources",
        "pools",
        "refusals",
        "connections",
        "upload",
        "clauses",
    ];
    let rest = doc.keys().filter(|k| !FIRST.contains(&k.as_str()));
    let mut text = String::new();
    for key in FIRST.iter().copied().chain(rest.map(String::as_str)) {
        if let Some(value) = doc.get(key) {
            let one = table([(key, value.clone())]);
            text.push_str(&toml::to_string_pretty(&one).expect("a TOML table serializes"));
            text.push('\n');
        }
    }
    text
}

/// Read access to a language-1 document, naming what is missing.
struct Language1<'a>(&'a Table);

impl Language1<'_> {
    fn at(&self, path: &str) -> Result<&Value, UpgradeError> {
        let mut v: Option<&Value> = None;
        for (i, part) in path.split('.').enumerate() {
            let next = if i == 0 {
                self.0.get(part)
            } else {
                v.and_then(|v| v.get(part))
            };
            v = Some(next.ok_or_else(|| UpgradeError::Missing(path.into()))?);
        }
        v.ok_or_else(|| UpgradeError::Missing(path.into()))
    }

    fn table(&self, path: &str) -> Result<&Table, UpgradeError> {
        self.at(path)?
            .as_table()
            .ok_or_else(|| UpgradeError::Missing(path.into()))
    }

    fn value(&self, clause: &str, field: &str) -> Result<Value, UpgradeError> {
        self.at(&format!("clauses.{clause}.value.{field}")).cloned()
    }

    /// The overrides of `clause` that replaced one of `fields`, renamed to their new field.
    fn overrides(&self, clause: &str, fields: &[(&str, &str)]) -> Vec<Value> {
        let Ok(Value::Array(list)) = self.at(&format!("clauses.{clause}.overrides")) else {
            return Vec::new();
        };
        list.iter()
            .filter_map(|o| {
                let field = o.get("field")?.as_str()?;
                let (_, new) = fields.iter().find(|(old, _)| *old == field)?;
                let mut o = o.as_table()?.clone();
                o.insert("field".into(), Value::String((*new).into()));
                Some(Value::Table(o))
            })
            .collect()
    }

    /// `[pools]`, `[refusals]`, `[connections]` and `[upload]`, from the clauses' values.
    fn service(&self) -> Result<Table, UpgradeError> {
        let mut pools = Table::new();
        for (name, title) in [("digitize", "Digitize"), ("export", "Export")] {
            pools.insert(name.into(), Value::Table(self.job_pool(name, title)?));
        }
        pools.insert("relay".into(), Value::Table(self.relay_pool()?));
        let mut hint = self.table("clauses.T3.value")?.clone();
        if let Some(header) = hint.remove("retry_after_header") {
            hint.insert("header".into(), header);
        }
        let mut refusals = Table::new();
        refusals.insert(
            "overloaded".into(),
            Value::Table(table([
                ("error", Value::String("overloaded".into())),
                ("hint", Value::Table(hint)),
            ])),
        );
        let mut connections = self.table("clauses.B4.value")?.clone();
        with_overrides(
            &mut connections,
            self.overrides(
                "B4",
                &[
                    ("head_timeout_ms", "head_timeout_ms"),
                    ("max_connections", "max_connections"),
                ],
            ),
        );
        let mut upload = table([
            (
                "read_timeout_ms",
                self.value("B1", "upload_read_timeout_ms")?,
            ),
            ("budget_mb", self.value("B5", "upload_budget_mb")?),
        ]);
        let mut overrides = self.overrides("B1", &[("upload_read_timeout_ms", "read_timeout_ms")]);
        overrides.extend(self.overrides("B5", &[("upload_budget_mb", "budget_mb")]));
        with_overrides(&mut upload, overrides);
        Ok(table([
            ("pools", Value::Table(pools)),
            ("refusals", Value::Table(refusals)),
            ("connections", Value::Table(connections)),
            ("upload", Value::Table(upload)),
        ]))
    }

    /// A job pool of language 1 (`digitize`, `export`): its values spread over T1, T2, B1, B2,
    /// B3, `[stages]` and `[api]`.
    fn job_pool(&self, name: &str, title: &str) -> Result<Table, UpgradeError> {
        let route = table([
            ("method", self.at(&format!("api.{name}.method"))?.clone()),
            ("path", self.at(&format!("api.{name}.path"))?.clone()),
        ]);
        let queue = table([
            (
                "capacity",
                self.value("T2", &format!("{name}_queue_capacity"))?,
            ),
            ("order", self.value("T2", "order")?),
        ]);
        let mut pool = table([
            ("title", Value::String(title.into())),
            ("routes", Value::Array(vec![Value::Table(route)])),
            ("workers", self.value("T1", &format!("{name}_workers"))?),
            ("queue", Value::Table(queue)),
            (
                "deadline_ms",
                self.value("B1", &format!("{name}_timeout_ms"))?,
            ),
            (
                "reference_ms",
                self.value("B1", &format!("reference_{name}_ms"))?,
            ),
            ("memory_cap_mb", self.value("B2", "memory_cap_mb")?),
            (
                "cancellation",
                Value::Table(self.table("clauses.B3.value")?.clone()),
            ),
            ("stages", self.at(&format!("stages.{name}"))?.clone()),
            ("refusal", Value::String("overloaded".into())),
        ]);
        let workers = format!("{name}_workers");
        let queue = format!("{name}_queue_capacity");
        let deadline = format!("{name}_timeout_ms");
        let mut overrides = self.overrides("T1", &[(&workers, "workers")]);
        overrides.extend(self.overrides("T2", &[(&queue, "queue.capacity")]));
        overrides.extend(self.overrides("B1", &[(&deadline, "deadline_ms")]));
        overrides.extend(self.overrides("B2", &[("memory_cap_mb", "memory_cap_mb")]));
        with_overrides(&mut pool, overrides);
        Ok(pool)
    }

    /// The relay's pool (R1): overflow `queue` is an unbounded queue, `reject` none at all.
    fn relay_pool(&self) -> Result<Table, UpgradeError> {
        let queued = self.value("R1", "overflow")?.as_str() == Some("queue");
        let capacity = if queued {
            Value::String("unbounded".into())
        } else {
            Value::Integer(0)
        };
        let mut pool = table([
            ("title", Value::String("Relay".into())),
            ("workers", self.value("R1", "relay_concurrency")?),
            (
                "queue",
                Value::Table(table([
                    ("capacity", capacity),
                    ("order", Value::String("fifo".into())),
                ])),
            ),
        ]);
        if !queued {
            pool.insert("refusal".into(), Value::String("overloaded".into()));
        }
        with_overrides(
            &mut pool,
            self.overrides("R1", &[("relay_concurrency", "workers")]),
        );
        Ok(pool)
    }
}

/// Takes the values that moved out of `clause`, and the overrides that went with them.
fn move_out_of(id: &str, clause: &mut Table) {
    let kept: Vec<&str> = KEPT
        .iter()
        .filter(|(c, _)| *c == id)
        .map(|(_, f)| *f)
        .collect();
    let moved: Vec<&str> = MOVES
        .iter()
        .filter(|(c, _, _)| *c == id)
        .map(|(_, f, _)| *f)
        .collect();
    if let Some(Value::Table(value)) = clause.get_mut("value") {
        value.retain(|field, _| {
            let field: &str = field;
            kept.contains(&field) || !moved.contains(&field)
        });
    }
    if let Some(Value::Array(overrides)) = clause.get_mut("overrides") {
        overrides.retain(|o| {
            o.get("field")
                .and_then(Value::as_str)
                .is_none_or(|f| !moved.contains(&f))
        });
        if overrides.is_empty() {
            clause.remove("overrides");
        }
    }
}

/// Rewrites every placeholder that named a moved value: `{field}` in its own clause's texts (and
/// in the implementation rules of that clause), `{clauses.X.value.field}` and `{stages.P.N}`
/// anywhere.
fn rename_placeholders(doc: &mut Table) {
    let global: Vec<(String, String)> = MOVES
        .iter()
        .map(|(c, f, new)| (format!("{{clauses.{c}.value.{f}}}"), format!("{{{new}}}")))
        .chain(
            ["digitize", "export"]
                .map(|p| (format!("{{stages.{p}."), format!("{{pools.{p}.stages."))),
        )
        .collect();
    let local = |id: &str| -> Vec<(String, String)> {
        MOVES
            .iter()
            .filter(|(c, _, _)| *c == id)
            .map(|(_, f, new)| (format!("{{{f}}}"), format!("{{{new}}}")))
            .collect()
    };
    if let Some(Value::Table(clauses)) = doc.get_mut("clauses") {
        for (id, clause) in clauses.iter_mut() {
            replace_in(clause, &local(id));
        }
    }
    if let Some(Value::Array(rules)) = doc.get_mut("implementation") {
        for rule in rules {
            let id = rule
                .get("clause")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(id) = id {
                replace_in(rule, &local(&id));
            }
        }
    }
    for (_, value) in doc.iter_mut() {
        replace_in(value, &global);
    }
}

/// Replaces each `(from, to)` in every string under `value`.
fn replace_in(value: &mut Value, pairs: &[(String, String)]) {
    match value {
        Value::String(s) => {
            for (from, to) in pairs {
                if s.contains(from.as_str()) {
                    *s = s.replace(from.as_str(), to);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| replace_in(v, pairs)),
        Value::Table(t) => t.iter_mut().for_each(|(_, v)| replace_in(v, pairs)),
        _ => {}
    }
}

fn table<const N: usize>(entries: [(&str, Value); N]) -> Table {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

fn with_overrides(table: &mut Table, overrides: Vec<Value>) {
    if !overrides.is_empty() {
        table.insert("overrides".into(), Value::Array(overrides));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Contract;

    const CONTRACT_1_7: &str = include_str!("../history/contract-1.7.0.toml");

    /// The last language-1 contract, upgraded, declares the very service the embedded contract
    /// declares: the same pools, refusals and bounds, and the same clause values.
    #[test]
    fn the_last_language_1_contract_upgrades_to_the_embedded_service() {
        let text = upgrade(CONTRACT_1_7).unwrap();
        let upgraded = Contract::from_toml(&text, "upgraded 1.7.0").unwrap();
        let embedded = Contract::embedded();
        assert_eq!(upgraded.language, LANGUAGE);
        assert_eq!(upgraded.pools, embedded.pools);
        assert_eq!(upgraded.refusals, embedded.refusals);
        assert_eq!(upgraded.connections, embedded.connections);
        assert_eq!(upgraded.upload, embedded.upload);
        assert_eq!(
            serde_json::to_value(&upgraded.clauses().b1.value).unwrap(),
            serde_json::to_value(&embedded.clauses().b1.value).unwrap()
        );
        assert_eq!(upgraded.override_envs(), embedded.override_envs());
    }

    /// A language-2 document is refused with the reason, not rewritten again.
    #[test]
    fn a_current_document_is_not_upgraded_twice() {
        let err = upgrade(crate::EMBEDDED_TOML).unwrap_err();
        assert!(matches!(err, UpgradeError::AlreadyCurrent(2)), "{err}");
    }
}
