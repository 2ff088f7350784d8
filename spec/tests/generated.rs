//! The checked-in generated files are exactly what the contract renders, and what they show is
//! valid against the schemas they ship.

use std::path::PathBuf;

use plimsoll_spec::render::{self, example_problem};
use plimsoll_spec::{Contract, ErrorCode};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn generated_files_are_fresh() {
    let contract = Contract::from_file(&root().join("spec/contract.toml")).unwrap();
    let stale = render::stale(&contract, &root());
    assert!(
        stale.is_empty(),
        "stale generated files: {stale:?}\nregenerate with `cargo run -p plimsoll -- docs` and commit them"
    );
}

#[test]
fn rendering_is_deterministic() {
    let c = Contract::embedded();
    assert_eq!(render::outputs(c), render::outputs(c));
}

#[test]
fn changing_a_value_changes_docs_and_openapi() {
    let (scaled, _) = Contract::embedded()
        .with_overrides(|k| (k == "WORKER_POOL_SIZE").then(|| "6".to_owned()))
        .unwrap();
    let before = render::outputs(Contract::embedded());
    let after = render::outputs(&scaled);
    let changed: Vec<_> = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| a.contents != b.contents)
        .map(|(a, _)| a.path)
        .collect();
    assert_eq!(changed, ["docs/concurrency.md", "spec/openapi.json"]);
    assert!(after[0].contents.contains("At most 6 digitize jobs"));
}

fn problem_validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("spec/schemas/problem.schema.json")).unwrap(),
    )
    .unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

#[test]
fn problem_schema_validates_the_example_bodies_in_the_docs() {
    let validator = problem_validator();
    let md = std::fs::read_to_string(root().join("docs/concurrency.md")).unwrap();
    let mut bodies = 0;
    for block in md.split("```http\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let json = &block[block.find('{').unwrap()..];
        let body: serde_json::Value = serde_json::from_str(json).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{body}: {errors:?}");
        bodies += 1;
    }
    // Every code that belongs to a clause is shown once in its clause's section.
    assert_eq!(bodies, ErrorCode::ALL.len());
}

#[test]
fn problem_schema_allows_unknown_members_and_requires_the_seed_members() {
    let validator = problem_validator();
    let mut body = serde_json::to_value(example_problem(
        Contract::embedded(),
        ErrorCode::StageFailed,
    ))
    .unwrap();
    body["vendor_detail"] = "kept".into();
    assert!(validator.is_valid(&body));
    for member in ["request_id", "code", "status", "error"] {
        let mut broken = body.clone();
        broken.as_object_mut().unwrap().remove(member);
        assert!(
            !validator.is_valid(&broken),
            "schema accepted a body without {member}"
        );
    }
    body["code"] = "made_up".into();
    assert!(!validator.is_valid(&body));
}

