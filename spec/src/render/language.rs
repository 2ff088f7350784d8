//! `docs/language.md`: the contract language's reference, rendered from its JSON Schema
//! (`spec/schemas/contract.schema.json`), so the words a team reads to write its own contract are
//! the types the loader reads it with: every field with its type, whether it may be left out, and
//! its doc comment.

use std::fmt::Write as _;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::ClauseId;
use crate::model::{Contract, judged_by};

/// The reference of the language whose schema is `schema`, with the clauses of `contract` (the
/// ids and what each judges are the language's; the digitize contract shows them).
pub fn language_md(schema: &Value, contract: &Contract) -> String {
    let language = contract.language;
    let mut md = String::new();
    let _ = writeln!(md, "# Contract language {language}: the reference\n");
    let _ = writeln!(
        md,
        "<!-- Generated from spec/schemas/contract.schema.json by `plimsoll docs`. Do not edit. -->\n"
    );
    let _ = writeln!(
        md,
        "Every field a contract document may hold, as the loader reads it: its type, whether it may \
         be left out (a field with a default, or an optional one), and what it means. Rendered from \
         the language's JSON Schema, [`spec/schemas/contract.schema.json`](../spec/schemas/contract.schema.json), \
         which editors can use to complete and check a document. The rules beyond types (ranges, \
         a bounded queue naming its refusal, placeholders that resolve) are the loader's, and each \
         broken one is reported with its field and line. The digitize service's contract, \
         [`spec/contract.toml`](../spec/contract.toml), is a worked example; \
         [`concurrency.md`](concurrency.md) is what it renders to.\n"
    );
    let _ = writeln!(md, "## The document\n");
    fields(&mut md, schema);
    clauses(&mut md, schema, contract);
    let _ = writeln!(md, "## Types\n");
    if let Some(defs) = schema["$defs"].as_object() {
        for (name, def) in defs {
            let _ = writeln!(md, "### {name}\n");
            if let Some(text) = def["description"].as_str() {
                let _ = writeln!(md, "{}\n", one_line(text));
            }
            if def.get("properties").is_some() {
                fields(&mut md, def);
            } else {
                alternatives(&mut md, def);
            }
        }
    }
    md
}

/// `## Clauses`: every clause id, what it judges of the service's declaration (a field per
/// pool, refusal or section, `NAME` standing for any) and the values of its own. A clause
/// `contract` does not write (T4: the digitize service has no rate limit) is listed by the
/// language's name for it, its fields read from the schema of the table it judges.
fn clauses(md: &mut String, schema: &Value, contract: &Contract) {
    let _ = writeln!(
        md,
        "## Clauses\n\nEvery clause id of the language, the fields of the service's declaration it \
         judges (`NAME`: any pool or refusal; a pool without routes is fed otherwise, as the relay's \
         is) and the values of its own under `[clauses.ID.value]`. A clause whose fields a contract \
         does not declare has nothing to judge: its check reports it not applicable, with why.\n"
    );
    let doc = serde_json::to_value(contract).expect("a contract serializes");
    let mut judged: BTreeMap<ClauseId, BTreeSet<String>> = BTreeMap::new();
    for (name, pool) in &contract.pools {
        let relay = pool.routes.is_empty();
        let mut leaves = Vec::new();
        leaves_of(&doc["pools"][name], format!("pools.{name}"), &mut leaves);
        for path in leaves {
            if let Some(id) = judged_by(&path, relay) {
                let generic = path.replacen(&format!("pools.{name}."), "pools.NAME.", 1);
                let generic = if relay {
                    format!("{generic} (no routes)")
                } else {
                    generic
                };
                judged.entry(id).or_default().insert(generic);
            }
        }
    }
    for section in ["refusals", "connections", "upload"] {
        let mut leaves = Vec::new();
        leaves_of(&doc[section], section.to_owned(), &mut leaves);
        for path in leaves {
            if let Some(id) = judged_by(&path, false) {
                let parts: Vec<&str> = path.split('.').collect();
                let generic = match parts.as_slice() {
                    ["refusals", _, rest @ ..] => format!("refusals.NAME.{}", rest.join(".")),
                    _ => path.clone(),
                };
                judged.entry(id).or_default().insert(generic);
            }
        }
    }
    let _ = writeln!(
        md,
        "| clause | title | judges of the service | its own values |"
    );
    let _ = writeln!(md, "|---|---|---|---|");
    for c in contract.clause_list() {
        let fields: Vec<String> = judged
            .get(&c.id)
            .into_iter()
            .flatten()
            .map(|f| match f.strip_suffix(" (no routes)") {
                Some(path) => format!("`{path}` (no routes)"),
                None => format!("`{f}`"),
            })
            .collect();
        let own: Vec<String> = c.value.keys().map(|k| format!("`{k}`")).collect();
        let dash = |v: Vec<String>| {
            if v.is_empty() {
                "—".to_owned()
            } else {
                v.join(", ")
            }
        };
        let _ = writeln!(
            md,
            "| [{id}](concurrency.md#{anchor}) | {} | {} | {} |",
            cell(c.title),
            dash(fields),
            dash(own),
            id = c.id,
            anchor = super::markdown::anchor(&c),
        );
    }
    unwritten_clauses(md, schema, contract);
    md.push('\n');
}

