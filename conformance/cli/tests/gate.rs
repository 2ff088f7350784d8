//! `ci/gate.sh`'s check step, the whole suite through the real binary against the reference
//! server in another process: the suite's one clean run against the reference server.

#[allow(
    dead_code,
    reason = "the shared helpers; this binary runs the gate and nothing else of them"
)]
mod common;

use std::path::PathBuf;

use common::gate::{assert_reports, gate_reporting_to, serve_scaled};

/// The gate's first step: the whole suite, as many trials as a user's run makes, against the
/// reference server in another process, with the values `plimsoll check` gives its embedded
/// server. This is the suite's one clean run against the reference server (the mutation matrix's
/// reference row): with `PLIMSOLL_CLEAN_RUN_REPORTS=DIR` its reports (JSON, JUnit, HTML) stay in
/// DIR, where `.ci/run` validates the JUnit file and reads the verdicts. It generates no
/// load, so it runs beside the other tests (nextest's `timing` group), apart from the load
/// tests' gate runs (`tests/load.rs`).
#[test]
fn the_gate_checks_a_conforming_server_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let (_served, url) = serve_scaled(dir.path(), &[]);
    let reports = match std::env::var_os("PLIMSOLL_CLEAN_RUN_REPORTS") {
        Some(kept) => PathBuf::from(kept),
        None => dir.path().join("reports"),
    };
    let (status, reports) = gate_reporting_to(&url, dir.path(), "check", reports);
    assert!(status.success(), "gate failed: {status}");
    assert_reports(&reports, &["check"]);
    let junit = std::fs::read_to_string(reports.join("check.junit.xml")).unwrap();
    assert!(!junit.contains("<failure"), "{junit}");
    // Only what the digitize contract declares nothing for (T4: no rate limit) is skipped, as
    // not applicable.
    let unjudged: Vec<String> = plimsoll_conformance::checks::REGISTRY
        .iter()
        .filter(|c| (c.applies)(plimsoll_spec::Contract::embedded()).is_err())
        .map(|c| c.id.to_string())
        .collect();
    assert_eq!(junit.matches("<skipped").count(), unjudged.len(), "{junit}");
    // Every check ran and passed but those, T2 among them: the queue the values give it is
    // ordered.
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(reports.join("check.json")).unwrap()).unwrap();
    let results = report["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().filter_map(|r| r["id"].as_str()).collect();
    let all: Vec<String> = plimsoll_conformance::checks::REGISTRY
        .iter()
        .map(|c| c.id.to_string())
        .collect();
    assert_eq!(ids, all, "every check ran, in run order");
    for r in results {
        let id = r["id"].as_str().unwrap().to_owned();
        let verdict = if unjudged.contains(&id) {
            "not_applicable"
        } else {
            "pass"
        };
        assert_eq!(r["verdict"], verdict, "{r}");
    }
    // The report is what its published schema says (`spec/schemas/report.schema.json`).
    let schema = plimsoll_conformance::verdict::report_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let t2 = results.iter().find(|r| r["id"] == "T2").unwrap();
    assert!(
        !t2["observed"]
            .as_str()
            .unwrap()
            .starts_with("not applicable"),
        "{t2}"
    );
}
