//! `plimsoll discover`: one route of a running service measured from outside, by the client's
//! clock alone, for a contract draft ([`draft`]). A team that does not know its service's
//! limits starts from what the service shows rather than from guesses.
//!
//! A worker is held the way the checks hold one ([`HeldRequest`]): the route is slow on its
//! own (the user says how slow), or the service honours a hook header (`plimsoll-tower`, the
//! reference server's `X-Plimsoll-Hook` with its hooks on). Then a bounded ramp: bursts of 1,
//! 2, 3, … held requests at once, each sorted by the checks' own burst sorting (ran at once,
//! waited, refused, other), stopping at the first refusal or at the user's ceiling; while the
//! pool is full again, what a connection does after a refusal on it ([`connection`]) and a few
//! probes of the refusal (status, body, hint headers); and, when two or more requests waited,
//! one trial of the queue's order as T2 runs it. No phase ever has more requests in flight
//! than the ceiling. A route behind a rate limit rather than a pool is measured by [`rate`].

pub mod draft;
pub mod progress;
pub mod rate;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::{
    AnswerCode, BodyContains, BodyText, Hold, HookHold, MAX_BODY_TEXT, QueueOrder, Recipe,
    RefusalBody,
};
use plimsoll_spec::{Contract, StageName};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{
    Burst, HeldRequest, Pending, join_all, sleep_until, sort_burst, spawn_held,
};
use crate::checks::throughput::t2::held::{FILL, MIN_GAP, expected_waves};
pub use crate::remote::connection::{ConnectionSeen, Kept, NotSeen};
use crate::remote::{Reply, Target};
pub use progress::{Phase, Step};
use progress::{SETTLE, left_in_ramp, order_phase, refusal_phase};

/// How long discover asks a hook to hold a request: long beside scheduling jitter, short
/// enough for a ramp of a dozen bursts to take seconds, not minutes.
pub const HOOK_HOLD: Duration = Duration::from_millis(400);

/// How many refusals the probe of a full pool collects at most, to see whether its hint varies.
const PROBES: usize = 3;

/// How a request of the route keeps a worker busy.
#[derive(Debug, Clone)]
pub enum Holding {
    /// The route is slow on its own: answered no sooner than this, by the user's word.
    Slow(Duration),
    /// The service holds a request carrying `HEADER: hold=STAGE:MS` for `MS`; discover picks
    /// `MS`. A service with no stages of its own (the `plimsoll-tower` layer, the
    /// `plimsoll_asgi` middleware) holds any stage, `queue` included; the reference server
    /// holds only a stage its job runs (`decode`), since `queue` is admission's and no stage.
    Hook {
        /// The header's name (`X-Plimsoll-Hook`).
        header: String,
        /// The stage the `hold` directive names.
        stage: StageName,
    },
}

/// What to measure: one route of one service, and the most requests it may have at once.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The service's base URL.
    pub target: String,
    /// The route's method (`GET`).
    pub method: String,
    /// The route's path, with any query, as sent.
    pub path: String,
    /// The request's body, if it has one.
    pub body: Option<String>,
    /// Headers sent with every request, by name.
    pub headers: BTreeMap<String, String>,
    /// How a request holds a worker.
    pub holding: Holding,

    /// The most requests discover has in flight at once: the user's bound on the load it adds.
    pub ceiling: u32,
    /// With a hook: hold one request this long and see whether a deadline answers it first
    /// (none: the deadline is not probed).
    pub deadline_within: Option<Duration>,
}

impl Plan {
    /// The pool's `hold` as the draft declares it: the user's request, with the slow route's
    /// least time or the hook's header.
    pub fn hold(&self) -> Hold {
        let request = Recipe {
            method: self.method.clone(),
            path: self.path.clone(),
            headers: self.headers.clone(),
            body: self.body.clone(),
            body_file: None,
            body_bytes: None,
            status: 200,
        };
        match &self.holding {
            Holding::Slow(at_least) => Hold {
                request,
                at_least_ms: Some(at_least.as_millis() as u64),
                hook: None,
                dependency: None,
            },
            Holding::Hook { header, stage } => Hold {
                request,
                at_least_ms: None,
                hook: Some(HookHold {
                    header: header.clone(),
                    stage: stage.clone(),
                }),
                dependency: None,
            },
        }
    }

