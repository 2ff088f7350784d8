//! B2: the per-request memory cap, from the image header and while running.

use std::sync::Arc;

use plimsoll_spec::{ClauseId, Contract, ErrorCode, HookDirective, Pool};
use reqwest::header::CONTENT_TYPE;

use crate::checks::ctx::Ctx;
use crate::checks::pool::{capacity_recovered, hook};
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::{Op, Target, png_claiming};

/// B2's entry in the check registry: the evidence the docs print, and `b2`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::B2,
    "A request whose `alloc` hook charges 90% of the {pools.digitize.memory_cap_mb} MB cap succeeds (200), so a \
     cap set too low fails. An image whose header claims 100000 x 100000 pixels, and a request \
     whose `alloc` hook charges more than the cap: both get {status:memory_cap_exceeded} \
     `memory_cap_exceeded` with no retry delay (the same input fails the same way), the server \
     stays healthy, and afterwards every worker runs a held request at once and every queue \
     place admits one that waits (no place lost). For any contract, each request a pool \
     declares over its memory cap (`pools.NAME.over_cap`) is sent twice as written and must get \
     its declared status, and its code at its JSON Pointer when one is declared, both times; the \
     pool then serves its own request.",
    |t, c| Box::pin(b2(t, c)),
)
.applies_when(applies)
.covers(&[
    "memory-estimate",
    "memory-before-pixels",
    "memory-running",
    "alloc-hook",
]);

/// B2 judges the reference surface's memory cap, which the checker provokes (a header that
/// claims too many pixels, the `alloc` hook), and the over-cap requests any contract declares.
fn applies(contract: &Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        !super::over_cap::declared(contract).is_empty(),
        "the contract declares no request over a memory cap (`[[pools.NAME.over_cap]]`) and no \
         reference API (`[api]`, whose cap the checker provokes)",
    )
}

async fn b2(t: &Arc<Target>, c: &mut Ctx) {
    if t.expected.is_reference() {
        reference_cap(t, c).await;
    }
    if super::over_cap::declared(&t.expected).is_empty() {
        return;
    }
    let part = super::over_cap::judge(t, c).await;
    c.add_part(part);
}

/// The reference surface's cap: an `alloc` hook just under it served, a header claiming too
/// many pixels and a hook just past it refused without a retry delay, the server still up, and
/// every slot admitting work again.
async fn reference_cap(t: &Arc<Target>, c: &mut Ctx) {
    let cap = t
        .expected
        .pool_spec(Pool::Digitize)
        .memory_cap_mb
        .unwrap_or_default();
    let code = ErrorCode::MemoryCapExceeded;
    let retry_after = t.expected.retry_after().header.clone();
    c.expected = format!(
        "200 at 90% of {cap} MB; {} {code} without {retry_after} past it; the server stays up",
        t.status(code)
    );
    let mut seen = Vec::new();
    // Just under the cap: must fit (a cap set too low fails here).
    let under = cap * 9 / 10;
    let label = format!("alloc hook at {under} MB (90% of the cap)");
    match t
        .digitize(Some(&hook(HookDirective::Alloc { mb: under })))
        .await
    {
        Ok(reply) => {
            c.reply(t, &label, &reply);
            seen.push(format!("{label}: {}", reply.status));
            c.require(reply.ok(), || {
                format!(
                    "{label}: answered {} {}, but it is within the cap",
                    reply.status,
                    reply.code()
                )
            });
        }
        Err(e) => c.fail(format!("{label}: {e}")),
    }
    let api = &t.expected.api().digitize;
    // 100000 x 100000 pixels: no pipeline fits that in any sane cap.
    let bomb = t
        .client
        .post(t.url(&api.path))
        .header(CONTENT_TYPE, image::ImageFormat::Png.to_mime_type())
        .body(png_claiming(100_000, 100_000));
    let alloc = hook(HookDirective::Alloc { mb: cap + 1 });
    let cases = [
        (
            "header-declared 100000x100000 image",
            t.send(bomb, Op::Digitize).await,
        ),
        ("alloc hook past the cap", t.digitize(Some(&alloc)).await),
    ];
    for (label, reply) in cases {
        match reply {
            Ok(reply) => {
                c.reply(t, label, &reply);
                seen.push(format!("{label}: {} {}", reply.status, reply.code()));
                c.require_error(t, label, &reply, code);
                c.require(reply.header(&retry_after).is_none(), || {
                    format!("{label}: carries {retry_after}")
                });
            }
            Err(e) => c.fail(format!("{label}: {e} (did the server die?)")),
        }
    }
    let health = t
        .client
        .get(t.url(&t.expected.api().healthz.path))
        .send()
        .await;
    c.require(
        health.as_ref().is_ok_and(|r| r.status().is_success()),
        || "server unhealthy after the memory checks".into(),
    );
    c.observed = seen.join("; ");
    capacity_recovered(t, c).await;
}
