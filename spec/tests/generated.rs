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