#[test]
fn openapi_lists_every_documented_status_per_operation() {
    let doc = render::openapi(Contract::embedded());
    let statuses = |path: &str, method: &str| -> Vec<String> {
        doc["paths"][path][method]["responses"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(
        statuses("/v1/digitize", "post"),
        ["200", "400", "408", "503", "504"]
    );
    assert_eq!(
        statuses("/v1/export", "post"),
        ["200", "400", "408", "503", "504"]
    );
    let r503 = &doc["paths"]["/v1/digitize"]["post"]["responses"]["503"];
    assert!(r503["headers"]["Retry-After"].is_object());
    assert_eq!(
        doc["paths"]["/v1/digitize"]["post"]["x-plimsoll"]["declaration"]["workers"],
        4
    );
}

#[test]
fn example_bodies_snapshot() {
    let c = Contract::embedded();
    let all: Vec<_> = ErrorCode::ALL
        .iter()
        .map(|&code| example_problem(c, code))
        .collect();
    insta::assert_json_snapshot!(all);
}

#[test]
fn summary_table_snapshot() {
    let md = render::concurrency_md(Contract::embedded());
    let start = md.find("## Summary").unwrap();
    let end = md.find("## Throughput").unwrap();
    insta::assert_snapshot!(&md[start..end]);
}

/// `docs/implementing.md`'s checklist cites the implementation rules as
/// ``[`id`](concurrency.md#topic-anchor)``: every citation names a rule of the contract and the
/// heading its topic renders under, and every rule is cited, so the checklist never drifts from
/// the contract.
#[test]
fn the_implementers_checklist_cites_every_rule_at_its_heading() {
    let c = Contract::embedded();
    let md = std::fs::read_to_string(root().join("docs/concurrency.md")).unwrap();
    let doc = std::fs::read_to_string(root().join("docs/implementing.md")).unwrap();
    let mut cited = std::collections::BTreeSet::new();
    for link in doc.split("[`").skip(1) {
        let Some((id, rest)) = link.split_once("`](concurrency.md#") else {
            continue;
        };
        let anchor = rest.split(')').next().unwrap();
        let Some(rule) = c.implementation.iter().find(|r| r.id == id) else {
            continue;
        };
        let heading = format!("### {}\n", rule.topic.title());
        assert!(md.contains(&heading), "no heading {heading:?}");
        let slug: String = rule
            .topic
            .title()
            .to_lowercase()
            .chars()
            .filter_map(|ch| match ch {
                'a'..='z' | '0'..='9' | '-' => Some(ch),
                ' ' => Some('-'),
                _ => None,
            })
            .collect();
        assert_eq!(
            anchor, slug,
            "`{id}` links to #{anchor}, its topic is #{slug}"
        );
        cited.insert(id.to_owned());
    }
    let missing: Vec<&str> = c
        .implementation
        .iter()
        .map(|r| r.id.as_str())
        .filter(|id| !cited.contains(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "rules docs/implementing.md never cites: {missing:?}"
    );
}

/// The relay frames are described twice, as standalone schemas and inside the OpenAPI document:
/// the two must require the same members (an implementer once found `headers` and `body`
/// required in one and optional in the other).
#[test]
fn the_relay_frame_schemas_agree_with_the_openapi_document() {
    let openapi = render::openapi(Contract::embedded());
    let relay = openapi["paths"]
        .as_object()
        .unwrap()
        .values()
        .find_map(|item| {
            item["get"]
                .get("x-plimsoll")
                .filter(|x| x.get("frames").is_some())
        })
        .expect("the relay operation carries x-plimsoll");
    let required = |schema: &serde_json::Value| {
        let mut names: Vec<String> = schema["required"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let request = render::received_schema::<plimsoll_spec::relay::RelayRequest>();
    assert_eq!(required(&request), required(&relay["frames"]["request"]));
    assert!(!required(&request).contains(&"headers".to_owned()));
}

/// Every contract in the repository, as TOML and converted to JSON, validates against the
/// language's schema, and the schema agrees with the loader: a planted mistake fails both.
#[test]
fn every_contract_validates_against_the_language_schema() {
    let schema = render::contract_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let upgraded = plimsoll_spec::upgrade::upgrade(include_str!("../history/contract-1.7.0.toml"))
        .expect("the last language-1 contract upgrades");
    let documents = [
        (
            "spec/contract.toml",
            plimsoll_spec::EMBEDDED_TOML.to_owned(),
        ),
        ("spec/history/contract-1.7.0.toml, upgraded", upgraded),
        (
            "examples/nginx/contract.toml",
            include_str!("../../examples/nginx/contract.toml").to_owned(),
        ),
        (
            "examples/rust-service/contract.toml",
            include_str!("../../examples/rust-service/contract.toml").to_owned(),
        ),
    ];
    for (name, text) in &documents {
        let doc: serde_json::Value = toml::from_str(text).unwrap();
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        Contract::from_toml(text, name).unwrap();
    }
    // Fields the rules call optional are optional in the schema too.
    let mut sparse: serde_json::Value = toml::from_str(plimsoll_spec::EMBEDDED_TOML).unwrap();
    sparse.as_object_mut().unwrap().remove("load");
    for e in sparse["errors"].as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("retry_after");
    }
    assert!(validator.is_valid(&sparse));
    // A planted mistake: a pool's workers as a word.
    let planted = plimsoll_spec::EMBEDDED_TOML.replacen("workers = 4", "workers = \"four\"", 1);
    let doc: serde_json::Value = toml::from_str(&planted).unwrap();
    assert!(
        !validator.is_valid(&doc),
        "the schema takes workers = \"four\""
    );
    assert!(Contract::from_toml(&planted, "planted").is_err());
}

/// Where the language's schema and the model (serde's deserialize view) disagree on whether a
/// member may be left out. Every member of `document` (a valid contract as JSON) is removed in
/// turn, once per path with array indices as `[]`, and the document without it is judged by
/// `schema` and by `model_accepts`: a member one of them lets go and the other requires is named
/// with who requires it.
fn required_disagreements(
    schema: &serde_json::Value,
    document: &serde_json::Value,
    model_accepts: impl Fn(&serde_json::Value) -> bool,
) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).unwrap();
    assert!(
        validator.is_valid(document) && model_accepts(document),
        "the document is valid under both, so a removal is what either refuses"
    );
    let mut members = Vec::new();
    member_paths(document, &mut Vec::new(), &mut members);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for path in members {
        let pattern = path
            .iter()
            .map(|seg| match seg {
                Seg::Key(k) => format!(".{k}"),
                Seg::Index(_) => "[]".to_owned(),
            })
            .collect::<String>();
        let pattern = pattern.trim_start_matches('.').to_owned();
        if !seen.insert(pattern.clone()) {
            continue;
        }
        let mut without = document.clone();
        remove(&mut without, &path);
        match (validator.is_valid(&without), model_accepts(&without)) {
            (false, true) => out.push(format!(
                "{pattern}: the schema requires it, the model does not"
            )),
            (true, false) => out.push(format!(
                "{pattern}: the model requires it, the schema does not"
            )),
            _ => {}
        }
    }
    out
}

/// One step of a path into a JSON document.
#[derive(Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Every object member of `value`, as a path from the root, parents before children.
fn member_paths(value: &serde_json::Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                at.push(Seg::Key(key.clone()));
                out.push(at.clone());
                member_paths(child, at, out);
                at.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                at.push(Seg::Index(i));
                member_paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

/// Removes the member at `path` (which ends in a key) from `value`.
fn remove(value: &mut serde_json::Value, path: &[Seg]) {
    let (last, parents) = path.split_last().expect("a member's path is not empty");
    let mut node = value;
    for seg in parents {
        node = match seg {
            Seg::Key(k) => &mut node[k.as_str()],
            Seg::Index(i) => &mut node[*i],
        };
    }
    if let Seg::Key(k) = last {
        node.as_object_mut().unwrap().remove(k);
    }
}

/// The contract's schema and its model agree, member by member, on what may be left out: a
/// contract a team writes from the schema loads, and one the loader takes the schema takes.
#[test]
fn the_schema_requires_what_the_model_requires() {
    let document: serde_json::Value = toml::from_str(plimsoll_spec::EMBEDDED_TOML).unwrap();
    let model = |doc: &serde_json::Value| serde_json::from_value::<Contract>(doc.clone()).is_ok();
    assert!(
        model(&document),
        "the embedded contract loads from its JSON form"
    );
    let disagreements = required_disagreements(&render::contract_schema(), &document, model);
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

#[test]
fn a_schema_requiring_what_the_model_does_not_is_caught() {
    let document: serde_json::Value = toml::from_str(plimsoll_spec::EMBEDDED_TOML).unwrap();
    let model = |doc: &serde_json::Value| serde_json::from_value::<Contract>(doc.clone()).is_ok();
    // The planted schema requires `retry_after`, so the document gives every error one: the
    // document is valid under both, and only the removals can tell them apart.
    let mut document = document;
    for error in document["errors"].as_array_mut().unwrap() {
        error
            .as_object_mut()
            .unwrap()
            .entry("retry_after")
            .or_insert(false.into());
    }
    let mut planted = render::contract_schema();
    let required = planted["$defs"]["ErrorSpec"]["required"]
        .as_array_mut()
        .unwrap();
    required.push("retry_after".into());
    required.retain(|name| name != "code");
    let disagreements = required_disagreements(&planted, &document, model);
    assert_eq!(
        disagreements,
        [
            "errors[].code: the model requires it, the schema does not",
            "errors[].retry_after: the schema requires it, the model does not",
        ],
        "{disagreements:#?}"
    );
}

/// The words by which a rule calls a field optional.
const OPTIONAL: [&str; 3] = ["optional", "may be left out", "may be omitted"];

/// The fields `rule` (an implementation rule's text) calls optional: backticked names in a
/// phrase of it that says "optional", "may be left out" or "may be omitted" (see
/// `optional_scopes`), resolved against `schema`: a path from the root (`errors[].retry_after`)
/// or a member name of some object (`overrides`). Each comes with the schema objects that
/// require it.
fn optional_fields_required(schema: &serde_json::Value, rule: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for scope in optional_scopes(rule) {
        for name in scope.split('`').skip(1).step_by(2) {
            if let Some(requiring) = requiring(schema, name) {
                out.push((name.to_owned(), requiring));
            }
        }
    }
    out
}

/// The phrases of `text` (cut at `.` and `;` outside parentheses and code spans) that call
/// something optional: a phrase whose own words (its parentheses left out) say so, with its
/// parentheses, which list what it means; otherwise, the same search inside each of its
/// parentheses (so "`hooks.grammar`: …; a number with an optional `+`" calls only `+` optional).
fn optional_scopes(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for phrase in split_outside(text, &['.', ';']) {
        let (outer, groups) = parenthesised(&phrase);
        if OPTIONAL.iter().any(|w| outer.to_lowercase().contains(w)) {
            out.push(phrase);
        } else {
            for group in groups {
                out.extend(optional_scopes(&group));
            }
        }
    }
    out
}

/// `text` cut after each of `at` outside parentheses and code spans.
fn split_outside(text: &str, at: &[char]) -> Vec<String> {
    let (mut out, mut current, mut depth, mut code) = (Vec::new(), String::new(), 0i32, false);
    for ch in text.chars() {
        current.push(ch);
        match ch {
            '`' => code = !code,
            '(' if !code => depth += 1,
            ')' if !code => depth -= 1,
            _ if !code && depth <= 0 && at.contains(&ch) => out.push(std::mem::take(&mut current)),
            _ => {}
        }
    }
    out.push(current);
    out
}

/// `phrase` without its top-level parentheses, and the contents of each.
fn parenthesised(phrase: &str) -> (String, Vec<String>) {
    let (mut outer, mut groups, mut depth, mut code) = (String::new(), Vec::new(), 0i32, false);
    let mut group = String::new();
    for ch in phrase.chars() {
        if ch == '`' {
            code = !code;
        }
        match ch {
            '(' if !code => {
                if depth > 0 {
                    group.push(ch);
                }
                depth += 1;
            }
            ')' if !code && depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    groups.push(std::mem::take(&mut group));
                } else {
                    group.push(ch);
                }
            }
            _ if depth > 0 => group.push(ch),
            _ => outer.push(ch),
        }
    }
    (outer, groups)
}

/// The object schema `node` stands for: itself, its `$ref`'s target, or the first alternative
/// of an `anyOf`/`oneOf`/`allOf` that has members.
fn object_schema<'a>(
    schema: &'a serde_json::Value,
    node: &'a serde_json::Value,
) -> &'a serde_json::Value {
    if let Some(target) = node["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        return object_schema(schema, &schema["$defs"][target]);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(alt) = node[key].as_array().and_then(|alts| {
            alts.iter()
                .map(|a| object_schema(schema, a))
                .find(|a| a.get("properties").is_some())
        }) {
            return alt;
        }
    }
    node
}

