//! B2: the per-request memory cap, from the image header and while running.

use std::sync::Arc;

use super::{Ctx, capacity_recovered};
use crate::target::{Op, Target, png_claiming};

pub async fn b2(t: &Arc<Target>, c: &mut Ctx) {
    let cap = t.expected.clauses.b2.value.memory_cap_mb;
    c.expected =
        format!("503 memory_cap_exceeded without Retry-After past {cap} MB; the server stays up");
    let retry_after = t.expected.clauses.t3.value.retry_after_header.clone();
    let api = &t.expected.api.digitize;
    // 100000 x 100000 pixels: no pipeline fits that in any sane cap.
    let bomb = t
        .client
        .post(t.url(&api.path))
        .header("content-type", "image/png")
        .body(png_claiming(100_000, 100_000));
    let cases = [
        (
            "header-declared 100000x100000 image",
            t.send(bomb, Op::Digitize).await,
        ),
        (
            "alloc hook past the cap",
            t.digitize(Some(&format!("alloc={}", cap + 1))).await,
        ),
    ];
    let mut seen = Vec::new();
    for (label, reply) in cases {
        match reply {
            Ok(reply) => {
                c.reply(label, &reply, t.request_id_header());
                seen.push(format!("{label}: {} {}", reply.status, reply.code()));
                c.require(
                    reply.status == 503 && reply.code() == "memory_cap_exceeded",
                    || {
                        format!(
                            "{label}: expected 503 memory_cap_exceeded, got {} {}",
                            reply.status,
                            reply.code()
                        )
                    },
                );
                c.require(reply.header(&retry_after).is_none(), || {
                    format!("{label}: carries {retry_after}")
                });
            }
            Err(e) => c.fail(format!("{label}: {e} (did the server die?)")),
        }
    }
    let health = t
        .client
        .get(t.url(&t.expected.api.healthz.path))
        .send()
        .await;
    c.require(
        health.as_ref().is_ok_and(|r| r.status().is_success()),
        || "server unhealthy after the memory checks".into(),
    );
    c.observed = seen.join("; ");
    capacity_recovered(t, c).await;
}