/// The table's rows for the clauses `contract` does not write, by the language's name for
/// each, with the fields of a rate limit, a queue or a refusal it judges (read from the
/// schema).
fn unwritten_clauses(md: &mut String, schema: &Value, contract: &Contract) {
    let written: BTreeSet<ClauseId> = contract.clause_list().iter().map(|c| c.id).collect();
    let fields_of = |def: &str, at: &str| -> Vec<String> {
        schema["$defs"][def]["properties"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.keys())
            .map(|k| format!("{at}.{k}"))
            .collect()
    };
    let limit_fields = [
        fields_of("RateLimit", "rate_limits.NAME"),
        fields_of("Queue", "pools.NAME.queue"),
        fields_of("Refusal", "refusals.NAME"),
    ]
    .concat();
    for id in ClauseId::ALL.into_iter().filter(|id| !written.contains(id)) {
        let fields: Vec<String> = limit_fields
            .iter()
            .filter(|f| judged_by(f, false) == Some(id))
            .map(|f| format!("`{f}`"))
            .collect();
        let _ = writeln!(
            md,
            "| {id} | {} | {} | — |",
            cell(id.name()),
            fields.join(", ")
        );
    }
}

/// Every scalar under `value` with its dotted path, the overrides left out (they name fields,
/// they are none).
fn leaves_of(value: &Value, path: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter().filter(|(k, _)| k.as_str() != "overrides") {
                leaves_of(v, format!("{path}.{k}"), out);
            }
        }
        _ => out.push(path),
    }
}

/// An object's fields: one row each, with its type, whether it may be left out, and its meaning.
fn fields(md: &mut String, object: &Value) {
    let required: Vec<&str> = object["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let _ = writeln!(md, "| field | type | may be left out | meaning |");
    let _ = writeln!(md, "|---|---|---|---|");
    for (name, field) in object["properties"].as_object().into_iter().flatten() {
        let optional = if required.contains(&name.as_str()) {
            "no"
        } else {
            "yes"
        };
        let meaning = field["description"]
            .as_str()
            .map(one_line)
            .unwrap_or_default();
        let _ = writeln!(
            md,
            "| `{name}` | {} | {optional} | {} |",
            cell(&ty(field)),
            cell(&meaning)
        );
    }
    md.push('\n');
}

/// A type that is one of several values or shapes: each with its meaning.
fn alternatives(md: &mut String, def: &Value) {
    let options: Vec<&Value> = ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| def[*k].as_array())
        .flatten()
        .collect();
    if options.is_empty() {
        let _ = writeln!(md, "{}\n", ty(def));
        return;
    }
    for option in options {
        let meaning = option["description"].as_str().map(one_line);
        match meaning {
            Some(meaning) => {
                let _ = writeln!(md, "- {}: {meaning}", ty(option));
            }
            None => {
                let _ = writeln!(md, "- {}", ty(option));
            }
        }
    }
    md.push('\n');
}

/// A schema's type in words: a link for a named type, the value for a constant, and the shape
/// of arrays, tables and optional values.
fn ty(v: &Value) -> String {
    if let Some(target) = v["$ref"].as_str() {
        let name = target.rsplit('/').next().unwrap_or(target);
        return format!("[`{name}`](#{})", name.to_ascii_lowercase());
    }
    if let Some(c) = v.get("const") {
        return format!("`{}`", scalar(c));
    }
    if let Some(values) = v["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|x| format!("`{}`", scalar(x))).collect();
        return format!("one of {}", values.join(", "));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = v[key].as_array() {
            let (null, rest): (Vec<&Value>, Vec<&Value>) =
                options.iter().partition(|o| o["type"] == "null");
            let words: Vec<String> = rest.iter().map(|o| ty(o)).collect();
            let words = words.join(" or ");
            return if null.is_empty() {
                words
            } else {
                format!("{words}, optional")
            };
        }
    }
    match v["type"].as_str() {
        Some("array") => format!("array of {}", ty(&v["items"])),
        Some("object") if v["additionalProperties"].is_object() => {
            format!("table of {} by name", ty(&v["additionalProperties"]))
        }
        Some("integer") if v["minimum"] == 0 => "integer ≥ 0".into(),
        Some(t) => t.into(),
        None => match v["type"].as_array() {
            Some(types) => types
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" or "),
            None => "any".into(),
        },
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A doc comment on one line, its intra-doc links (`` [`Param::parse`] ``) as plain code.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("[`", "`")
        .replace("`]", "`")
}

/// Text safe inside one table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}
