//! T6: what a refusal does to the connection it is sent on. For each refusal that declares its
//! `connection`, the checker makes the service send it on a connection of its own (a bare
//! HTTP/1.1 connection, one request at a time) — by filling a pool that answers with it, or by
//! spending a rate limit's bucket — then sends a second request on the same connection: kept
//! means it is answered, closed means it cannot be. A client's connection pool reuses every
//! connection, so a service that closes where it promised to keep costs each refused client a
//! handshake, and one that keeps where it promised to close holds sockets its operator counted
//! as free.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::{AfterRefusal, RateLimit, Recipe, Refusal};
use plimsoll_spec::{ClauseId, Contract};

use crate::checks::ctx::Ctx;
use crate::checks::pool::{Held, HeldRequest, Pending, held, join_all, sleep_until, spawn_held};
use crate::checks::registry::Check;
use crate::remote::Target;
use crate::remote::connection::{ConnectionSeen, Kept, NotSeen, after_refusal};

/// T6's entry in the check registry: the evidence the docs print, and `t6`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::T6,
    "For each refusal that declares its `connection`, once: a pool that answers with it filled \
     with its held requests (every worker and queue place), or a rate limit that answers with it \
     spent (its bucket's requests and two more sent at once), then the pool's or the limit's \
     request sent on a bare HTTP/1.1 connection of its own, which must be refused (a limit's is \
     spent and probed again, up to three times, while a token that came back admits the probe), \
     and a second request on the same connection: `kept` requires it answered, `closed` \
     requires the connection unable to carry it.",
    |t, c| Box::pin(t6(t, c)),
)
.applies_when(applies);

/// How long after the saturating requests are sent the probe goes: they reached the service.
const FILL: Duration = Duration::from_millis(150);

/// Requests sent beyond a rate limit's bucket when it is spent: refused when the bucket was
/// full, they take any token that came back meanwhile.
const SPARE: u32 = 2;

/// T6 judges every refusal that declares its connection and that the checker can provoke.
fn applies(contract: &Contract) -> Result<(), String> {
    if subjects(contract).is_empty() {
        return Err(
            "no refusal that declares its `connection` and that the checker can provoke (by a \
             pool it can hold, or a rate limit)"
                .into(),
        );
    }
    Ok(())
}

/// How the checker makes the service send a refusal.
enum Provoke<'c> {
    /// By holding every worker and queue place of a pool.
    Pool {
        hold: Box<HeldRequest>,
        holders: u32,
    },
    /// By spending a rate limit's bucket.
    Limit(&'c RateLimit),
}

/// A refusal to judge, where it comes from, and how to provoke it.
struct Subject<'c> {
    refusal_name: &'c str,
    refusal: &'c Refusal,
    declared: AfterRefusal,
    source: &'c str,
    provoke: Provoke<'c>,
}

/// Every refusal with a declared connection, each once, with the first pool or limit that
/// provokes it.
fn subjects(contract: &Contract) -> Vec<Subject<'_>> {
    let mut out: Vec<Subject<'_>> = Vec::new();
    let pools = contract.pools.iter().filter_map(|(name, spec)| {
        let Held::Request(hold) = held(contract, name, spec) else {
            return None;
        };
        let places = spec.queue.capacity.places()?;
        let refusal = spec.refusal.as_deref()?;
        let provoke = Provoke::Pool {
            hold,
            holders: spec.workers + places,
        };
        Some((name.as_str(), refusal, provoke))
    });
    let limits = contract
        .rate_limits
        .iter()
        .map(|(name, l)| (name.as_str(), l.refusal.as_str(), Provoke::Limit(l)));
    for (source, refusal_name, provoke) in pools.chain(limits) {
        let Some(refusal) = contract.refusals.get(refusal_name) else {
            continue;
        };
        let Some(declared) = refusal.connection else {
            continue;
        };
        if out.iter().all(|s| s.refusal_name != refusal_name) {
            out.push(Subject {
                refusal_name,
                refusal,
                declared,
                source,
                provoke,
            });
        }
    }
    out
}

/// T6 against every refusal it can provoke, one after another.
async fn t6(t: &Arc<Target>, c: &mut Ctx) {
    let (mut expected, mut observed) = (Vec::new(), Vec::new());
    for subject in subjects(&t.expected) {
        expected.push(format!(
            "{} (by {}): connection {}",
            subject.refusal_name,
            subject.source,
            subject.declared.as_str()
        ));
        observed.push(judge(t, c, &subject).await);
    }
    c.expected = expected.join("; ");
    c.observed = observed.join("; ");
}

/// How many times a rate limit is spent and probed before T6 says it saw no refusal: a token
/// that came back between the spending and the probe (a loaded machine delays either) is taken
/// by the admitted probe, so the next probe, sent at once, meets an empty bucket.
const LIMIT_ATTEMPTS: u32 = 3;