    /// The request each probe sends, and how long it holds its worker.
    fn held(&self) -> HeldRequest {
        let hold = self.hold();
        let mut request = hold.request;
        match &self.holding {
            Holding::Slow(at_least) => HeldRequest {
                request,
                hold: *at_least,
                by: "a slow request".into(),
                dependency: None,
            },
            Holding::Hook { header, stage } => {
                request.headers.insert(
                    header.clone(),
                    crate::checks::pool::hold(stage, HOOK_HOLD.as_millis() as u64),
                );
                HeldRequest {
                    request,
                    hold: HOOK_HOLD,
                    by: header.clone(),
                    dependency: None,
                }
            }
        }
    }
}

/// One burst of the ramp, by the client's clock.
#[derive(Debug, Clone)]
pub struct BurstSeen {
    /// How many requests were sent at once.
    pub size: usize,
    /// Answered within half a hold of the first: ran at once.
    pub ran: usize,
    /// Answered a hold or more later: waited for a worker.
    pub waited: usize,
    /// Answered with an error status.
    pub refused: usize,
    /// Anything else, in words (an answer before its hold ended, a failed request).
    pub other: Vec<String>,
}

/// Where the ramp stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The first burst with a refusal had this many requests.
    RefusedAt(usize),
    /// The ceiling was reached with every request admitted: the limit is above it.
    AboveCeiling,
}

/// The shape of a refusal's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyShape {
    /// No body.
    Empty,
    /// A JSON document (`application/json`, `application/problem+json`, or text that parses).
    Json,
    /// An HTML page.
    Html,
    /// Anything else, read as text.
    Text,
}

impl BodyShape {
    /// The shape of `reply`'s body, from its `Content-Type` and then its bytes.
    pub fn of(reply: &Reply) -> BodyShape {
        let kind = reply
            .header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let text = String::from_utf8_lossy(&reply.body);
        if reply.body.is_empty() {
            BodyShape::Empty
        } else if kind.contains("json")
            || serde_json::from_slice::<serde_json::Value>(&reply.body).is_ok()
        {
            BodyShape::Json
        } else if kind.contains("html") || text.trim_start().starts_with('<') {
            BodyShape::Html
        } else {
            BodyShape::Text
        }
    }

    /// The shape in words.
    pub fn as_str(self) -> &'static str {
        match self {
            BodyShape::Empty => "empty",
            BodyShape::Json => "JSON",
            BodyShape::Html => "HTML",
            BodyShape::Text => "text",
        }
    }
}

/// How a refusal's body would be declared (`[refusals.NAME] body`): an HTML page by its
/// `<title>…</title>` (the rest of a server's page names its version), a JSON body by its
/// top-level string `code` or `error`, any other text exactly; none when it is none of these,
/// not UTF-8, or longer than a contract may declare.
pub fn declared_body(reply: &Reply) -> Option<RefusalBody> {
    let text = std::str::from_utf8(&reply.body).ok()?;
    let body = match BodyShape::of(reply) {
        BodyShape::Html => {
            let lower = text.to_ascii_lowercase();
            let start = lower.find("<title>")?;
            let end = start + lower[start..].find("</title>")? + "</title>".len();
            RefusalBody::Contains(BodyContains {
                contains: text[start..end].to_owned(),
            })
        }
        BodyShape::Json => {
            let json: serde_json::Value = serde_json::from_str(text).ok()?;
            let (member, value) = ["code", "error"]
                .into_iter()
                .find_map(|m| Some((m, json.get(m)?.as_str()?)))?;
            RefusalBody::Json(AnswerCode {
                pointer: format!("/{member}"),
                value: value.to_owned(),
            })
        }
        BodyShape::Text | BodyShape::Empty => RefusalBody::Text(BodyText {
            text: text.to_owned(),
        }),
    };
    (body.declared_text().len() <= MAX_BODY_TEXT).then_some(body)
}

