//! What the OpenAPI document tells outside validators (Schemathesis generates requests from it):
//! schemas exactly as strict as the server, so a schema-valid request is one it accepts.

use plimsoll_spec::design::{DESIGN_FORMAT, MAX_COORDINATE};
use plimsoll_spec::render::{self, hook_pattern};
use plimsoll_spec::{Contract, Design, Extents, Stage, Stitch, StitchCommand, Thread, parse_hooks};
use serde_json::{Value, json};

fn document() -> Value {
    render::openapi(Contract::embedded())
}

fn operation(path: &str, method: &str) -> Value {
    document()["paths"][path][method].clone()
}

#[test]
fn hook_pattern_accepts_what_the_parser_accepts() {
    let schema = json!({ "type": "string", "pattern": hook_pattern() });
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut values: Vec<String> = [
        "hold=fill:500",
        "fail=segment;panic=decode;alloc=2048",
        "hold = fill : 5 ;\t; alloc=+007",
        "",
        " ; ",
        "hold=fill:1234567890123456789",
        "hold=fill:+0009999999999999999999",
        // refused by both
        "alloc=18446744073709551615",
        "alloc=10000000000000000000",
        "hold=fi ll:5",
        "ho ld=fill:5",
        "alloc=1\u{b}",
        "alloc=\u{a0}1",
        "hold=fill",
        "hold=fill:",
        "fail=nowhere",
        "FAIL=decode",
        "alloc=-1",
        "alloc=1.5",
        "explode=now",
        "hold",
        "fail=decode,panic=fill",
        "hold=fill:500x",
        "fail==decode",
    ]
    .map(str::to_owned)
    .to_vec();
    values.extend(Stage::ALL.map(|s| format!("hold={s}:1;fail={s};panic={s}")));
    for value in &values {
        assert_eq!(
            validator.is_valid(&json!(value)),
            parse_hooks(value).is_ok(),
            "`{value}`"
        );
    }
}

#[test]
fn the_hook_parameter_quotes_the_contracts_grammar() {
    let contract = Contract::embedded();
    let hook = operation(&contract.api().digitize.path, "post")["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == contract.hooks().header.as_str())
        .cloned()
        .expect("the hook header is a parameter");
    let description = hook["description"].as_str().unwrap();
    assert!(
        description.contains(&contract.hooks().grammar),
        "{description}"
    );
}

fn design() -> Design {
    let st = |x, y, cmd| Stitch { x, y, cmd };
    Design {
        format: DESIGN_FORMAT.into(),
        width_mm: 20.0,
        height_mm: 10.0,
        threads: vec![Thread {
            color: "#c81e28".into(),
        }],
        extents: Extents {
            min_x: 0,
            min_y: 0,
            max_x: 200,
            max_y: 100,
        },
        stitch_count: 2,
        stitches: vec![
            st(0, 0, StitchCommand::Jump),
            st(0, 0, StitchCommand::Stitch),
            st(200, 100, StitchCommand::Stitch),
            st(200, 100, StitchCommand::End),
        ],
    }
}

#[test]
fn design_schema_states_the_servers_single_member_rules() {
    let validator = jsonschema::validator_for(&render::root_schema::<Design>()).unwrap();
    let good = serde_json::to_value(design()).unwrap();
    assert!(validator.is_valid(&good));
    let broken = |path: &str, value: Value| {
        let mut d = good.clone();
        *d.pointer_mut(path).unwrap() = value;
        d
    };
    let limit = i64::from(MAX_COORDINATE);
    for (path, value) in [
        ("/format", json!("")),
        ("/threads/0/color", json!("")),
        ("/threads/0/color", json!("#c81e2")),
        ("/threads/0/color", json!("#c81e28\n")),
        ("/threads/0/color", json!("red")),
        ("/width_mm", json!(-1.0)),
        ("/height_mm", json!(100_000.5)),
        ("/stitches/1/x", json!(limit + 1)),
        ("/stitches/1/y", json!(-limit - 1)),
        ("/extents/min_x", json!(-limit - 1)),
        ("/stitch_count", json!(-1)),
        ("/stitches/1/cmd", json!("sew")),
    ] {
        assert!(
            !validator.is_valid(&broken(path, value.clone())),
            "{path} = {value}"
        );
    }
    assert!(validator.is_valid(&broken("/threads/0/color", json!("#C81E2A"))));
    assert!(validator.is_valid(&broken("/stitches/1/x", json!(-limit))));
}

#[test]
fn digitize_takes_a_non_empty_image_with_real_examples() {
    let contract = Contract::embedded();
    let op = operation(&contract.api().digitize.path, "post");
    let content = op["requestBody"]["content"].as_object().unwrap();
    assert_eq!(content.len(), contract.api().digitize.content_types.len());
    for (media_type, media) in content {
        let schema = &media["schema"];
        assert_eq!(schema["format"], "binary");
        assert_eq!(schema["minLength"], 1);
        assert_eq!(schema["contentMediaType"], media_type.as_str());
        let uri = media["examples"]["disc"]["externalValue"].as_str().unwrap();
        assert!(
            uri.starts_with(&format!("data:{media_type};base64,")),
            "{uri}"
        );
    }
}

#[test]
fn relay_states_the_upgrade_it_needs_and_both_answers() {
    let op = operation(&Contract::embedded().api().relay.path, "get");
    let required: Vec<&str> = op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["required"] == true)
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        required,
        [
            "Connection",
            "Upgrade",
            "Sec-WebSocket-Version",
            "Sec-WebSocket-Key"
        ]
    );
    let statuses: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
    assert_eq!(statuses, ["101", "426"]);
    // The 101's tokens are compared in any letter case (rule `routes`): what WebSocket libraries
    // send (`Upgrade`, `upgrade`, `keep-alive, Upgrade`) validates, another token does not.
    let header = |name: &str| {
        jsonschema::validator_for(&op["responses"]["101"]["headers"][name]["schema"]).unwrap()
    };
    let (upgrade, connection) = (header("Upgrade"), header("Connection"));
    for ok in ["websocket", "WebSocket"] {
        assert!(upgrade.is_valid(&json!(ok)), "Upgrade: {ok}");
    }
    assert!(!upgrade.is_valid(&json!("h2c")));
    for ok in ["upgrade", "Upgrade", "keep-alive, Upgrade"] {
        assert!(connection.is_valid(&json!(ok)), "Connection: {ok}");
    }
    assert!(!connection.is_valid(&json!("close")));
}