/// `None` when `name` is no field of `schema`; otherwise the objects that require it (empty:
/// it is optional wherever it is a member).
fn requiring(schema: &serde_json::Value, name: &str) -> Option<Vec<String>> {
    let is_required = |object: &serde_json::Value, member: &str| {
        object["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|m| m == member))
    };
    if name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        let mut objects: Vec<(String, &serde_json::Value)> = vec![("(root)".to_owned(), schema)];
        if let Some(defs) = schema["$defs"].as_object() {
            objects.extend(defs.iter().map(|(k, v)| (k.clone(), v)));
        }
        let holding: Vec<_> = objects
            .into_iter()
            .filter(|(_, o)| o["properties"].get(name).is_some())
            .collect();
        if holding.is_empty() {
            return None;
        }
        return Some(
            holding
                .into_iter()
                .filter(|(_, o)| is_required(o, name))
                .map(|(k, _)| k)
                .collect(),
        );
    }
    let mut node = schema;
    let mut parent = schema;
    let mut member = "";
    for seg in name.split('.') {
        let (key, items) = match seg.strip_suffix("[]") {
            Some(key) => (key, true),
            None => (seg, false),
        };
        parent = object_schema(schema, node);
        member = key;
        node = parent["properties"].get(key)?;
        if items {
            node = node.get("items")?;
        }
    }
    Some(if is_required(parent, member) {
        vec![name.to_owned()]
    } else {
        Vec::new()
    })
}

