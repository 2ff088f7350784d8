//! B1 for any service: a pool that declares a deadline (`deadline_ms`) and the answer past it
//! (`deadline_answer`, a key of `[refusals]`), and that the checker can hold past it (its hook,
//! or a dependency it plays: a slow request takes only its own time). One request is held well
//! past the deadline: it must be answered as declared no earlier than the deadline and no later
//! than the tolerance after it, on the checker's clock; then the pool's own request must be
//! served (the timed-out request gave its worker back). A service without a deadline, or with a
//! longer one, answers the held request late, or served, and fails; so does one that leaves a
//! temp file of the cut request behind when its contract declares `[temp_files]`.

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::Contract;
use plimsoll_spec::model::Refusal;

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{
    HeldRequest, declared_temp_left, every_worker_calls, send_held, served_again,
};
use crate::remote::Target;

/// How far past the deadline and its tolerance the request is held: an answer within the
/// tolerance cannot be the hold's own end.
const MARGIN: Duration = Duration::from_millis(500);

/// One pool B1 can judge: its deadline, the answer past it and the request held past it.
pub(super) struct Deadlined<'c> {
    name: &'c str,
    deadline: Duration,
    answer: &'c Refusal,
    held: HeldRequest,
    plain: &'c plimsoll_spec::model::Recipe,
    spec: &'c plimsoll_spec::model::PoolSpec,
}

/// Every pool of another service's contract with a deadline, its answer, and a hold that
/// outlasts it by more than `late` (the tolerance as the run's fault adjusts it).
pub(super) fn deadlined(contract: &Contract, late: Duration) -> Vec<Deadlined<'_>> {
    let beyond = late + MARGIN;
    (contract.pools.iter())
        .filter(|_| !contract.is_reference())
        .filter_map(|(name, spec)| {
            let hold = spec.hold.as_ref()?;
            Some(Deadlined {
                name,
                deadline: Duration::from_millis(spec.deadline_ms?),
                answer: contract.refusals.get(spec.deadline_answer.as_ref()?)?,
                held: HeldRequest::past_deadline(hold, spec, beyond)?,
                plain: &hold.request,
                spec,
            })
        })
        .collect()
}

/// Holds one request of each such pool past its deadline and judges its answer. Returns what
/// was expected and what was observed, in words.
pub(super) async fn judge(t: &Arc<Target>, c: &mut Ctx) -> (String, String) {
    let late = t.bound(plimsoll_fault::Bound::TimeoutLate);
    let (mut expected, mut observed) = (Vec::new(), Vec::new());
    for pool in deadlined(&t.expected, late) {
        expected.push(format!(
            "{}: a request held past its {} ms deadline answered {} within {} ms of it; served again after",
            pool.name,
            pool.deadline.as_millis(),
            t.expected.refusal_words(pool.answer),
            late.as_millis()
        ));
        observed.push(one(t, c, &pool, late).await);
    }
    (expected.join("; "), observed.join("; "))
}

/// One pool: the held request's answer and time, then its plain request.
async fn one(t: &Arc<Target>, c: &mut Ctx, pool: &Deadlined<'_>, late: Duration) -> String {
    let label = format!(
        "{}: held {} ms by {}",
        pool.name,
        pool.held.hold.as_millis(),
        pool.held.by
    );
    let limit = pool.held.hold + Duration::from_secs(3);
    let seen = match send_held(t, &pool.held, limit).await {
        Ok(reply) => {
            c.reply(t, &label, &reply);
            let took = reply.elapsed;
            c.trials_ms.push(ms(took));
            c.sample("deadline lateness", ms(took.saturating_sub(pool.deadline)));
            let right = t.refusal_mismatch(&reply, pool.answer).is_none();
            c.require(right, || {
                format!(
                    "{label}: answered {} after {:.0} ms, not the deadline's answer ({})",
                    reply.status,
                    ms(took),
                    t.refusal_mismatch(&reply, pool.answer).unwrap_or_default()
                )
            });
            if right {
                let what = format!("the {} ms deadline", pool.deadline.as_millis());
                c.require_on_time(&label, took, (pool.deadline, &what), late);
            }
            let answered = format!(
                "{}: answered {} after {:.0} ms",
                pool.name,
                reply.status,
                ms(took)
            );
            match declared_temp_left(t, c, &label) {
                Some(temp) => format!("{answered}, {temp}"),
                None => answered,
            }
        }
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            format!("{}: no answer", pool.name)
        }
    };
    let after = format!("{}: its request after the deadline", pool.name);
    let again = served_again(t, c, &after, pool.plain, limit).await;
    let every = format!("{}: every worker after the deadline", pool.name);
    match every_worker_calls(t, c, &every, pool.spec).await {
        Some(every) => format!("{seen}; served again after: {again}; {every}"),
        None => format!("{seen}; served again after: {again}"),
    }
}
