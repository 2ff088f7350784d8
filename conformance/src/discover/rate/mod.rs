//! `plimsoll discover --rate-limit`: a route's rate limit measured from outside, by the client's
//! clock alone, for a `[rate_limits.NAME]` draft ([`draft`]). The limit is taken to be a token
//! bucket (the contract's model, T4's): `burst + 1` tokens refilled at a rate, each admitted
//! request taking one, the rest refused at once.
//!
//! Four phases, never more requests in flight than the ceiling nor more in all than
//! [`RatePlan::most_sent`]:
//! 1. *Quiet*: nothing is sent for [`RatePlan::quiet`], so that a bucket that refills within it
//!    is full when the burst arrives (a draft whose bucket takes longer is marked).
//! 2. *Burst*: the ceiling's requests at once. The admitted are the bucket, `burst + 1`; the
//!    refused show the refusal (status, body, hint, as the pool's probe reads them); the
//!    admitted answers spread over `(burst) / rate` under `delay`, together under `nodelay`.
//! 3. *Pace*: probes at [`PACE_FACTOR`] times a first estimate of the rate (from the burst's
//!    spacing under `delay`, else from the first token to come back, found with probes spaced
//!    ever wider, for no longer than the quiet), so the bucket stays spent and each admitted probe marks a token's refill
//!    within one probe's gap: the rate is the admissions over the time between the first and
//!    the last, within a gap of each end (the evidence gives that bound).
//! 4. *Key* (with a header named) and *connection*: requests under other values of the
//!    header while the first value's bucket is spent (two trials), then one on a bare connection of its
//!    own to see whether the refusal keeps it open.

pub mod draft;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use plimsoll_spec::Contract;
use plimsoll_spec::model::{BurstMode, Recipe};
use tokio::sync::Semaphore;

use super::progress::{Phase, Step};
use super::{ConnectionSeen, DiscoverError, NotSeen, RefusalSeen};
use crate::checks::pool::{Pending, TaskError, join_all, sleep_until};
use crate::remote::{Reply, Target};

/// How long discover sends nothing before the burst unless told: a bucket of `burst + 1`
/// tokens at `rate` a second is full again `(burst + 1) / rate` seconds after it was spent,
/// and two seconds covers the common limits (5/s with a burst of 9, 50/s with one of 99);
/// a bucket found to take longer is marked in the draft, with the quiet period to ask for.
pub const QUIET: Duration = Duration::from_secs(2);

/// The most probes of the rate (its first estimate's and the paced ones): with the burst's,
/// the connection's and the key's, the bound on everything discover sends.
pub const PROBES: u32 = 80;

/// The requests sent after the rate's probes: the key's two a trial and the connection's two.
const AFTER: u32 = 2 * KEY_TRIALS + 2;

/// How much faster than the first estimate of the rate the probes go: fast enough that the
/// bucket stays spent even when the estimate is a third too low, and each admission is
/// timed within a quarter of a token's refill.
pub const PACE_FACTOR: u32 = 4;

/// How many tokens' refills the paced phase aims to see after the bucket is spent: five
/// intervals, so that a gap of a quarter of an interval at each end is 5 % of the whole.
const REFILLS: u32 = 6;

/// The closest two probes go: a loopback request takes about a millisecond, and probes closer
/// than this would measure the client rather than the bucket.
const FINEST_GAP: Duration = Duration::from_millis(5);

/// The first gap of the search for the first token's return, and how much wider each next one
/// is: found within about 15 % (the gap it fell in), in about fifteen probes at 5/s.
const FIRST_GAP: Duration = Duration::from_millis(5);
const GROWTH: f64 = 1.15;

/// The spread of the burst's admitted answers beyond which they were delayed, not answered
/// together: well above a loopback request's jitter. Judged again against the measured rate.
const SPREAD: Duration = Duration::from_millis(50);

/// How long one request may take beyond the delays the limit adds before discover gives up
/// on it.
const PATIENCE: Duration = Duration::from_secs(5);

/// The values of the key header discover sends: the first's bucket is the one it measures.
pub const FIRST_KEY: &str = "plimsoll-discover-a";
/// The other values' stem, each trial's its own (`…-0`, `…-1`), sent once the first's bucket
/// is spent.
pub const OTHER_KEY: &str = "plimsoll-discover-b";

/// The most trials of the key: two must admit the other value, and a trial whose first value
/// finds a token back is tried again.
const KEY_TRIALS: u32 = 4;