/// The refusals seen: the first refusing burst's and the probes' of the full pool.
#[derive(Debug, Clone, Default)]
pub struct RefusalSeen {
    /// Every refusal's status, in the order seen.
    pub statuses: Vec<u16>,
    /// Every refusal's body shape.
    pub bodies: Vec<BodyShape>,
    /// Every refusal's body as it would be declared ([`declared_body`]).
    pub declared: Vec<Option<RefusalBody>>,
    /// Every refusal's `Retry-After`, when it had one.
    pub retry_after: Vec<Option<String>>,
    /// `RateLimit` and `RateLimit-Policy` headers seen on any refusal, as sent (recorded only).
    pub rate_limit: Vec<(String, String)>,
    /// How long each refusal took, in ms.
    pub latencies_ms: Vec<f64>,
}

impl RefusalSeen {
    fn add(&mut self, reply: &Reply) {
        self.statuses.push(reply.status);
        self.bodies.push(BodyShape::of(reply));
        self.declared.push(declared_body(reply));
        self.retry_after
            .push(reply.header("retry-after").map(str::to_owned));
        for name in ["ratelimit", "ratelimit-policy"] {
            if let Some(value) = reply.header(name) {
                let pair = (name.to_owned(), value.to_owned());
                if !self.rate_limit.contains(&pair) {
                    self.rate_limit.push(pair);
                }
            }
        }
        self.latencies_ms.push(ms(reply.elapsed));
    }

    /// The status most refusals had.
    pub fn status(&self) -> u16 {
        most_common(&self.statuses).unwrap_or_default()
    }

    /// The body shape most refusals had.
    pub fn body(&self) -> BodyShape {
        most_common(&self.bodies).unwrap_or(BodyShape::Empty)
    }

    /// The body every refusal would declare, when each would declare one and all the same.
    pub fn declared_body(&self) -> Option<&RefusalBody> {
        let first = self.declared.first()?.as_ref()?;
        self.declared
            .iter()
            .all(|d| d.as_ref() == Some(first))
            .then_some(first)
    }

    /// The least and the most delay the refusals gave in `Retry-After`, when each had one.
    pub fn delay_range(&self) -> Option<(u64, u64)> {
        let delays: Option<Vec<u64>> = self
            .retry_after
            .iter()
            .map(|v| v.as_deref().and_then(|v| v.trim().parse::<u64>().ok()))
            .collect();
        let delays = delays?;
        Some((*delays.iter().min()?, *delays.iter().max()?))
    }

    /// The delay every refusal gave in `Retry-After`, when each had one and all gave the same
    /// number of seconds: a hint the draft can declare as a constant.
    pub fn constant_delay(&self) -> Option<u64> {
        let mut delays = self
            .retry_after
            .iter()
            .map(|v| v.as_deref().and_then(|v| v.trim().parse::<u64>().ok()));
        let first = delays.next()??;
        delays.all(|d| d == Some(first)).then_some(first)
    }

    /// `Retry-After` in words: absent, present on some, constant, or varying.
    pub fn hint(&self) -> String {
        let present: Vec<&String> = self.retry_after.iter().flatten().collect();
        if present.is_empty() {
            return "absent".into();
        }
        let mut values: Vec<&String> = present.clone();
        values.dedup();
        let on = if present.len() < self.retry_after.len() {
            format!(
                " on {} of {} refusals",
                present.len(),
                self.retry_after.len()
            )
        } else {
            String::new()
        };
        if values.len() == 1 {
            format!("present{on}, constant `{}`", values[0])
        } else {
            let shown: Vec<String> = present.iter().map(|v| format!("`{v}`")).collect();
            format!("present{on}, varying: {}", shown.join(", "))
        }
    }
}

