//! B2 for any service: the requests a contract says need more than a pool's memory cap
//! (`[[pools.NAME.over_cap]]`), each sent twice as written — the same input must fail the same
//! way, with its declared status and code — and then the pool's own request, which must still
//! be served: a cap that refuses everything, or a service that fell over, fails here. The
//! checker builds no over-cap input of its own: what needs too much memory is the service's to
//! say (a binary body travels in a `body_file`).

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::Contract;
use plimsoll_spec::model::BadRequest;

use crate::checks::ctx::Ctx;
use crate::remote::Target;

/// How long the checker waits for one answer: a request over the cap is refused before the
/// work, so one that takes longer than this has been run, or has hung.
const PATIENCE: Duration = Duration::from_secs(10);

/// Every over-cap request the contract declares, with the pool that declares it.
pub(super) fn declared(contract: &Contract) -> Vec<(&str, &BadRequest)> {
    (contract.pools.iter())
        .flat_map(|(pool, spec)| spec.over_cap.iter().map(move |b| (pool.as_str(), b)))
        .collect()
}

/// Sends each declared over-cap request twice and judges both answers, then each such pool's
/// own request. Returns what was expected and what was observed, in words.
pub(super) async fn judge(t: &Arc<Target>, c: &mut Ctx) -> (String, String) {
    let all = declared(&t.expected);
    let expected = format!(
        "each of {} declared over-cap requests answered twice with its status (and code where \
         declared); each such pool serves its own request after",
        all.len()
    );
    let mut right = 0;
    for (pool, over) in &all {
        let name = format!(
            "{pool}: {} (`{} {}`)",
            over.what, over.request.method, over.request.path
        );
        let mut fine = true;
        for attempt in ["first", "again"] {
            match t.send_recipe(&over.request, PATIENCE).await {
                Ok(reply) => {
                    c.reply(t, format!("{name}, {attempt}"), &reply);
                    if let Some(why) = over.mismatch(reply.status, &reply.body) {
                        fine = false;
                        c.fail(format!("{name}, {attempt}: {why}"));
                    }
                }
                Err(e) => {
                    fine = false;
                    c.fail(format!("{name}, {attempt}: {e}"));
                }
            }
        }
        right += usize::from(fine);
    }
    let served = still_served(t, c, &all).await;
    let observed = format!(
        "{right} of {} declared over-cap requests answered as declared, twice; {served}",
        all.len()
    );
    (expected, observed)
}

/// Each pool with over-cap requests serves its declared request (its `hold`'s, sent plain)
/// afterwards; in words, how many did.
async fn still_served(t: &Arc<Target>, c: &mut Ctx, all: &[(&str, &BadRequest)]) -> String {
    let mut pools: Vec<&str> = all.iter().map(|(p, _)| *p).collect();
    pools.dedup();
    let (mut served, mut judged) = (0, 0);
    for pool in pools {
        let Some(hold) = t.expected.pools[pool].hold.as_ref() else {
            c.evidence.push(format!(
                "{pool}: no request of its own declared (`hold`): not sent after"
            ));
            continue;
        };
        judged += 1;
        let name = format!("{pool}: its own request after the over-cap ones");
        match t.send_recipe(&hold.request, PATIENCE).await {
            Ok(reply) => {
                c.reply(t, &name, &reply);
                if c.require(reply.status == hold.request.status, || {
                    format!(
                        "{name} answered {}, not {}",
                        reply.status, hold.request.status
                    )
                }) {
                    served += 1;
                }
            }
            Err(e) => c.fail(format!("{name}: {e}")),
        }
    }
    format!("{served} of {judged} pools served their own request after")
}
