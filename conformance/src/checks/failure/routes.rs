//! Rule `routes`, judged under F4: a path the API does not have is `not_found`, a path asked
//! with a method it does not serve is 405 with an `Allow` header naming the methods it serves, a
//! plain `GET` of the relay path is `upgrade_required` with `Upgrade: websocket`, and the health
//! endpoint answers 200. Their replies join the run's, so F4 also judges their request ids.

use plimsoll_spec::ErrorCode;
use reqwest::header::{ALLOW, UPGRADE};

use crate::checks::ctx::Ctx;
use crate::remote::{Op, Reply, Target};

/// A path no API of the contract has (and no prefix of one: it is not under any route).
pub const UNKNOWN_PATH: &str = "/plimsoll-f4-no-such-route";

/// The routes' probes, one request each; returns how many were answered as the rule says.
pub(super) async fn probe(t: &Target, c: &mut Ctx) -> usize {
    let api = t.expected.api();
    let mut right = 0;
    if let Some(r) = get(t, c, UNKNOWN_PATH).await {
        let label = format!("GET {UNKNOWN_PATH} (no such route)");
        right += usize::from(c.require_error(t, &label, &r, ErrorCode::NotFound));
    }
    if let Some(r) = get(t, c, &api.digitize.path).await {
        let allow = list(&r, ALLOW.as_str());
        let ok = r.status == 405 && allow.iter().any(|m| m == "post");
        right += usize::from(c.require(ok, || {
            format!(
                "GET {} (a method the path does not serve): expected 405 with an Allow header naming POST, got {} {} (Allow: {allow:?})",
                api.digitize.path,
                r.status,
                r.code()
            )
        }));
    }
    if let Some(r) = get(t, c, &api.relay.path).await {
        let upgrade = list(&r, UPGRADE.as_str());
        let code = ErrorCode::UpgradeRequired;
        let ok = t.is_error(&r, code) && upgrade.iter().any(|p| p == "websocket");
        right += usize::from(c.require(ok, || {
            format!(
                "GET {} without a WebSocket upgrade: expected {} {code} with `Upgrade: websocket`, got {} {} (Upgrade: {upgrade:?})",
                api.relay.path,
                t.status(code),
                r.status,
                r.code()
            )
        }));
    }
    if let Some(r) = get(t, c, &api.healthz.path).await {
        right += usize::from(c.require(r.ok(), || {
            format!("GET {}: expected 200, got {}", api.healthz.path, r.status)
        }));
    }
    c.evidence.push(format!(
        "rule `routes`: {right} of 4 probes (unknown path, wrong method, plain GET of the relay path, health) answered as it says"
    ));
    right
}

/// `GET path` on the target, a failure recorded when it cannot be had.
async fn get(t: &Target, c: &mut Ctx, path: &str) -> Option<Reply> {
    match t.send(t.client.get(t.url(path)), Op::Other).await {
        Ok(reply) => Some(reply),
        Err(e) => {
            c.fail(format!("GET {path}: {e}"));
            None
        }
    }
}

/// The members of every `name` line of `reply`, trimmed and lowercased (a list header).
fn list(reply: &Reply, name: &str) -> Vec<String> {
    reply
        .headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|m| m.trim().to_ascii_lowercase())
        .filter(|m| !m.is_empty())
        .collect()
}