/// The most frequent of `items` (the first seen among equals).
fn most_common<T: Copy + PartialEq>(items: &[T]) -> Option<T> {
    items
        .iter()
        .max_by_key(|a| {
            (
                items.iter().filter(|b| b == a).count(),
                std::cmp::Reverse(items.iter().position(|b| b == *a)),
            )
        })
        .copied()
}

/// The queue's order as one trial showed it.
#[derive(Debug, Clone)]
pub struct OrderSeen {
    /// The order the waves matched (`unordered`: neither FIFO's nor LIFO's).
    pub order: QueueOrder,
    /// The wave each arrival started in, by arrival.
    pub waves: Vec<usize>,
    /// How far apart the waiting requests arrived.
    pub gap: Duration,
}

/// Everything discover saw of the route.
#[derive(Debug, Clone)]
pub struct Findings {
    /// The ramp's bursts, in order.
    pub bursts: Vec<BurstSeen>,
    /// The most requests that ran at once.
    pub workers: usize,
    /// The most requests that waited for a worker.
    pub queue: usize,
    /// Where the ramp stopped.
    pub limit: Limit,
    /// The refusals, when the ramp reached one.
    pub refusal: Option<RefusalSeen>,
    /// The order trial, when two or more requests waited.
    pub order: Option<OrderSeen>,
    /// What a connection did after a refusal on it, when the ramp reached one: kept open or
    /// closed, or why that was not seen.
    pub connection: Option<Result<ConnectionSeen, NotSeen>>,
    /// Whether a deadline answered a request held for the user's bound, when probed.
    pub deadline: Option<DeadlineSeen>,
    /// How long each request held its worker.
    pub hold: Duration,
    /// Tolerances are the embedded contract's; the refusal latency bound the draft will be
    /// judged by, for the evidence.
    pub refusal_latency_ms: u64,
}

/// What one request held for the user's bound showed of a deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadlineSeen {
    /// Answered with this error status this long after it was sent, before its hold ended:
    /// the pool's deadline, counted from the client's sending.
    Answered {
        /// The answer's status (a 504, or the service's own).
        status: u16,
        /// How long after it was sent.
        after: Duration,
    },
    /// Held to the end and served: no deadline within the bound.
    NoneWithin(Duration),
    /// Not probed, and why (a slow route cannot be held longer than it takes).
    NotProbed(String),
}

/// Holds one request for `within` by the plan's hook and reads what answers it first. Alone on
/// the pool (the ramp is over), so only a deadline can answer it early.
async fn deadline(t: &Arc<Target>, plan: &Plan, within: Duration) -> DeadlineSeen {
    let Holding::Hook { header, stage } = &plan.holding else {
        return DeadlineSeen::NotProbed(
            "a slow route (--slow-ms) cannot be held longer than it takes; give --hook".into(),
        );
    };
    let mut request = plan.hold().request;
    request.headers.insert(
        header.clone(),
        crate::checks::pool::hold(stage, within.as_millis() as u64),
    );
    let served = request.status;
    match t.send_recipe(&request, within + DEADLINE_PATIENCE).await {
        Ok(reply) if reply.status != served && reply.elapsed < within => DeadlineSeen::Answered {
            status: reply.status,
            after: reply.elapsed,
        },
        Ok(reply) if reply.status == served => DeadlineSeen::NoneWithin(within),
        Ok(reply) => DeadlineSeen::NotProbed(format!(
            "answered {} after {:.0} ms, at or after the hold's end",
            reply.status,
            ms(reply.elapsed)
        )),
        Err(e) => DeadlineSeen::NotProbed(e.to_string()),
    }
}