/// Provokes `subject`'s refusal on a connection of its own (a rate limit's again, up to
/// [`LIMIT_ATTEMPTS`] times, while its probe is admitted), collecting the saturating requests.
async fn provoke_and_probe(
    t: &Arc<Target>,
    c: &mut Ctx,
    subject: &Subject<'_>,
) -> Result<ConnectionSeen, NotSeen> {
    let attempts = match subject.provoke {
        Provoke::Limit(_) => LIMIT_ATTEMPTS,
        Provoke::Pool { .. } => 1,
    };
    let mut attempt = 1;
    loop {
        let (tasks, probe, limit) = provoke(t, &subject.provoke, attempt == 1).await;
        let seen = after_refusal(t, &probe, limit).await;
        for (i, r) in join_all(tasks).await.into_iter().enumerate() {
            let label = format!("{}-holding-{}{i}", subject.source, attempt_tag(attempt));
            match r {
                Ok(reply) => c.reply(t, label, &reply),
                Err(e) => c.evidence.push(format!("{label}: {e}")),
            }
        }
        match seen {
            Err(NotSeen::NotRefused(status)) if attempt < attempts => {
                c.evidence.push(format!(
                    "{}: attempt {attempt}: the probe was answered {status}, a token having come \
                     back; spent and probed again",
                    subject.source
                ));
                attempt += 1;
            }
            seen => return seen,
        }
    }
}

/// How a later attempt's requests are told apart on the timeline (`quota-holding-2.1`).
fn attempt_tag(attempt: u32) -> String {
    if attempt == 1 {
        String::new()
    } else {
        format!("{attempt}.")
    }
}

/// Provokes `subject`'s refusal on a connection of its own and judges what became of it.
async fn judge(t: &Arc<Target>, c: &mut Ctx, subject: &Subject<'_>) -> String {
    let name = format!("{} (by {})", subject.refusal_name, subject.source);
    let seen = provoke_and_probe(t, c, subject).await;
    let seen = match seen {
        Ok(seen) => seen,
        Err(NotSeen::NotPlain) => {
            c.skip(NotSeen::NotPlain.to_string());
            return format!("{name}: not probed (not plain http://)");
        }
        // The limit admitted more than it declares: T1, T3 or T4 fail it; here there was no
        // refusal whose connection to judge.
        Err(e @ NotSeen::NotRefused(_)) => {
            c.skip(format!(
                "{name}: {e} (the limit's own clause judges it): no refusal to judge"
            ));
            return format!("{name}: not refused");
        }
        Err(e) => {
            c.fail(format!("{name}: {e}"));
            return format!("{name}: {e}");
        }
    };
    if let Some(why) = t.answer_mismatch(seen.refused, &seen.body, subject.refusal) {
        // Not the refusal this clause is about, by its status or its body (T1, T3 or T4 judge
        // what was answered): its connection tells nothing of the declared refusal's, and a
        // skip is never a pass.
        c.skip(format!(
            "{name}: the request meant to be refused {why}: no refusal of its to judge"
        ));
        return format!("{name}: answered {}, not refused as declared", seen.refused);
    }
    let kept = matches!(seen.kept, Kept::Open { .. });
    let promised = subject.declared == AfterRefusal::Kept;
    c.require(kept == promised, || {
        format!(
            "{name}: the connection was {} where the contract says `{}`",
            seen.evidence(),
            subject.declared.as_str()
        )
    });
    format!("{name}: {}", seen.evidence())
}

/// Fills the pool or spends the bucket (after letting it refill, on the `first` attempt); returns
/// the saturating requests (to be collected), the request to send on the probe's own
/// connection, and how long any may take.
async fn provoke(
    t: &Arc<Target>,
    how: &Provoke<'_>,
    first: bool,
) -> (Vec<Pending>, Recipe, Duration) {
    let late = Duration::from_millis(t.expected.tolerances.timeout_late_ms);
    match how {
        Provoke::Pool { hold, holders } => {
            let limit = hold.hold * (*holders + 1) + late + Duration::from_secs(3);
            let started = Instant::now();
            let tasks = (0..*holders).map(|_| spawn_held(t, hold, limit)).collect();
            sleep_until(started + FILL.min(hold.hold / 4)).await;
            (tasks, hold.request.clone(), limit)
        }
        Provoke::Limit(l) => {
            let step = Duration::from_secs_f64(1.0 / f64::from(l.rate_per_second));
            let slack = Duration::from_millis(t.expected.tolerances.rate_limit_slack_ms);
            let limit = step * (l.bucket() + 2) + late + Duration::from_secs(3);
            // A full bucket, then every token of it taken at once, and two more requests for any
            // token that comes back while they are sent.
            if first {
                tokio::time::sleep(step * l.bucket() + slack).await;
            }
            let spend = HeldRequest {
                request: l.request.clone(),
                hold: Duration::ZERO,
                by: "the rate limit's request".into(),
                dependency: None,
            };
            let tasks = (0..l.bucket() + SPARE)
                .map(|_| spawn_held(t, &spend, limit))
                .collect();
            tokio::time::sleep(slack * 2).await;
            (tasks, l.request.clone(), limit)
        }
    }
}
