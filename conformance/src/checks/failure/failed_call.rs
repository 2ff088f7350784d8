//! F1 for any service: a pool held by a dependency the checker plays declares what it answers
//! when that dependency fails (`pools.NAME.failure`). The checker, as the dependency, answers
//! the pool's call `500`; the request must get the declared status and body, and only after its
//! call reached the dependency (an error made up without calling proves nothing of the
//! failure path); then, the dependency answering again, the pool's next request must be
//! served, and as many requests as it has workers must all call the dependency at once (a
//! failure path that loses a worker leaves one short). A service that hides the failure (a cached answer served as fresh) or reports it
//! otherwise than it promises fails here, and so does one that leaves a temp file of the failed
//! request behind when its contract declares `[temp_files]` (read with `--temp-dir`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::Contract;
use plimsoll_spec::model::{DependencyFailure, DependencyHold, PoolSpec, Recipe};

use crate::checks::ctx::Ctx;
use crate::checks::pool::{declared_temp_left, every_worker_calls, served_again};
use crate::remote::Target;

/// How long the checker waits for one answer: a failed call is answered at once, so a request
/// that takes longer has hung.
const PATIENCE: Duration = Duration::from_secs(10);

/// One pool's declared failure: the pool, what it must answer, its request and its dependency.
pub(super) struct Declared<'c> {
    pool: &'c str,
    spec: &'c PoolSpec,
    failure: &'c DependencyFailure,
    request: &'c Recipe,
    dependency: &'c DependencyHold,
}

/// Every pool that declares its failure and is held by a dependency (validation refuses one
/// that is not).
pub(super) fn declared(contract: &Contract) -> Vec<Declared<'_>> {
    (contract.pools.iter())
        .filter_map(|(pool, spec)| {
            let hold = spec.hold.as_ref()?;
            Some(Declared {
                pool,
                spec,
                failure: spec.failure.as_ref()?,
                request: &hold.request,
                dependency: hold.dependency.as_ref()?,
            })
        })
        .collect()
}

/// Fails each declared pool's call and judges the answer, then the pool's next request.
/// Returns what was expected and what was observed, in words.
pub(super) async fn judge(t: &Arc<Target>, c: &mut Ctx) -> (String, String) {
    let all = declared(&t.expected);
    let expected = all
        .iter()
        .map(|d| {
            let body = (d.failure.body.as_ref()).map_or("any body".to_owned(), |b| b.words());
            format!(
                "{}: its dependency's failed call answered {}, {body}; served again after",
                d.pool, d.failure.status
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut seen = Vec::new();
    for d in &all {
        seen.push(one(t, c, d).await);
    }
    (expected, seen.join("; "))
}

/// One pool: its call failed, then its request served again; in words.
async fn one(t: &Arc<Target>, c: &mut Ctx, d: &Declared<'_>) -> String {
    let pool = d.pool;
    let dependency = match t.dependencies.get(d.dependency).await {
        Ok(dependency) => dependency,
        Err(e) => {
            c.fail(format!("{pool}: {e}"));
            return format!("{pool}: the dependency could not be played");
        }
    };
    let name = format!(
        "{pool}: `{} {}` with its call to {} failed",
        d.request.method,
        d.request.path,
        dependency.name()
    );
    let origin = Instant::now();
    let reply = {
        let _failing = dependency.fail();
        t.send_recipe(d.request, PATIENCE).await
    };
    let calls = dependency.calls_since(origin).len();
    let failed = match reply {
        Ok(reply) => {
            c.reply(t, &name, &reply);
            let want = d.failure.status;
            c.require(reply.status == want, || {
                format!(
                    "{name}: answered {}, the contract says {want}",
                    reply.status
                )
            });
            if let Some(why) = d
                .failure
                .body
                .as_ref()
                .and_then(|b| b.mismatch(&reply.body))
            {
                c.fail(format!("{name}: {why}"));
            }
            c.require(calls > 0, || {
                format!(
                    "{name}: answered {} without calling the dependency",
                    reply.status
                )
            });
            format!("answered {} after {calls} call(s)", reply.status)
        }
        Err(e) => {
            c.fail(format!("{name}: {e}"));
            "no answer".to_owned()
        }
    };
    let failed = match declared_temp_left(t, c, &name) {
        Some(temp) => format!("{failed}, {temp}"),
        None => failed,
    };
    let after = format!("{pool}: its request after the failure");
    let again = served_again(t, c, &after, d.request, PATIENCE).await;
    let every = format!("{pool}: every worker after the failure");
    let failed = format!(
        "{pool}: a failed call to {} {failed}; served again after: {again}",
        dependency.name()
    );
    match every_worker_calls(t, c, &every, d.spec).await {
        Some(every) => format!("{failed}; {every}"),
        None => failed,
    }
}