/// Every field an implementation rule calls optional is optional in the language's schema (an
/// implementer once found `load` and `errors[].retry_after` required there, while the rules
/// said a contract endpoint may leave them out).
#[test]
fn the_fields_the_rules_call_optional_are_optional_in_the_schema() {
    let schema = render::contract_schema();
    let mut named = std::collections::BTreeSet::new();
    for rule in &Contract::embedded().implementation {
        for (field, requiring) in optional_fields_required(&schema, &rule.rule) {
            assert!(
                requiring.is_empty(),
                "rule `{}` calls `{field}` optional; the schema requires it in {requiring:?}",
                rule.id
            );
            named.insert(field);
        }
    }
    for field in ["load", "errors[].retry_after", "overrides"] {
        assert!(
            named.contains(field),
            "no rule is read as calling `{field}` optional: {named:?}"
        );
    }
}

#[test]
fn a_schema_requiring_a_field_a_rule_calls_optional_is_caught() {
    let mut planted = render::contract_schema();
    planted["required"]
        .as_array_mut()
        .unwrap()
        .push("load".into());
    let rule = "The body may leave fields out: `load` may be left out (the checker uses its own); \
                `errors[].retry_after` is optional. Every other field, `language` too, is \
                required (`hooks.grammar`: names case-sensitive; a number with an optional `+`).";
    assert_eq!(
        optional_fields_required(&planted, rule),
        [
            ("load".to_owned(), vec!["(root)".to_owned()]),
            ("errors[].retry_after".to_owned(), vec![]),
        ]
    );
}