/// What to measure: one route's rate limit, the most requests at once, how long to let the
/// bucket fill.
#[derive(Debug, Clone)]
pub struct RatePlan {
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
    /// A header whose value may key the limit (`X-Api-Key`): sent with [`FIRST_KEY`], and in
    /// the key's trials with [`OTHER_KEY`]'s values to see whether each has a bucket of its own.
    pub key_header: Option<String>,
    /// The most requests in flight at once, and the burst's size.
    pub ceiling: u32,
    /// How long nothing is sent before the burst ([`QUIET`] unless told).
    pub quiet: Duration,
}

impl RatePlan {
    /// The limit's `request` as the draft declares it: the user's, without the key header.
    pub fn recipe(&self) -> Recipe {
        Recipe {
            method: self.method.clone(),
            path: self.path.clone(),
            headers: self.headers.clone(),
            body: self.body.clone(),
            body_file: None,
            body_bytes: None,
            status: 200,
        }
    }

    /// The request sent under key `value` (the recipe itself when no key header is named).
    fn keyed(&self, value: &str) -> Recipe {
        let mut r = self.recipe();
        if let Some(header) = &self.key_header {
            r.headers.insert(header.clone(), value.to_owned());
        }
        r
    }

    /// The most requests discover sends in all: the burst (the ceiling), the probes of the
    /// rate, the key's trials and the connection's two.
    pub fn most_sent(&self) -> u32 {
        self.ceiling.max(1) + PROBES + AFTER
    }
}

/// The burst, by the client's clock.
#[derive(Debug, Clone)]
pub struct BurstSeen {
    /// Requests sent at once.
    pub sent: usize,
    /// Of them admitted: the bucket, `burst + 1`.
    pub admitted: usize,
    /// How long the sending took (tokens refilled meanwhile are admitted too).
    pub sending: Duration,
    /// The time between the first and the last admitted answer.
    pub spread: Duration,
}

/// The rate, from the paced probes.
#[derive(Debug, Clone)]
pub struct RateSeen {
    /// The estimate, requests a second.
    pub per_second: f64,
    /// The first estimate the pace was set from, and what gave it.
    pub first: (f64, &'static str),
    /// How far apart the probes went.
    pub gap: Duration,
    /// Probes sent at that pace.
    pub probes: usize,
    /// Admissions after the bucket was first found spent, whose times give the estimate.
    pub refills: usize,
    /// The time between the first and the last of them.
    pub over: Duration,
}

impl RateSeen {
    /// The most the estimate may be off, as a fraction: a gap at each end of `over`.
    pub fn uncertainty(&self) -> f64 {
        if self.over.is_zero() {
            return 1.0;
        }
        self.gap.as_secs_f64() / self.over.as_secs_f64()
    }
}

/// Whether the limit is keyed by the named header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySeen {
    /// No header was named: whose requests share the bucket was not probed.
    NotProbed,
    /// Other values were admitted, in two trials, each right after the first's was refused:
    /// each value has a bucket of its own.
    ByHeader(String),
    /// Another value was refused too: the values share a bucket.
    Shared(String),
    /// The probe could not tell (a token came back between, or a request failed).
    Unclear(String, String),
}

/// Everything discover saw of the limit.
#[derive(Debug, Clone)]
pub struct RateFindings {
    /// How long nothing was sent before the burst.
    pub quiet: Duration,
    /// The burst.
    pub burst: BurstSeen,
    /// The burst mode the answers showed, `None` when fewer than two were admitted (the modes
    /// are then the same).
    pub mode: Option<BurstMode>,
    /// The rate, or why it was not measured.
    pub rate: Result<RateSeen, String>,
    /// The refusals: the burst's and the probes'.
    pub refusal: RefusalSeen,
    /// Whether the named header keys the limit.
    pub key: KeySeen,
    /// What a connection did after a refusal on it.
    pub connection: Option<Result<ConnectionSeen, NotSeen>>,
    /// Requests sent in all.
    pub sent: u32,
    /// The tolerances the draft will be judged by, for the evidence: T3's refusal latency and
    /// T4's slack.
    pub refusal_latency_ms: u64,
    /// T4's slack, in ms.
    pub slack_ms: u64,
}

impl RateFindings {
    /// Whether the burst found a refusal: else the bucket is at least the ceiling.
    pub fn refused(&self) -> bool {
        self.burst.admitted < self.burst.sent
    }

