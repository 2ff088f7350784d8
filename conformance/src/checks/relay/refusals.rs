//! What a relay must refuse, and how: messages that are no request envelope get one
//! `relay-error` frame each while the socket goes on (rule `relay-error`, judged by R3), and an
//! envelope whose hook header the API would refuse gets the API's answer as a
//! `relay-http-response`, not a `relay-error` (rule `relay-hooks`, judged by R1).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use plimsoll_spec::ErrorCode;
use plimsoll_spec::relay::{RELAY_ERROR, RELAY_RESPONSE};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::client::{Ws, held, nonce, open, request};
use crate::checks::ctx::Ctx;
use crate::remote::{Target, is_success};

/// How long the refusals' answers may take: none of them waits for a worker's work.
const LIMIT: Duration = Duration::from_secs(3);

/// A message that is no request envelope, the id its `relay-error` must carry, and what is
/// wrong with it.
struct Bad {
    what: &'static str,
    id: String,
    text: String,
}

/// Not JSON; no `type`; another `type`; a `path` not starting with `/` (each a
/// `relay-http-request` but for one member).
fn bad_messages(t: &Target, tag: u64) -> Vec<Bad> {
    let envelope = |id: &str| {
        serde_json::to_value(request(
            id.to_owned(),
            "GET",
            &t.expected.api().healthz.path,
        ))
        .unwrap_or_default()
    };
    let mut bad = Vec::new();
    let mut add = |what, id: String, edit: &dyn Fn(&mut Value)| {
        let mut v = envelope(&id);
        edit(&mut v);
        bad.push(Bad {
            what,
            id,
            text: v.to_string(),
        });
    };
    add("no `type`", format!("r3e-{tag:x}-0"), &|v| {
        v.as_object_mut().map(|o| o.remove("type"));
    });
    add("another `type`", format!("r3e-{tag:x}-1"), &|v| {
        v["type"] = json!(RELAY_RESPONSE);
    });
    add(
        "a `path` without a leading `/`",
        format!("r3e-{tag:x}-2"),
        &|v| {
            v["path"] = json!("healthz");
        },
    );
    bad.push(Bad {
        what: "not JSON",
        id: String::new(),
        text: "{\"type\": \"relay-http-request\", \"request_id\": ".to_owned(),
    });
    bad
}

/// R3's probe of rule `relay-error`: the bad messages and one good envelope after them, in one
/// flush. Each bad one must get exactly one `relay-error` (its own id, `seq` 0, `final`,
/// `invalid_parameter` with that code's status), and the good one its 2xx on the same socket.
pub async fn malformed(t: &Target, c: &mut Ctx) {
    let tag = nonce();
    let bad = bad_messages(t, tag);
    let good = held(t, format!("r3e-{tag:x}-ok"), 0);
    let mut texts: Vec<String> = bad.iter().map(|b| b.text.clone()).collect();
    texts.push(serde_json::to_string(&good).unwrap_or_default());
    let Some(mut ws) = open(t, c).await else {
        return;
    };
    let mut ids: Vec<&str> = bad.iter().map(|b| b.id.as_str()).collect();
    ids.push(&good.request_id);
    let frames = converse(&mut ws, &texts, &ids, c).await;
    let _ = ws.close(None).await;
    let mut right = 0;
    for b in &bad {
        let got = frames.get(&b.id).map(Vec::as_slice).unwrap_or_default();
        right += usize::from(judge_error(t, c, b, got));
    }
    let answered = frames
        .get(&good.request_id)
        .and_then(|f| f.first())
        .and_then(|f| f["status"].as_u64());
    c.require(answered.is_some_and(|s| is_success(s as u16)), || {
        format!("a good envelope sent after the bad messages was answered {answered:?}, not 2xx on the same socket")
    });
    c.evidence.push(format!(
        "rule `relay-error`: {right} of {} bad messages answered with one relay-error each",
        bad.len()
    ));
}

