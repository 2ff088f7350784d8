//! The JSON report: every fact of the run, in a field order that stays the same so two runs'
//! reports diff readably.

use plimsoll_report::json;
use serde_json::Value;

use super::*;

#[test]
fn json_round_trips_with_a_stable_field_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let run = sample();
    json::write(&path, &run).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    preview("plimsoll-report.json", &text);
    let value: Value = serde_json::from_str(&text).expect("valid JSON");

    assert_eq!(value["results"][1]["verdict"], "fail");
    assert_eq!(value["results"][1]["reason"], FAIL_REASON);
    assert_eq!(value["results"][1]["observed"], run.results[1].observed);
    assert_eq!(value["results"][0]["verdict"], "pass");
    assert!(value["results"][0].get("reason").is_none());
    assert_eq!(value["results"][2]["verdict"], "skip");
    assert_eq!(value["results"][2]["reason"], SKIP_REASON);
    assert_eq!(value["results"][1]["timeline"][1]["outcome"], "timed_out");
    assert_eq!(
        value["results"][0]["timeline"][4]["run_start_ms"],
        Value::Null
    );
    assert_eq!(value["manifest"]["target"], run.manifest.target);
    assert_eq!(value["manifest"]["seed"], 42);
    // Adopted and refused differences, separately and structured, besides the combined list.
    assert_eq!(value["manifest"]["adopted"][0]["env"], "QUEUE_CAPACITY");
    assert_eq!(value["manifest"]["adopted"][0]["difference"]["theirs"], 2);
    assert_eq!(
        value["manifest"]["refused"][0]["difference"]["path"],
        "pools.digitize.cancellation.stop_within_ms"
    );
    assert!(
        value["manifest"]["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("not an overridable field")
    );
    assert_eq!(
        value["manifest"]["differences"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        value["manifest"]["effective"]["pools"]["digitize"]["workers"],
        2
    );

    // Declaration order, every time: diffs between two runs stay readable.
    let order = [
        "\"manifest\"",
        "\"tool\"",
        "\"target\"",
        "\"started_unix_ms\"",
        "\"results\"",
        "\"id\"",
        "\"clause\"",
        "\"title\"",
        "\"expected\"",
        "\"observed\"",
        "\"verdict\"",
        "\"duration_ms\"",
        "\"evidence\"",
        "\"timeline\"",
    ];
    // Manifest keys are looked for before `"results"`, result keys after it (the manifest's
    // adopted list has a `clause` of its own).
    let results_at = text.find("\"results\"").expect("results");
    let results_key = order.iter().position(|k| *k == "\"results\"").unwrap();
    let positions: Vec<usize> = order
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let from = if i > results_key { results_at } else { 0 };
            from + text[from..]
                .find(k)
                .unwrap_or_else(|| panic!("{k} missing"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(text.contains("\n  \"manifest\": {"), "pretty-printed");
    assert_eq!(json::render(&run).unwrap(), text);
}

/// docs/gate.md's table of the JSON report names every member the report can have, so
/// an implementer's script written from the docs reads every member there is.
#[test]
fn the_documented_json_members_are_the_reports() {
    use plimsoll_conformance::verdict::figure::{Delta, Figure, Unit};
    use plimsoll_conformance::verdict::waiver::{Waiver, WaiverNote, WaiverState};

    let mut run = sample();
    run.manifest.incomplete = Some("stopped by SIGTERM".into());
    run.manifest.fault = Some(plimsoll_fault::Adjustments::new(
        &"latency:latency=20".parse().unwrap(),
        plimsoll_spec::Contract::embedded(),
    ));
    let figure = Figure::lower("refusal latency", Unit::Ms, vec![1.0, 2.0]);
    run.results[0].deltas = vec![Delta::between(&figure, &figure).unwrap()];
    run.results[0].figures = vec![figure];
    run.results[0].waiver = Some(WaiverNote {
        waiver: Waiver {
            check: plimsoll_spec::CheckId::T1,
            reason: "r".into(),
            link: None,
            expires: time::Date::MIN,
        },
        state: WaiverState::Unneeded,
    });
    let value: Value = serde_json::to_value(&run).unwrap();
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gate.md"),
    )
    .unwrap();
    let keys = |v: &Value, prefix: &str| -> Vec<String> {
        v.as_object()
            .unwrap()
            .keys()
            .map(|k| format!("`{prefix}{k}`"))
            .collect()
    };
    let mut members = keys(&value["manifest"], "manifest.");
    for r in value["results"].as_array().unwrap() {
        members.extend(keys(r, "results[]."));
    }
    let undocumented: Vec<&String> = members
        .iter()
        .filter(|m| !docs.contains(m.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/gate.md: {undocumented:?}"
    );
    assert_eq!(value["manifest"]["report_schema"], 2);
}