    /// How long a full bucket takes to refill at the measured rate.
    pub fn refill(&self) -> Option<Duration> {
        let rate = self.rate.as_ref().ok()?.per_second;
        (rate > 0.0).then(|| Duration::from_secs_f64(self.burst.admitted as f64 / rate))
    }
}

/// Sends within the plan's bounds: at most `ceiling` requests in flight, at most `most` in all.
struct Sender {
    t: Arc<Target>,
    slots: Arc<Semaphore>,
    sent: Arc<AtomicU32>,
    most: u32,
    limit: Duration,
}

impl Sender {
    /// Sends `recipe` at `at` on its own task, within the bounds; `None` when the plan's
    /// requests are spent.
    fn spawn(&self, recipe: &Recipe, at: Instant) -> Option<Pending> {
        if !self.take(1) {
            return None;
        }
        let (t, recipe, slots, limit) = (
            self.t.clone(),
            recipe.clone(),
            self.slots.clone(),
            self.limit,
        );
        Some(tokio::spawn(async move {
            sleep_until(at).await;
            let _slot = slots.acquire_owned().await.ok();
            Ok(t.send_recipe(&recipe, limit).await?)
        }))
    }

    /// Counts `n` more requests against the plan's bound, if they fit.
    fn take(&self, n: u32) -> bool {
        self.sent
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s + n <= self.most).then_some(s + n)
            })
            .is_ok()
    }

    /// Sends `recipe` now and waits for its answer.
    async fn one(&self, recipe: &Recipe) -> Option<Result<Reply, TaskError>> {
        let task = self.spawn(recipe, Instant::now())?;
        Some(task.await.unwrap_or_else(|e| Err(TaskError::Failed(e))))
    }
}

/// Measures the rate limit of the route `plan` names, telling `say` each phase as it starts
/// and what it saw.
pub async fn discover_rate(
    plan: &RatePlan,
    say: &mut dyn FnMut(Step),
) -> Result<RateFindings, DiscoverError> {
    let contract = probe_contract().map_err(DiscoverError::Plan)?;
    let tolerances = contract.tolerances.clone();
    let t = Arc::new(Target::new(plan.target.clone(), contract, None, None, 1));
    let s = Sender {
        t: t.clone(),
        slots: Arc::new(Semaphore::new(plan.ceiling.max(1) as usize)),
        sent: Arc::new(AtomicU32::new(0)),
        most: plan.most_sent(),
        limit: PATIENCE * 2,
    };
    say(Step {
        phase: Phase::Quiet,
        line: format!(
            "quiet: nothing sent for {} ms, so that a bucket refilled within it is full for the burst",
            plan.quiet.as_millis()
        ),
        left: plan.quiet + Duration::from_secs(4),
    });
    tokio::time::sleep(plan.quiet).await;
    let mut refusal = RefusalSeen::default();
    let (burst, admitted, first_sent) = spend(plan, &s, &mut refusal, say).await?;
    let mut f = RateFindings {
        quiet: plan.quiet,
        mode: None,
        rate: Err("not probed: no refusal in the burst".into()),
        refusal,
        key: KeySeen::NotProbed,
        connection: None,
        sent: 0,
        refusal_latency_ms: tolerances.refusal_latency_ms,
        slack_ms: tolerances.rate_limit_slack_ms,
        burst,
    };
    if f.refused() {
        let delayed = f.burst.spread >= SPREAD && admitted >= 2;
        let first = if delayed {
            let r = (admitted - 1) as f64 / f.burst.spread.as_secs_f64();
            Ok((r, "the burst's admitted answers, spaced by the delay"))
        } else {
            first_refill(plan, &s, first_sent, &mut f.refusal, say).await
        };
        match first {
            Ok(first) => {
                let pace = pace(plan, &s, (first, f.burst.admitted as u32), say).await;
                // While the last probes' answers are still due, the bucket is spent: the key's
                // and the connection's probes find it so.
                f.key = key(plan, &s).await;
                f.connection = Some(connection(plan, &s, &t).await);
                f.rate = paced(pace, &mut f.refusal, say).await;
            }
            Err(e) => f.rate = Err(e),
        }
        f.mode = mode(&f);
    }
    f.sent = s.sent.load(Ordering::SeqCst);
    Ok(f)
}

/// The contract discover's requests are sent under: no pool and no limit, the embedded
/// contract's tolerances.
fn probe_contract() -> Result<Contract, String> {
    let text = draft::probe_document().map_err(|e| e.to_string())?;
    Contract::from_toml(&text, "the probe of the route").map_err(|e| e.to_string())
}