/// How long past the user's bound the deadline's probe waits for its answer.
const DEADLINE_PATIENCE: Duration = Duration::from_secs(5);

/// Why discover could not measure the route.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// The probe contract did not load (a bad route or header).
    #[error("the route cannot be probed: {0}")]
    Plan(String),
    /// A burst was answered in a way that is neither served, waited nor refused.
    #[error("burst of {size}: {what}")]
    Unexpected {
        /// The burst's size.
        size: usize,
        /// What was seen, in words.
        what: String,
    },
    /// Not one request was served: nothing to measure.
    #[error("a single request was not served: {0}")]
    NotServed(String),
}

/// Measures the route `plan` names, telling `say` each phase as it starts and what it saw,
/// with about how long the rest takes.
pub async fn discover(plan: &Plan, say: &mut dyn FnMut(Step)) -> Result<Findings, DiscoverError> {
    let ceiling = plan.ceiling.max(1) as usize;
    let contract = probe_contract(plan).map_err(DiscoverError::Plan)?;
    let tolerances = contract.tolerances.clone();
    let t = Arc::new(Target::new(plan.target.clone(), contract, None, None, 1));
    let held = plan.held();
    let limit =
        held.hold * (ceiling as u32 + 2) + Duration::from_millis(tolerances.timeout_late_ms + 3000);
    let mut f = ramp(&t, &held, (ceiling, limit), say).await?;
    f.refusal_latency_ms = tolerances.refusal_latency_ms;
    let (workers, queue) = (f.workers, f.queue);
    // The most that ran and the most that waited may come from different bursts: never more
    // held than leaves room for the probe within the ceiling, and no order trial past it.
    let full = (workers + queue).min(ceiling - 1);
    let trial = queue >= 2 && workers + queue <= ceiling;
    let order_left = if trial {
        order_phase(held.hold, workers, queue)
    } else {
        Duration::ZERO
    };
    if let Some(r) = f.refusal.as_mut() {
        say(Step {
            phase: Phase::Refusal,
            line: format!(
                "refusal: {full} held, then the connection after a refusal and up to {PROBES} probes of the full pool, one at a time"
            ),
            left: refusal_phase(held.hold) + order_left,
        });
        tokio::time::sleep(SETTLE).await;
        let connection = probe_refusals(&t, &held, full, limit, r).await;
        say(Step {
            phase: Phase::Refusal,
            line: match &connection {
                Ok(seen) => format!("connection after a refusal: {}", seen.evidence()),
                Err(e) => format!("connection after a refusal: not seen: {e}"),
            },
            left: order_left,
        });
        f.connection = Some(connection);
    }
    if trial {
        say(Step {
            phase: Phase::Order,
            line: format!("order: {workers} held, then {queue} queued one at a time"),
            left: order_left,
        });
        tokio::time::sleep(SETTLE).await;
        f.order = order_trial(&t, &held, workers, queue, limit).await;
    }
    if let Some(within) = plan.deadline_within {
        say(Step {
            phase: Phase::Deadline,
            line: format!(
                "deadline: one request held {} ms, answered early only by a deadline",
                within.as_millis()
            ),
            left: within,
        });
        tokio::time::sleep(SETTLE).await;
        f.deadline = Some(deadline(&t, plan, within).await);
    }
    Ok(f)
}

