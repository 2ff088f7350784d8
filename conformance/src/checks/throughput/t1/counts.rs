//! What a pool's limit counts (`counts`), judged from idle keep-alive connections: a connection
//! left open after one answered request, as every client's connection pool keeps it. A pool
//! that counts requests gives no slot to such a connection, so T1's burst runs beside as many
//! idle connections as the pool has workers (at most [`MAX_IDLE`]); one that counts connections
//! keeps a slot taken for each, so with that many open a request on a new connection cannot run
//! at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::{Counts, PoolSpec, Recipe, Refusal};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{HeldRequest, spawn_held};
use crate::remote::Target;
use crate::remote::connection::{Idle, NotSeen, idle};

/// The most idle connections the checker keeps open at once: a connection-counting pool
/// with more workers cannot be filled this way (and is said not judged), while one idle
/// connection already shows, beside a burst, a pool that gives it a slot.
const MAX_IDLE: usize = 64;

/// `n` connections to `t`, each left idle after `plain` was answered on it, opened at once. The
/// ones that could not be opened are said in the evidence, with why.
async fn open_idle(
    t: &Target,
    c: &mut Ctx,
    name: &str,
    (plain, n): (&Recipe, usize),
    limit: Duration,
) -> Result<Vec<Idle>, NotSeen> {
    let opened = futures_util::future::join_all((0..n).map(|_| idle(t, plain, limit))).await;
    let mut out = Vec::with_capacity(n);
    for connection in opened {
        let connection = connection?;
        if connection.status != plain.status {
            c.evidence.push(format!(
                "{name}: a request on an idle connection answered {}, not {}",
                connection.status, plain.status
            ));
        }
        out.push(connection);
    }
    Ok(out)
}

/// Gives a service that counts connections time to see the checker's last ones closed: it
/// frees a slot when it reads the close, a moment after the checker's answer was read. The
/// refusal tolerance is that moment's bound: what a service may take to answer at once.
pub(super) async fn settle(t: &Target) {
    tokio::time::sleep(Duration::from_millis(
        t.expected.tolerances.refusal_latency_ms,
    ))
    .await;
}

/// The idle connections T1's burst runs beside: for a pool that counts requests, as many as it
/// has workers, each left idle after `plain` was answered on it (they must take no slot); none
/// for one that counts connections (judged apart), which is first given a moment to see the
/// checker's last connections closed.
pub(super) async fn beside_burst(
    t: &Target,
    c: &mut Ctx,
    name: &str,
    (counts, plain): (Counts, Option<&Recipe>),
    workers: usize,
    limit: Duration,
) -> Vec<Idle> {
    match (counts, plain) {
        (Counts::Requests, Some(plain)) => {
            match open_idle(t, c, name, (plain, workers.min(MAX_IDLE)), limit).await {
                Ok(idle) => idle,
                Err(e) => {
                    c.evidence
                        .push(format!("{name}: no idle connections beside the burst: {e}"));
                    Vec::new()
                }
            }
        }
        (Counts::Connections, _) => {
            settle(t).await;
            Vec::new()
        }
        (Counts::Requests, None) => Vec::new(),
    }
}

/// `counts = "connections"`: with as many idle connections open as the pool has workers, one
/// held request on a new connection must not run at once: it is refused with the pool's
/// refusal, or it waits and is answered only after the idle connections close. Sent with its
/// hold, it is waited on for a hold and a half before they close (a request that ran at once
/// has been answered by then).
pub(super) async fn judge_connections_counted(
    t: &Arc<Target>,
    c: &mut Ctx,
    (name, spec): (&str, &PoolSpec),
    (held, plain): (&HeldRequest, &Recipe),
    limit: Duration,
) {
    let workers = spec.workers as usize;
    if workers > MAX_IDLE {
        return c.evidence.push(format!(
            "{name}: counting connections not judged: {workers} workers, more than the {MAX_IDLE} \
             idle connections the checker keeps open"
        ));
    }
    settle(t).await;
    let idle = match open_idle(t, c, name, (plain, workers), limit).await {
        Ok(idle) => idle,
        Err(NotSeen::NotPlain) => {
            return c.evidence.push(format!(
                "{name}: counting connections not judged: {}",
                NotSeen::NotPlain
            ));
        }
        Err(e) => {
            return c.fail(format!(
                "{name}: {workers} idle connections could not be opened: {e}"
            ));
        }
    };
    let task = spawn_held(t, held, limit);
    tokio::time::sleep(held.hold + held.hold / 2).await;
    let closed = Instant::now();
    drop(idle);
    let refusal = spec
        .refusal
        .as_ref()
        .and_then(|r| t.expected.refusals.get(r));
    let what =
        format!("{name}: a request on a new connection while {workers} idle connections were open");
    let reply = match task.await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => return c.fail(format!("{what}: {e}")),
        Err(e) => return c.fail(format!("{what}: task failed: {e}")),
    };
    c.reply(t, format!("{name}-behind-idle"), &reply);
    let seen = judge(&reply, held, refusal.map(|r| (t.as_ref(), r)), closed);
    match seen {
        Ok(how) => c.evidence.push(format!("{what}: {how}")),
        Err(why) => c.fail(format!("{what} {why} (counts = \"connections\")")),
    }
}

/// How the request sent behind the idle connections fared: refused, or served only after they
/// closed (Ok, in words); served while they were open, or otherwise answered (Err, in words).
fn judge(
    reply: &crate::remote::Reply,
    held: &HeldRequest,
    refusal: Option<(&Target, &Refusal)>,
    closed: Instant,
) -> Result<String, String> {
    let after = ms(reply.elapsed);
    if refusal.is_some_and(|(t, r)| t.is_refusal(reply, r)) {
        return Ok(format!("refused {} after {after:.0} ms", reply.status));
    }
    if reply.status != held.request.status {
        return Err(format!("answered {} after {after:.0} ms", reply.status));
    }
    if reply.answered() < closed {
        return Err(format!(
            "ran at once: answered {} after {after:.0} ms, before they closed",
            reply.status
        ));
    }
    Ok(format!(
        "waited, and was answered {} only after they closed ({after:.0} ms)",
        reply.status
    ))
}