/// The burst: the ceiling's requests at once into the full bucket. Returns what it showed,
/// how many were admitted, and when the first was sent.
async fn spend(
    plan: &RatePlan,
    s: &Sender,
    refusal: &mut RefusalSeen,
    say: &mut dyn FnMut(Step),
) -> Result<(BurstSeen, usize, Instant), DiscoverError> {
    let n = plan.ceiling.max(1) as usize;
    say(Step {
        phase: Phase::Burst,
        line: format!("burst: {n} request(s) at once into the full bucket"),
        left: Duration::from_secs(4),
    });
    let request = plan.keyed(FIRST_KEY);
    let at = Instant::now();
    let tasks: Vec<Pending> = (0..n).filter_map(|_| s.spawn(&request, at)).collect();
    let mut replies = Vec::new();
    for r in join_all(tasks).await {
        replies.push(r.map_err(|e| DiscoverError::Unexpected {
            size: n,
            what: e.to_string(),
        })?);
    }
    replies.sort_by_key(|r| r.sent);
    let admitted: Vec<&Reply> = replies.iter().filter(|r| r.status < 400).collect();
    for r in replies.iter().filter(|r| r.status >= 400) {
        refusal.add(r);
    }
    if admitted.is_empty() {
        return Err(DiscoverError::NotServed(format!(
            "none of the burst's {n} was admitted, after {} ms of quiet (status {})",
            plan.quiet.as_millis(),
            refusal.status()
        )));
    }
    let mut ends: Vec<Instant> = admitted.iter().map(|r| r.answered()).collect();
    ends.sort();
    let first = replies[0].sent;
    let seen = BurstSeen {
        sent: n,
        admitted: admitted.len(),
        sending: replies[replies.len() - 1].sent.duration_since(first),
        spread: ends[ends.len() - 1].duration_since(ends[0]),
    };
    say(Step {
        phase: Phase::Burst,
        line: format!(
            "burst: {} of {n} admitted, answered over {} ms; {} refused {}",
            seen.admitted,
            seen.spread.as_millis(),
            n - seen.admitted,
            refusal.status()
        ),
        left: Duration::from_secs(3),
    });
    Ok((seen, admitted.len(), first))
}

/// The first estimate of the rate when the burst's answers came together: probes one at a
/// time, each gap [`GROWTH`] times the last, until one is admitted after one was refused; the
/// rate is one token over the time since the bucket was last spent (by the burst, or by a
/// probe admitted before the first refusal).
async fn first_refill(
    plan: &RatePlan,
    s: &Sender,
    spent: Instant,
    refusal: &mut RefusalSeen,
    say: &mut dyn FnMut(Step),
) -> Result<(f64, &'static str), String> {
    say(Step {
        phase: Phase::Pace,
        line: format!(
            "first token: probes one at a time, {} ms apart and each gap {GROWTH}× the last, until one is admitted",
            FIRST_GAP.as_millis()
        ),
        left: Duration::from_secs(3),
    });
    let request = plan.keyed(FIRST_KEY);
    let (mut gap, mut refused, mut spent) = (FIRST_GAP, false, spent);
    // A bucket full again within the quiet has a token back within it too: searching longer
    // would measure a bucket the burst did not find full.
    while spent.elapsed() < plan.quiet {
        let Some(answer) = s.one(&request).await else {
            return Err(format!(
                "not measured: the plan's {} requests were spent before a token came back",
                plan.most_sent()
            ));
        };
        let reply = answer.map_err(|e| format!("not measured: a probe failed: {e}"))?;
        if reply.status < 400 && !refused {
            // A token left or back before the bucket was found spent: spent again by this.
            spent = reply.sent;
            continue;
        }
        if reply.status < 400 {
            let after = reply.sent.duration_since(spent).as_secs_f64();
            return Ok((
                1.0 / after.max(1e-3),
                "the first token back after the burst",
            ));
        }
        refusal.add(&reply);
        refused = true;
        tokio::time::sleep(gap).await;
        gap = gap.mul_f64(GROWTH);
    }
    Err(format!(
        "not measured: no token came back within the quiet ({} ms) after the burst: raise --quiet-ms",
        plan.quiet.as_millis()
    ))
}

