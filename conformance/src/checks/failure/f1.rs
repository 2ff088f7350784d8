//! F1: a failing or panicking stage answers the exact body and leaves nothing behind; for any
//! contract, a pool whose dependency fails answers as it declares ([`super::failed_call`]).

use std::sync::Arc;

use plimsoll_spec::{ClauseId, Contract, ErrorCode, HookDirective, Pool};

use crate::checks::ctx::Ctx;
use crate::checks::pool::{capacity_recovered, hook, no_temp_files, plain_request_succeeds};
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::{Op, Target};

/// F1's entry in the check registry: the evidence the docs print, and `f1`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::F1,
    "A `fail` and a `panic` hook at every digitize and export stage in turn: each answer is \
     {status:stage_failed} `stage_failed` naming the failing stage and exactly the stages \
     before it, with every member the clause lists present (the text ones not empty); no temp \
     file remains, the next \
     request succeeds, and every slot admits work again. For any contract, each pool held by a \
     dependency the checker plays that declares its `failure`: the checker, as the dependency, \
     answers the pool's call 500, and the request must get the declared status and body after \
     its call arrived; the pool's next request must then be served, and as many requests as \
     the pool has workers, sent at once, must all call the dependency together within two \
     seconds and be served (no worker lost on the failure path).",
    |t, c| Box::pin(f1(t, c)),
)
.applies_when(applies)
.covers(&["hook-fail", "failure-cleanup", "temp-folder"]);

/// F1 judges the reference surface's stages, which its hook fails, and any pool's declared
/// answer to a failing dependency.
fn applies(contract: &Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        !super::failed_call::declared(contract).is_empty(),
        "the contract declares no failure the checker can provoke (`pools.NAME.failure`, for a \
         pool held by a dependency) and no reference API (`[api]`, whose stages its hook fails)",
    )
}

async fn f1(t: &Arc<Target>, c: &mut Ctx) {
    if t.expected.is_reference() {
        stages_fail(t, c).await;
    }
    if super::failed_call::declared(&t.expected).is_empty() {
        return;
    }
    let part = super::failed_call::judge(t, c).await;
    c.add_part(part);
}

/// The reference surface: a `fail` and a `panic` hook at every stage of both pools.
async fn stages_fail(t: &Arc<Target>, c: &mut Ctx) {
    let code = ErrorCode::StageFailed;
    c.expected = format!(
        "{} {code} with the failing stage and exactly the stages before it; no temp files; next request fine",
        t.status(code)
    );
    let design = match t.digitize(None).await {
        Ok(r) if r.ok() => r.body,
        other => {
            // Worded `Ok(503)` / `Err("request failed: …")`, as this failure has always read.
            c.fail(format!(
                "a plain digitize did not succeed: {:?}",
                other.map(|r| r.status).map_err(|e| e.to_string())
            ));
            return;
        }
    };
    let mut cases = 0;
    for (op, stages) in [
        (Op::Digitize, t.expected.pool(Pool::Digitize).stages),
        (Op::Export, t.expected.pool(Pool::Export).stages),
    ] {
        for panic in [false, true] {
            for (i, &stage) in stages.iter().enumerate() {
                let hook = hook(if panic {
                    HookDirective::Panic { stage }
                } else {
                    HookDirective::Fail { stage }
                });
                let request = match op {
                    Op::Export => t.export_request(Some(&hook), design.clone()),
                    _ => t.digitize_request(Some(&hook)),
                };
                let label = format!("{:?} {hook}", op).to_lowercase();
                let reply = match t.send(request, op).await {
                    Ok(r) => r,
                    Err(e) => {
                        c.fail(format!("{label}: {e}"));
                        continue;
                    }
                };
                cases += 1;
                c.reply(t, &label, &reply);
                let body = reply.json();
                c.require_error(t, &label, &reply, code);
                c.require_stages(&label, &body, stages, i);
                // The members the contract lists, each present and, if text, not empty
                // (`failed_stage` and `completed_stages` are judged exactly above).
                for member in &t.expected.clauses().f1.value.body_members {
                    let value = &body[member.as_str()];
                    c.require(!value.is_null() && value.as_str() != Some(""), || {
                        format!("{label}: no `{member}`")
                    });
                }
                if let Some(entries) = c.temp_left(t) {
                    c.require(entries.is_empty(), || {
                        format!("{label}: temp files left: {entries:?}")
                    });
                }
            }
        }
    }
    if t.temp_entries().is_none() {
        no_temp_files(t, c, "after the failures").await;
    }
    plain_request_succeeds(t, c, "next", "the request after the failures").await;
    c.observed = format!(
        "{cases} injected failures and panics answered; temp dir {}",
        match c.temp_left(t) {
            Some(e) if e.is_empty() => "empty".to_owned(),
            Some(e) => format!("holds {e:?}"),
            None => "not visible (metric used)".to_owned(),
        }
    );
    capacity_recovered(t, c).await;
}