/// The ramp: bursts of 1, 2, 3, … held requests, up to `ceiling`, until the first refusal.
/// Its findings, with no order trial yet.
async fn ramp(
    t: &Arc<Target>,
    held: &HeldRequest,
    (ceiling, limit): (usize, Duration),
    say: &mut dyn FnMut(Step),
) -> Result<Findings, DiscoverError> {
    let mut c = Ctx::new(0.0);
    let mut f = Findings {
        bursts: Vec::new(),
        workers: 0,
        queue: 0,
        limit: Limit::AboveCeiling,
        refusal: None,
        order: None,
        connection: None,
        deadline: None,
        hold: held.hold,
        refusal_latency_ms: 0,
    };
    let mut last = Duration::ZERO;
    for size in 1..=ceiling {
        say(Step {
            phase: Phase::Ramp,
            line: format!(
                "burst of {size}: {size} request(s) at once, each held {} ms by {}",
                held.hold.as_millis(),
                held.by
            ),
            left: left_in_ramp((size, ceiling), held.hold, last, (f.workers, f.queue)),
        });
        let started = Instant::now();
        let b = burst(t, &mut c, held, size, limit).await;
        last = started.elapsed();
        say(Step {
            phase: Phase::Ramp,
            line: format!("burst of {size}: {}", b.summary()),
            left: left_in_ramp(
                (size + 1, ceiling),
                held.hold,
                last,
                (f.workers.max(b.ran.len()), f.queue.max(b.queued.len())),
            ),
        });
        if !b.other.is_empty() {
            let what = b.other.join("; ");
            return Err(if size == 1 {
                DiscoverError::NotServed(what)
            } else {
                DiscoverError::Unexpected { size, what }
            });
        }
        f.workers = f.workers.max(b.ran.len());
        f.queue = f.queue.max(b.queued.len());
        f.bursts.push(BurstSeen {
            size,
            ran: b.ran.len(),
            waited: b.queued.len(),
            refused: b.refused.len(),
            other: Vec::new(),
        });
        if !b.refused.is_empty() {
            f.limit = Limit::RefusedAt(size);
            let mut r = RefusalSeen::default();
            for reply in &b.refused {
                r.add(reply);
            }
            f.refusal = Some(r);
            break;
        }
        // Give the service a moment to take its workers back after the answers.
        tokio::time::sleep(SETTLE).await;
    }
    if f.workers == 0 {
        return Err(DiscoverError::NotServed(
            "the first burst's request was refused".into(),
        ));
    }
    Ok(f)
}

/// The contract discover probes under: the route as a pool of its own, with the embedded
/// contract's tolerances, so that the checks' pieces can send it.
fn probe_contract(plan: &Plan) -> Result<Contract, String> {
    let text = draft::probe_document(plan).map_err(|e| e.to_string())?;
    Contract::from_toml(&text, "the probe of the route").map_err(|e| e.to_string())
}

/// `size` held requests at once, sorted by the checks' own burst sorting: an error status is
/// a refusal.
async fn burst(
    t: &Arc<Target>,
    c: &mut Ctx,
    held: &HeldRequest,
    size: usize,
    limit: Duration,
) -> Burst {
    let tasks: Vec<Pending> = (0..size).map(|_| spawn_held(t, held, limit)).collect();
    let status = held.request.status;
    sort_burst(
        t,
        c,
        &format!("burst{size}"),
        tasks,
        held.hold,
        |r| r.status == status,
        |r| {
            if r.status >= 400 {
                Ok(())
            } else {
                Err(crate::checks::pool::answered(r))
            }
        },
    )
    .await
}

/// Fills the pool (`full` held requests), sends one request on a connection of its own and a
/// second on the same connection (what the connection did after the refusal), then probes
/// the pool one request at a time while another probe fits in the hold, adding every refusal
/// to `r`: at most `full + 1` in flight.
async fn probe_refusals(
    t: &Arc<Target>,
    held: &HeldRequest,
    full: usize,
    limit: Duration,
    r: &mut RefusalSeen,
) -> Result<ConnectionSeen, NotSeen> {
    let started = Instant::now();
    let saturating: Vec<Pending> = (0..full).map(|_| spawn_held(t, held, limit)).collect();
    sleep_until(started + Duration::from_millis(150).min(held.hold / 4)).await;
    let frees = started + held.hold;
    let connection = crate::remote::connection::after_refusal(t, &held.request, limit).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..PROBES {
        if Instant::now() + slowest + Duration::from_millis(50) > frees {
            break;
        }
        match t.send_recipe(&held.request, limit).await {
            Ok(reply) => {
                slowest = slowest.max(reply.elapsed);
                if reply.status >= 400 {
                    r.add(&reply);
                }
            }
            Err(_) => break,
        }
    }
    join_all(saturating).await;
    connection
}

