//! A refusal's hint and body shape: each form of each reads as itself, and a broken one is
//! refused naming the refusal.

use plimsoll_spec::Contract;
use plimsoll_spec::model::{Hint, RefusalBody};

/// A service contract of one pool whose refusal `busy` is `refusal` (TOML lines).
fn contract(refusal: &str) -> Result<Contract, String> {
    let text = format!(
        r#"language = 2

[contract]
name = "shapes"
title = "Shapes"
version = "1.0.0"
summary = "One request at a time, the next refused."

[pools.one]
title = "One"
routes = [{{ method = "GET", path = "/one" }}]
workers = 1
queue = {{ capacity = 0, order = "unordered" }}
refusal = "busy"
hold = {{ request = {{ method = "GET", path = "/one" }}, at_least_ms = 500 }}

[refusals.busy]
{refusal}

[tolerances]
refusal_latency_ms = 100
timeout_late_ms = 300
retry_after_jitter_ms = 150
metrics_poll_interval_ms = 10
trials = 3
"#
    );
    Contract::from_toml(&text, "shapes.toml").map_err(|e| e.to_string())
}

fn hint(refusal: &str) -> Hint {
    contract(refusal).unwrap().refusals["busy"]
        .hint
        .clone()
        .unwrap()
}

fn body(refusal: &str) -> RefusalBody {
    contract(refusal).unwrap().refusals["busy"]
        .body
        .clone()
        .unwrap()
}

#[test]
fn each_form_of_hint_reads_as_itself() {
    let constant = hint("status = 429\nhint = { header = \"Retry-After\", seconds = 2 }");
    assert!(
        matches!(&constant, Hint::Constant(h) if h.seconds == 2),
        "{constant:?}"
    );
    let range =
        hint("status = 429\nhint = { header = \"Retry-After\", min_seconds = 1, max_seconds = 5 }");
    assert!(
        matches!(&range, Hint::Range(h) if h.min_seconds == 1 && h.max_seconds == 5),
        "{range:?}"
    );
    let estimated = hint(
        "status = 503\nhint = { header = \"Retry-After\", format = \"delay-seconds\", estimator \
         = \"p50\", window_samples = 10, min_seconds = 1, empty_window_seconds = 1, max = \
         \"pool timeout\" }",
    );
    assert!(
        matches!(&estimated, Hint::Estimated(h) if h.min_seconds == 1),
        "{estimated:?}"
    );
    // A range's fields mixed with a constant's are neither form.
    let mixed =
        contract("status = 429\nhint = { header = \"Retry-After\", seconds = 1, max_seconds = 5 }");
    assert!(mixed.is_err(), "{mixed:?}");
}

#[test]
fn a_range_whose_min_is_above_its_max_is_refused_naming_the_refusal() {
    let err = contract(
        "status = 429\nhint = { header = \"Retry-After\", min_seconds = 5, max_seconds = 1 }",
    )
    .unwrap_err();
    assert!(err.contains("refusals.busy.hint"), "{err}");
    assert!(
        err.contains("`min_seconds` 5 is above `max_seconds` 1"),
        "{err}"
    );
}

#[test]
fn each_form_of_body_reads_as_itself_and_judges_a_body() {
    let json = body("status = 429\nbody = { pointer = \"/error\", value = \"too_many\" }");
    assert!(
        matches!(&json, RefusalBody::Json(c) if c.pointer == "/error"),
        "{json:?}"
    );
    assert_eq!(json.mismatch(br#"{"error":"too_many"}"#), None);
    let wrong = json.mismatch(br#"{"error":"slow down"}"#).unwrap();
    assert!(wrong.contains("\"slow down\""), "{wrong}");
    assert!(wrong.contains("\"too_many\""), "{wrong}");
    let html = json.mismatch(b"<html>busy</html>").unwrap();
    assert!(html.contains("not JSON (\"<html>busy</html>\")"), "{html}");

    let text = body("status = 503\nbody = { text = \"busy, try later\\n\" }");
    assert!(matches!(&text, RefusalBody::Text(_)), "{text:?}");
    assert_eq!(text.mismatch(b"busy, try later\n"), None);
    let wrong = text.mismatch(b"busy, try later").unwrap();
    assert!(wrong.contains("exactly \"busy, try later\\n\""), "{wrong}");
    assert!(text.mismatch(b"").unwrap().contains("the body is empty"));

    let page = body("status = 503\nbody = { contains = \"<title>503</title>\" }");
    assert!(matches!(&page, RefusalBody::Contains(_)), "{page:?}");
    assert_eq!(page.mismatch(b"<html><title>503</title></html>"), None);
    let long = format!("<html>{}</html>", "x".repeat(200));
    let wrong = page.mismatch(long.as_bytes()).unwrap();
    assert!(wrong.contains("contains \"<title>503</title>\""), "{wrong}");
    assert!(wrong.len() < 200, "a short excerpt: {wrong}");
}

#[test]
fn a_body_with_an_error_too_long_or_empty_is_refused_naming_the_refusal() {
    let err = contract("status = 429\nbody = { contains = \"\" }").unwrap_err();
    assert!(err.contains("refusals.busy.body.contains"), "{err}");
    let long = "x".repeat(5000);
    let err = contract(&format!("status = 429\nbody = {{ text = \"{long}\" }}")).unwrap_err();
    assert!(err.contains("refusals.busy.body"), "{err}");
    assert!(err.contains("5000 bytes, at most 4096"), "{err}");
    let err = contract("status = 429\nbody = { pointer = \"error\", value = \"x\" }").unwrap_err();
    assert!(err.contains("refusals.busy.body.pointer"), "{err}");
    let err = contract("error = \"overloaded\"\nbody = { text = \"a\" }").unwrap_err();
    assert!(err.contains("goes with `status`"), "{err}");
    // Two shapes at once are neither: refused at the line of the refusal's body.
    let err = contract("status = 429\nbody = { text = \"a\", contains = \"b\" }").unwrap_err();
    assert!(err.contains("body = { text = \"a\", contains"), "{err}");
}
