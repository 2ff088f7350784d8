//! F2 for any service: the bad requests a contract declares (`[[pools.NAME.bad_requests]]`),
//! each sent once as written and its answer compared with the one declared — the status, and
//! the error code at its JSON Pointer when the contract names one. The checker builds no bad
//! input of its own here: what is bad for a service is the service's to say.

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::Contract;
use plimsoll_spec::model::BadRequest;

use crate::checks::ctx::Ctx;
use crate::remote::Target;

/// How long the checker waits for one answer: bad input is refused before any work, so a
/// service that takes longer has hung on it.
pub(super) const PATIENCE: Duration = Duration::from_secs(10);

/// Every bad request the contract declares, with the pool that declares it.
pub(super) fn declared(contract: &Contract) -> Vec<(&str, &BadRequest)> {
    contract
        .pools
        .iter()
        .flat_map(|(pool, spec)| spec.bad_requests.iter().map(move |b| (pool.as_str(), b)))
        .collect()
}

/// Sends each declared bad request and judges its answer, a failure naming the request.
/// Returns what was expected and what was observed, in words.
pub(super) async fn judge(t: &Arc<Target>, c: &mut Ctx) -> (String, String) {
    let all = declared(&t.expected);
    let expected = format!(
        "each of {} declared bad requests answered with its status, and its code where declared",
        all.len()
    );
    let mut right = 0;
    for (pool, bad) in &all {
        let name = format!(
            "{pool}: {} (`{} {}`)",
            bad.what, bad.request.method, bad.request.path
        );
        match t.send_recipe(&bad.request, PATIENCE).await {
            Ok(reply) => {
                c.reply(t, &name, &reply);
                match bad.mismatch(reply.status, &reply.body) {
                    None => right += 1,
                    Some(why) => c.fail(format!("{name}: {why}")),
                }
            }
            Err(e) => c.fail(format!("{name}: {e}")),
        }
    }
    let observed = format!(
        "{right} of {} declared bad requests answered as declared",
        all.len()
    );
    (expected, observed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plimsoll_spec::model::{AnswerCode, Recipe};

    fn bad(code: Option<(&str, &str)>) -> BadRequest {
        BadRequest {
            what: "an empty query".into(),
            request: Recipe {
                method: "GET".into(),
                path: "/search?q=".into(),
                headers: Default::default(),
                body: None,
                body_file: None,
                body_bytes: None,
                status: 400,
            },
            code: code.map(|(pointer, value)| AnswerCode {
                pointer: pointer.into(),
                value: value.into(),
            }),
        }
    }

    #[test]
    fn the_declared_answer_passes() {
        let b = bad(Some(("/code", "invalid_query")));
        assert_eq!(b.mismatch(400, br#"{"code":"invalid_query"}"#), None);
        let nested = bad(Some(("/error/type", "invalid_query")));
        let body = br#"{"error":{"type":"invalid_query"}}"#;
        assert_eq!(nested.mismatch(400, body), None);
        // No code declared: any body will do.
        assert_eq!(bad(None).mismatch(400, b"<html>bad</html>"), None);
    }

    #[test]
    fn another_status_or_code_fails_saying_what_was_seen() {
        let b = bad(Some(("/code", "invalid_query")));
        let why = b.mismatch(200, b"results").unwrap();
        assert_eq!(why, "answered 200, the contract says 400");
        let why = b.mismatch(400, br#"{"code":"bad_input"}"#).unwrap();
        assert!(why.contains("`/code` is \"bad_input\""), "{why}");
        let why = b.mismatch(400, br#"{"code":7}"#).unwrap();
        assert!(why.contains("is 7"), "{why}");
        let why = b.mismatch(400, br#"{"error":"invalid_query"}"#).unwrap();
        assert!(why.contains("has no `/code`"), "{why}");
        let why = b.mismatch(400, b"bad request").unwrap();
        assert!(why.contains("not JSON"), "{why}");
    }

    #[test]
    fn a_long_value_is_cut() {
        let b = bad(Some(("/code", "invalid_query")));
        let body = format!(r#"{{"code":"{}"}}"#, "x".repeat(500));
        let why = b.mismatch(400, body.as_bytes()).unwrap();
        assert!(why.len() < 200 && why.contains('…'), "{why}");
    }
}
