//! `docs/language.md`: the contract language's reference, rendered from its JSON Schema
//! (`spec/schemas/contract.schema.json`), so the words a team reads to write its own contract are
//! the types the loader reads it with: every field with its type, whether it may be left out, and
//! its doc comment.

use std::fmt::Write as _;

use serde_json::Value;

/// The reference of the language whose schema is `schema`.
pub fn language_md(schema: &Value, language: u32) -> String {
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