/// One trial of the queue's order, as T2 runs it: `workers` held, then `places` queued one at
/// a time a known gap apart; each waiting request's wave by the client's clock (answered about
/// `wave + 2` holds after the first holder was sent), matched against FIFO's and LIFO's.
/// `None` when the hold leaves no room to order the arrivals or one was not served.
async fn order_trial(
    t: &Arc<Target>,
    held: &HeldRequest,
    workers: usize,
    places: usize,
    limit: Duration,
) -> Option<OrderSeen> {
    let hold = held.hold;
    let fill = FILL.min(hold / 4);
    let gap = (hold.saturating_sub(fill * 2) / places as u32).min(Duration::from_millis(30));
    if gap < MIN_GAP {
        return None;
    }
    let start = Instant::now();
    let holders: Vec<Pending> = (0..workers).map(|_| spawn_held(t, held, limit)).collect();
    let mut queued = Vec::new();
    for i in 0..places {
        sleep_until(start + fill + gap * i as u32).await;
        queued.push(spawn_held(t, held, limit));
    }
    join_all(holders).await;
    let mut waves = Vec::new();
    for reply in join_all(queued).await {
        let reply = reply.ok()?;
        if reply.status != held.request.status {
            return None;
        }
        let holds = reply.answered().duration_since(start).as_secs_f64() / hold.as_secs_f64();
        waves.push((holds.round() as usize).saturating_sub(2));
    }
    let order = [QueueOrder::Fifo, QueueOrder::Lifo]
        .into_iter()
        .find(|order| expected_waves(*order, places, workers) == waves)
        .unwrap_or(QueueOrder::Unordered);
    Some(OrderSeen { order, waves, gap })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal of `status` with `headers`, answered at once.
    fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            map.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        Reply {
            status,
            headers: map,
            body: body.as_bytes().to_vec(),
            sent: Instant::now(),
            elapsed: Duration::from_millis(2),
            timing: None,
            violations: Vec::new(),
            pool: None,
        }
    }

    #[test]
    fn a_refusal_s_body_shape_is_read_from_its_type_then_its_bytes() {
        let shape =
            |headers: &[(&str, &str)], body: &str| BodyShape::of(&reply(503, headers, body));
        assert_eq!(
            shape(&[("content-type", "application/problem+json")], "{}"),
            BodyShape::Json
        );
        assert_eq!(shape(&[], r#"{"error":"busy"}"#), BodyShape::Json);
        assert_eq!(
            shape(&[("content-type", "text/html")], "<html>"),
            BodyShape::Html
        );
        assert_eq!(shape(&[], "<html><body>503</body></html>"), BodyShape::Html);
        assert_eq!(
            shape(&[("content-type", "text/plain")], "busy"),
            BodyShape::Text
        );
        assert_eq!(shape(&[], ""), BodyShape::Empty);
    }

    #[test]
    fn a_refusal_s_body_is_declared_by_its_title_its_code_or_its_text() {
        let declared = |headers: &[(&str, &str)], body: &str| {
            declared_body(&reply(503, headers, body)).map(|b| b.words())
        };
        let page = "<html>\r\n<head><TITLE>503 Service Temporarily Unavailable</TITLE></head>\r\n\
                    <hr><center>nginx/1.22.1</center>";
        assert_eq!(
            declared(&[("content-type", "text/html")], page).as_deref(),
            Some("a body containing `\"<TITLE>503 Service Temporarily Unavailable</TITLE>\"`")
        );
        assert_eq!(declared(&[], "<html><body>busy</body></html>"), None);
        assert_eq!(
            declared(&[], r#"{"type":"about:blank","code":"overloaded"}"#).as_deref(),
            Some("a JSON body whose `/code` is `\"overloaded\"`")
        );
        assert_eq!(
            declared(&[], r#"{"error":"too many searches"}"#).as_deref(),
            Some("a JSON body whose `/error` is `\"too many searches\"`")
        );
        assert_eq!(declared(&[], r#"{"error":{"kind":"busy"}}"#), None);
        assert_eq!(
            declared(&[], "busy, try later\n").as_deref(),
            Some("the body `\"busy, try later\\n\"`")
        );
        assert_eq!(declared(&[], &"x".repeat(MAX_BODY_TEXT + 1)), None);
        let seen = |bodies: &[&str]| {
            let mut r = RefusalSeen::default();
            for body in bodies {
                r.add(&reply(503, &[], body));
            }
            r
        };
        assert!(seen(&["busy", "busy"]).declared_body().is_some());
        assert_eq!(seen(&["busy", "busy at 12:00:01"]).declared_body(), None);
        assert_eq!(seen(&[]).declared_body(), None);
    }

    #[test]
    fn retry_after_is_absent_constant_or_varying_and_rate_limit_headers_are_kept() {
        let seen = |replies: &[Reply]| {
            let mut r = RefusalSeen::default();
            for reply in replies {
                r.add(reply);
            }
            r
        };
        assert_eq!(seen(&[reply(429, &[], "")]).hint(), "absent");
        let constant = seen(&[
            reply(429, &[("retry-after", "1")], ""),
            reply(429, &[("retry-after", "1")], ""),
        ]);
        assert_eq!(constant.hint(), "present, constant `1`");
        assert_eq!(constant.delay_range(), Some((1, 1)));
        let ranged = seen(&[
            reply(429, &[("retry-after", "3")], ""),
            reply(429, &[("retry-after", "1")], ""),
        ]);
        assert_eq!(ranged.delay_range(), Some((1, 3)));
        let varying = seen(&[
            reply(
                429,
                &[("retry-after", "1"), ("ratelimit", "limit=2, remaining=0")],
                "",
            ),
            reply(
                429,
                &[("retry-after", "2"), ("ratelimit-policy", "2;w=1")],
                "",
            ),
            reply(503, &[], ""),
        ]);
        assert_eq!(
            varying.hint(),
            "present on 2 of 3 refusals, varying: `1`, `2`"
        );
        assert_eq!(varying.delay_range(), None, "missing on one");
        assert_eq!(varying.status(), 429);
        assert_eq!(
            varying.rate_limit,
            [
                ("ratelimit".to_owned(), "limit=2, remaining=0".to_owned()),
                ("ratelimit-policy".to_owned(), "2;w=1".to_owned()),
            ]
        );
    }

    #[test]
    fn a_delay_is_constant_only_when_every_refusal_gave_the_same_seconds() {
        let seen = |values: &[Option<&str>]| {
            let mut r = RefusalSeen::default();
            for value in values {
                let headers: Vec<(&str, &str)> =
                    value.iter().map(|v| ("retry-after", *v)).collect();
                r.add(&reply(503, &headers, ""));
            }
            r.constant_delay()
        };
        assert_eq!(seen(&[Some("1"), Some("1"), Some("1")]), Some(1));
        assert_eq!(seen(&[Some("1"), Some("2")]), None);
        assert_eq!(seen(&[Some("1"), None]), None);
        assert_eq!(seen(&[None, Some("1")]), None);
        assert_eq!(seen(&[Some("Wed, 21 Oct 2026 07:28:00 GMT")]), None);
        assert_eq!(seen(&[]), None);
    }

    #[test]
    fn the_most_common_is_the_first_among_equals() {
        assert_eq!(most_common(&[503, 429, 429]), Some(429));
        assert_eq!(most_common(&[503, 429]), Some(503));
        assert_eq!(most_common::<u16>(&[]), None);
    }
}
