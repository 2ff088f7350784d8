//! A target's claimed contract: only overridable fields are adopted, and only when allowed.

use plimsoll_spec::{ClauseId, Contract};
use serde_json::{Value, json};

fn claim() -> Value {
    serde_json::to_value(Contract::embedded()).unwrap()
}

fn set(v: &mut Value, pointer: &str, to: Value) {
    *v.pointer_mut(pointer).unwrap() = to;
}

#[test]
fn an_identical_claim_has_no_difference() {
    let r = Contract::embedded().reconcile(&claim(), false);
    assert!(r.accepted());
    assert!(r.adopted.is_empty() && r.refused.is_empty());
    assert_eq!(&r.effective, Contract::embedded());
}

#[test]
fn an_overridable_value_is_adopted_only_when_allowed() {
    let mut c = claim();
    set(&mut c, "/pools/digitize/deadline_ms", json!(2000));
    let r = Contract::embedded().reconcile(&c, true);
    assert!(r.accepted(), "{:?}", r.refused);
    assert_eq!(r.adopted.len(), 1);
    assert_eq!(r.adopted[0].clause, ClauseId::B1);
    assert_eq!(r.adopted[0].env, "DIGITIZE_TIMEOUT_MS");
    assert_eq!(r.effective.pools["digitize"].deadline_ms, Some(2000));

    let r = Contract::embedded().reconcile(&c, false);
    assert!(!r.accepted());
    assert_eq!(r.refused.len(), 1);
    assert!(r.refused[0].reason.contains("--allow-overrides"));
    assert_eq!(r.effective.pools["digitize"].deadline_ms, Some(60000));
}

#[test]
fn bounds_tolerances_statuses_and_codes_are_never_adopted() {
    let mut c = claim();
    set(
        &mut c,
        "/pools/digitize/cancellation/stop_within_ms",
        json!(5000),
    );
    set(&mut c, "/tolerances/refusal_latency_ms", json!(5000));
    set(&mut c, "/tolerances/timeout_late_ms", json!(60000));
    set(&mut c, "/errors/0/status", json!(500));
    set(&mut c, "/observability/request_id_header", json!("X-Id"));
    let r = Contract::embedded().reconcile(&c, true);
    assert!(!r.accepted());
    assert!(r.adopted.is_empty());
    let paths: Vec<&str> = r
        .refused
        .iter()
        .map(|x| x.difference.path.as_str())
        .collect();
    for p in [
        "pools.digitize.cancellation.stop_within_ms",
        "tolerances.refusal_latency_ms",
        "tolerances.timeout_late_ms",
        "errors",
        "observability.request_id_header",
    ] {
        assert!(paths.contains(&p), "{p} not refused: {paths:?}");
    }
    assert_eq!(r.effective.cancellation().stop_within_ms, 1000);
    assert_eq!(r.effective.tolerances.refusal_latency_ms, 100);
}

#[test]
fn schema_defaults_left_out_of_a_claim_are_no_difference() {
    let mut c = claim();
    for e in c["errors"].as_array_mut().unwrap() {
        if e["retry_after"] == json!(false) {
            e.as_object_mut().unwrap().remove("retry_after");
        }
    }
    c.as_object_mut().unwrap().remove("load");
    let r = Contract::embedded().reconcile(&c, false);
    assert!(r.accepted(), "{:?}", r.refused);
}

#[test]
fn an_override_that_breaks_a_rule_is_refused() {
    let mut c = claim();
    set(&mut c, "/pools/digitize/workers", json!(0));
    let r = Contract::embedded().reconcile(&c, true);
    assert!(r.adopted.is_empty());
    assert_eq!(r.refused.len(), 1);
    assert!(
        r.refused[0].reason.contains("rules"),
        "{}",
        r.refused[0].reason
    );
    assert_eq!(r.effective.pools["digitize"].workers, 4);
}

#[test]
fn an_unreadable_claim_adopts_nothing() {
    let mut c = claim();
    set(&mut c, "/pools/digitize/deadline_ms", json!("soon"));
    let r = Contract::embedded().reconcile(&c, true);
    assert!(r.unreadable.is_some());
    assert!(!r.accepted());
    assert!(r.adopted.is_empty());
}

#[test]
fn the_override_that_breaks_a_rule_is_named_once_and_the_others_not_adopted_because_of_it() {
    let mut c = claim();
    set(&mut c, "/pools/digitize/deadline_ms", json!(2000));
    set(&mut c, "/connections/max_connections", json!(8));
    let r = Contract::embedded().reconcile(&c, true);
    assert!(r.adopted.is_empty());
    assert_eq!(r.refused.len(), 2);
    let reason = |path: &str| {
        let refused = r.refused.iter().find(|x| x.difference.path == path);
        refused.unwrap().reason.clone()
    };
    let culprit = reason("connections.max_connections");
    assert!(culprit.contains("break the contract's rules"), "{culprit}");
    let other = reason("pools.digitize.deadline_ms");
    assert!(
        other.starts_with("not adopted because of `connections.max_connections` (MAX_CONNECTIONS)"),
        "{other}"
    );
    assert!(
        !other.contains("must"),
        "the rule's words only once: {other}"
    );
}

/// Numbers are compared by value: a claim whose encoder writes the TOML float `2.0` as `2` (as
/// JavaScript's and Go's do) says the same as the contract (rule `contract-endpoint`).
#[test]
fn a_float_written_without_its_fraction_is_the_same_value() {
    let mut c = claim();
    set(&mut c, "/api/digitize/params/colors/min", json!(2));
    let r = Contract::embedded().reconcile(&c, false);
    assert!(r.accepted(), "{:?}", r.refused);
    assert!(r.adopted.is_empty() && r.refused.is_empty());
    set(&mut c, "/api/digitize/params/colors/min", json!(3));
    assert!(!Contract::embedded().reconcile(&c, false).accepted());
}