/// The paced probes under way: their tasks, their gap, and the first estimate they were paced
/// by.
struct Pace {
    tasks: Vec<Pending>,
    gap: Duration,
    first: (f64, &'static str),
}

/// Sends the paced probes: [`PACE_FACTOR`] times the first estimate, long enough for the
/// `bucket`'s tokens and [`REFILLS`] more. Returns once the last is sent (leaving room
/// in the plan for the key's and the connection's probes).
async fn pace(
    plan: &RatePlan,
    s: &Sender,
    ((first, from), bucket): ((f64, &'static str), u32),
    say: &mut dyn FnMut(Step),
) -> Pace {
    let gap = Duration::from_secs_f64(1.0 / (first * f64::from(PACE_FACTOR))).max(FINEST_GAP);
    let left = plan
        .most_sent()
        .saturating_sub(s.sent.load(Ordering::SeqCst) + AFTER);
    // The bucket may be full again (the burst's delayed answers took its refill time): its
    // tokens are spent at three times the rate, well within the ones this paces for.
    let wanted = PACE_FACTOR * (bucket + REFILLS + 2);
    let n = wanted.min(left);
    say(Step {
        phase: Phase::Pace,
        line: format!(
            "pace: {n} probes {} ms apart ({PACE_FACTOR}× {first:.1}/s, from {from})",
            gap.as_millis()
        ),
        left: gap * n + Duration::from_secs(1),
    });
    let request = plan.keyed(FIRST_KEY);
    let start = Instant::now();
    let tasks: Vec<Pending> = (0..n)
        .filter_map(|k| s.spawn(&request, start + gap * k))
        .collect();
    sleep_until(start + gap * n.saturating_sub(1) + Duration::from_millis(1)).await;
    Pace {
        tasks,
        gap,
        first: (first, from),
    }
}

/// The paced probes' answers: every refusal added to `refusal`, and the rate from the
/// admissions after the first refusal.
async fn paced(
    pace: Pace,
    refusal: &mut RefusalSeen,
    say: &mut dyn FnMut(Step),
) -> Result<RateSeen, String> {
    let mut replies = Vec::new();
    for r in join_all(pace.tasks).await {
        replies.push(r.map_err(|e| format!("not measured: a probe failed: {e}"))?);
    }
    replies.sort_by_key(|r| r.sent);
    for r in replies.iter().filter(|r| r.status >= 400) {
        refusal.add(r);
    }
    let seen = estimate(&replies, pace.gap, pace.first);
    say(Step {
        phase: Phase::Pace,
        line: match &seen {
            Ok(r) => format!(
                "pace: {} tokens came back over {} ms: {:.2}/s (within {:.0} %)",
                r.refills,
                r.over.as_millis(),
                r.per_second,
                100.0 * r.uncertainty()
            ),
            Err(e) => format!("pace: {e}"),
        },
        left: Duration::ZERO,
    });
    seen
}

/// The rate from paced probes sorted by when they were sent: the admissions after the first
/// refusal each mark a token's refill within a `gap` of it, so the rate is those refills'
/// count less one over the time from the first to the last.
fn estimate(
    replies: &[Reply],
    gap: Duration,
    first: (f64, &'static str),
) -> Result<RateSeen, String> {
    let Some(spent) = replies.iter().position(|r| r.status >= 400) else {
        return Err(format!(
            "not measured: every one of {} probes {} ms apart was admitted: the pace was below the rate",
            replies.len(),
            gap.as_millis()
        ));
    };
    let refills: Vec<Instant> = replies[spent..]
        .iter()
        .filter(|r| r.status < 400)
        .map(|r| r.sent)
        .collect();
    if refills.len() < 3 {
        return Err(format!(
            "not measured: {} token(s) came back over {} probes {} ms apart; at least 3 are needed",
            refills.len(),
            replies.len() - spent,
            gap.as_millis()
        ));
    }
    let over = refills[refills.len() - 1].duration_since(refills[0]);
    Ok(RateSeen {
        per_second: (refills.len() - 1) as f64 / over.as_secs_f64().max(1e-6),
        first,
        gap,
        probes: replies.len(),
        refills: refills.len(),
        over,
    })
}

/// The burst mode, once the rate is known: the admitted answers spread over at least half the
/// time `delay` would space them (a token's refill between each) is `delay`, less `nodelay`.
fn mode(f: &RateFindings) -> Option<BurstMode> {
    if f.burst.admitted < 2 {
        return None;
    }
    let delay = match &f.rate {
        Ok(r) => (f.burst.admitted - 1) as f64 / r.per_second,
        Err(_) => SPREAD.as_secs_f64() * 2.0,
    };
    Some(if f.burst.spread.as_secs_f64() >= delay / 2.0 {
        BurstMode::Delay
    } else {
        BurstMode::Nodelay
    })
}

/// With a key header named: trials of one request under the first value and, once it is
/// refused (its bucket spent), one under another value of its own; a token that comes back
/// between the two could admit the other under a shared bucket, so two trials must both admit
/// it. At most [`KEY_TRIALS`] trials.
async fn key(plan: &RatePlan, s: &Sender) -> KeySeen {
    let Some(header) = plan.key_header.clone() else {
        return KeySeen::NotProbed;
    };
    let mut seen = Vec::new();
    let mut admitted = 0;
    for trial in 0..KEY_TRIALS {
        let first = match s.one(&plan.keyed(FIRST_KEY)).await {
            Some(Ok(reply)) => reply.status,
            Some(Err(e)) => return KeySeen::Unclear(header, format!("a probe failed: {e}")),
            None => return KeySeen::Unclear(header, "the plan's requests were spent".into()),
        };
        if first < 400 {
            seen.push(format!("the first value admitted ({first})"));
            continue; // a token came back: spent again, try again
        }
        let other = format!("{OTHER_KEY}-{trial}");
        let status = match s.one(&plan.keyed(&other)).await {
            Some(Ok(reply)) => reply.status,
            Some(Err(e)) => return KeySeen::Unclear(header, format!("a probe failed: {e}")),
            None => return KeySeen::Unclear(header, "the plan's requests were spent".into()),
        };
        seen.push(format!(
            "the first refused {first}, another answered {status}"
        ));
        if status >= 400 {
            return KeySeen::Shared(header);
        }
        admitted += 1;
        if admitted == 2 {
            return KeySeen::ByHeader(header);
        }
    }
    KeySeen::Unclear(header, seen.join("; "))
}

/// What a connection does after a refusal: the limit's request on a bare connection of its own
/// while the bucket is spent, then a second on it (two of the plan's requests, one slot).
async fn connection(plan: &RatePlan, s: &Sender, t: &Target) -> Result<ConnectionSeen, NotSeen> {
    if !s.take(2) {
        return Err(NotSeen::Failed("the plan's requests were spent".into()));
    }
    let _slot = s.slots.acquire().await.ok();
    crate::remote::connection::after_refusal(t, &plan.keyed(FIRST_KEY), PATIENCE).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply of `status` sent `at_ms` after `start`.
    fn reply(start: Instant, at_ms: u64, status: u16) -> Reply {
        Reply {
            status,
            headers: reqwest::header::HeaderMap::new(),
            body: Vec::new(),
            sent: start + Duration::from_millis(at_ms),
            elapsed: Duration::from_millis(1),
            timing: None,
            violations: Vec::new(),
            pool: None,
        }
    }

    #[test]
    fn the_rate_is_the_refills_after_the_first_refusal_over_their_time() {
        let start = Instant::now();
        // Probes every 50 ms: two leftover tokens, then one back every 200 ms.
        let replies: Vec<Reply> = (0..20)
            .map(|k| {
                let at = 50 * k;
                let admitted = k < 2 || (k >= 4 && k % 4 == 0);
                reply(start, at, if admitted { 200 } else { 429 })
            })
            .collect();
        let r = estimate(&replies, Duration::from_millis(50), (4.0, "test")).unwrap();
        // Admitted at 200, 400, …, 800 ms after the first refusal: four refills over 600 ms.
        assert_eq!(r.refills, 4);
        assert_eq!(r.over, Duration::from_millis(600));
        assert!((r.per_second - 5.0).abs() < 1e-9, "{}", r.per_second);
        assert!((r.uncertainty() - 50.0 / 600.0).abs() < 1e-9);
    }

    #[test]
    fn a_pace_below_the_rate_or_too_few_refills_is_not_a_measurement() {
        let start = Instant::now();
        let all: Vec<Reply> = (0..5).map(|k| reply(start, 50 * k, 200)).collect();
        let e = estimate(&all, Duration::from_millis(50), (4.0, "test")).unwrap_err();
        assert!(e.contains("the pace was below the rate"), "{e}");
        let few: Vec<Reply> = (0..5)
            .map(|k| reply(start, 50 * k, if k == 3 { 200 } else { 429 }))
            .collect();
        let e = estimate(&few, Duration::from_millis(50), (4.0, "test")).unwrap_err();
        assert!(e.contains("1 token(s) came back"), "{e}");
    }
}