/// One bad message's frames: exactly one, a `relay-error` as the rule describes.
fn judge_error(t: &Target, c: &mut Ctx, bad: &Bad, frames: &[Value]) -> bool {
    let code = ErrorCode::InvalidParameter;
    let ok = match frames {
        [f] => {
            f["type"] == RELAY_ERROR
                && f["seq"] == 0
                && f["final"] == true
                && f["status"] == t.status(code)
                && f["code"] == code.as_str()
        }
        _ => false,
    };
    c.require(ok, || {
        format!(
            "a message with {} (request_id `{}`): expected one {RELAY_ERROR} frame (seq 0, final, {} {code}), got {frames:?}",
            bad.what,
            bad.id,
            t.status(code)
        )
    })
}

/// R1's probe of rule `relay-hooks` (on the target's own API: a bridge the checker plays both
/// ends of has no hooks): an envelope whose hook header does not parse must be answered as the
/// HTTP API answers it, a `relay-http-response` of `invalid_parameter`.
pub async fn hook_refused(t: &Target, c: &mut Ctx) {
    // Only where envelopes reach an API that reads hooks: the checker's upstream reads none.
    let Some(hook_header) = t.local.hook_header(t) else {
        return;
    };
    let id = format!("r1h-{:x}", nonce());
    let mut envelope = request(id.clone(), "GET", &t.expected.api().healthz.path);
    envelope
        .headers
        .insert(hook_header.to_owned(), "explode=now".to_owned());
    let Some(mut ws) = open(t, c).await else {
        return;
    };
    let text = serde_json::to_string(&envelope).unwrap_or_default();
    let frames = converse(&mut ws, &[text], &[id.as_str()], c).await;
    let _ = ws.close(None).await;
    let frames = frames.get(&id).map(Vec::as_slice).unwrap_or_default();
    let code = ErrorCode::InvalidParameter;
    let body: String = frames
        .iter()
        .filter_map(|f| f["body_chunk"].as_str())
        .collect();
    let body_code = serde_json::from_str::<Value>(&body)
        .ok()
        .map(|b| b["code"].clone());
    let first = frames.first();
    let ok = first.is_some_and(|f| f["type"] == RELAY_RESPONSE && f["status"] == t.status(code))
        && body_code.as_ref().is_some_and(|b| b == code.as_str());
    c.require(ok, || {
        format!(
            "an envelope whose {} does not parse: expected a {RELAY_RESPONSE} of {} {code} (as the HTTP API answers it), got {:?} with body code {body_code:?}",
            t.hook_header(),
            t.status(code),
            first.map(|f| (f["type"].clone(), f["status"].clone()))
        )
    });
}

/// Sends `texts` in one flush and reads frames, by `request_id`, until each of `ids` has a
/// final one, the socket ends, or [`LIMIT`].
async fn converse(
    ws: &mut Ws,
    texts: &[String],
    ids: &[&str],
    c: &mut Ctx,
) -> HashMap<String, Vec<Value>> {
    let mut frames: HashMap<String, Vec<Value>> = HashMap::new();
    for text in texts {
        if let Err(e) = ws.feed(Message::text(text.as_str())).await {
            c.fail(format!("sending a relay message: {e}"));
            return frames;
        }
    }
    if let Err(e) = ws.flush().await {
        c.fail(format!("sending relay messages: {e}"));
        return frames;
    }
    let deadline = Instant::now() + LIMIT;
    let finished = |frames: &HashMap<String, Vec<Value>>| {
        ids.iter().all(|id| {
            frames
                .get(*id)
                .is_some_and(|f| f.iter().any(|f| f["final"] == true))
        })
    };
    while !finished(&frames) {
        match tokio::time::timeout_at(deadline.into(), ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
                let id = frame["request_id"].as_str().unwrap_or_default().to_owned();
                frames.entry(id).or_default().push(frame);
            }
            Ok(Some(Ok(_))) => {}
            _ => break,
        }
    }
    frames
}
