//! T4: a rate limit admits what its token bucket allows and refuses the rest at once with its
//! refusal, judged by the client's clock alone. First a burst of `burst + 1` requests and two
//! more, sent together into a bucket the checker let refill: exactly the bucket's requests are
//! admitted (up to the tokens that came back while they were sent), the rest refused, and the
//! admitted ones answered as the burst mode says (spaced at the rate for `delay`, together for
//! `nodelay`); a request under another key is admitted while the first key's bucket is spent.
//! Then probes sent at one and a half times the rate, each judged against the declared bucket
//! fed with what the service did: a probe refused with a token in the bucket, or admitted with
//! none, fails (a token's refill between a probe's sending and its answer excuses it: the
//! service counted it somewhere in between, see [`bucket::window`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::model::{BurstMode, LimitKey, RateLimit, Recipe, Refusal};
use plimsoll_spec::{ClauseId, Contract};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::{Pending, join_all, sleep_until};
use crate::checks::refusal::{allowed_seconds, hint_words, judge_refusal};
use crate::checks::registry::Check;
use crate::remote::{Reply, Target};

mod bucket;
mod fields;

use bucket::{Allowed, Bucket};

/// T4's entry in the check registry: the evidence the docs print, and `t4`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::T4,
    "For each rate limit, once its bucket has had time to refill: `burst + 1` requests and two \
     more sent together, of which exactly the bucket's are admitted (plus any token that came \
     back while they were sent) and the rest get the limit's refusal within the refusal \
     tolerance, with its hint when it declares one; the admitted ones answered as the burst mode \
     says (`delay`: the k-th no sooner than k / rate after the burst; `nodelay`: together); for a \
     limit keyed by a header, a request under another value admitted while the first value's \
     bucket is spent. Then twelve probes at one and a half times the rate, each judged against \
     the declared bucket fed with what the service did: refused with a token in it, or admitted \
     with none, fails, unless a token came back between its sending and its answer (at least \
     `tolerances.rate_limit_slack_ms` after the sending, at most the refusal tolerance).",
    |t, c| Box::pin(t4(t, c)),
)
.applies_when(applies);

/// T4 judges every declared rate limit.
fn applies(contract: &Contract) -> Result<(), String> {
    if contract.rate_limits.is_empty() {
        Err("no rate limit ([rate_limits])".into())
    } else {
        Ok(())
    }
}

/// Requests sent with the burst beyond the bucket: each must be refused.
const PAST_BURST: u32 = 2;
/// Probes of the rate, sent one and a half times as fast as it.
const RATE_PROBES: u32 = 12;
/// How long a request may take beyond the delays its limit declares before the checker gives
/// up on it.
const PATIENCE: Duration = Duration::from_secs(5);

/// T4 against every rate limit, one after another.
async fn t4(t: &Arc<Target>, c: &mut Ctx) {
    let (mut expected, mut observed) = (Vec::new(), Vec::new());
    for (name, limit) in &t.expected.rate_limits {
        let Some(refusal) = t.expected.refusals.get(&limit.refusal) else {
            continue; // the loader requires it
        };
        let judge = Judge::new(t, name, limit, refusal);
        expected.push(judge.expectation());
        observed.push(judge.run(c).await);
    }
    c.expected = expected.join("; ");
    c.observed = observed.join("; ");
}

/// One rate limit under judgement, with what every phase reads.
struct Judge<'c> {
    t: &'c Arc<Target>,
    name: &'c str,
    limit: &'c RateLimit,
    refusal: &'c Refusal,
    /// The limit's request, under the first key when the limit is keyed by a header.
    request: Recipe,
    /// How late a request may reach the service after it was sent.
    slack: Duration,
    /// One token's refill.
    step: Duration,
    /// How many answers carried wrong IETF RateLimit fields (the first few are failures of
    /// their own, the rest counted).
    fields_wrong: std::sync::atomic::AtomicU32,
}

impl<'c> Judge<'c> {
    fn new(t: &'c Arc<Target>, name: &'c str, limit: &'c RateLimit, refusal: &'c Refusal) -> Self {
        Judge {
            t,
            name,
            limit,
            refusal,
            request: keyed(limit, "plimsoll-a"),
            slack: Duration::from_millis(t.expected.tolerances.rate_limit_slack_ms),
            step: Duration::from_secs_f64(1.0 / f64::from(limit.rate_per_second)),
            fields_wrong: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// What T4 expects of the limit, in words.
    fn expectation(&self) -> String {
        let l = self.limit;
        let status = self.t.expected.refusal_status(self.refusal).unwrap_or(0);
        let hint = hint_words(self.refusal, self.allowed());
        format!(
            "{}: {} of {} sent at once admitted ({}/s, burst {}, {}), the rest {status} within {} \
             ms, {hint}; probes at {:.1}/s as the bucket allows",
            self.name,
            l.bucket(),
            l.bucket() + PAST_BURST,
            l.rate_per_second,
            l.burst,
            l.burst_mode.as_str(),
            self.t.expected.tolerances.refusal_latency_ms,
            1.5 * f64::from(l.rate_per_second)
        )
    }

    /// How long after its sending `reply`'s request may have been counted (see
    /// [`bucket::window`]).
    fn window(&self, reply: &Reply) -> Duration {
        let most = Duration::from_millis(self.t.expected.tolerances.refusal_latency_ms);
        bucket::window(reply.elapsed, self.slack, most)
    }

    /// The delays the refusal's hint may advertise, if it declares one.
    fn allowed(&self) -> Option<std::ops::RangeInclusive<u64>> {
        self.refusal
            .hint
            .as_ref()
            .map(|hint| allowed_seconds(hint, None))
    }

    /// The phases, after the bucket has had time to refill whatever ran before.
    /// The probes go out while the burst's admitted requests are still delayed, so they meet
    /// a spent bucket.
    async fn run(&self, c: &mut Ctx) -> String {
        tokio::time::sleep(self.step * self.limit.bucket() + self.slack).await;
        let mut bucket = Bucket::full(self.limit, Instant::now());
        let n = self.limit.bucket() + PAST_BURST;
        let started = Instant::now();
        let burst: Vec<Pending> = (0..n)
            .map(|_| spawn(self.t, &self.request, self.give_up(), started))
            .collect();
        let other = self.other_key(c, started);
        let probes = self.probes(c, started).await;
        let burst = self.burst(c, &mut bucket, burst).await;
        let isolation = match other {
            Some((header, task)) => self.isolation(c, &header, task).await,
            None => String::new(),
        };
        let rate = match probes {
            Some((start, tasks)) => self.rate(c, &mut bucket, start, tasks).await,
            None => "rate not probed".into(),
        };
        let fields = self.fields_summary(c);
        format!("{}: {burst}{isolation}; {rate}{fields}", self.name)
    }

    /// Judges one answer's IETF RateLimit fields, when the limit declares them.
    fn fields(&self, c: &mut Ctx, label: &str, reply: &Reply, admitted: bool) {
        let Some(declared) = &self.limit.fields else {
            return;
        };
        if let Some(wrong) = fields::judge(self.limit, &declared.policy, reply, !admitted) {
            let n = self
                .fields_wrong
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            if n <= 3 {
                c.fail(format!("{}-{label}: {wrong}", self.name));
            }
        }
    }

    /// The fields' verdict in words (and a failure counting the answers not shown), when the
    /// limit declares them.
    fn fields_summary(&self, c: &mut Ctx) -> String {
        if self.limit.fields.is_none() {
            return String::new();
        }
        match self.fields_wrong.load(std::sync::atomic::Ordering::Relaxed) {
            0 => "; RateLimit fields as declared on every answer".into(),
            n => {
                if n > 3 {
                    c.fail(format!(
                        "{}: {} more answers with wrong RateLimit fields",
                        self.name,
                        n - 3
                    ));
                }
                format!("; {n} answers with wrong RateLimit fields")
            }
        }
    }

    /// How long the checker waits for one of the limit's answers: its longest declared delay
    /// and [`PATIENCE`].
    fn give_up(&self) -> Duration {
        self.step * (self.limit.bucket() + PAST_BURST) + PATIENCE
    }

    /// The burst: the bucket's requests and [`PAST_BURST`] more, sent together.
    async fn burst(&self, c: &mut Ctx, bucket: &mut Bucket, tasks: Vec<Pending>) -> String {
        let n = tasks.len();
        let mut answered = self.collect(c, "burst", join_all(tasks).await);
        answered.sort_by_key(|r| r.sent);
        let (Some(first), Some(last)) = (answered.first(), answered.last()) else {
            return "no request of the burst was answered".into();
        };
        let (first, last) = (first.sent, last.sent);
        let window = answered.iter().map(|r| self.window(r)).max();
        let window = window.unwrap_or(self.slack);
        let (least, most) = bucket.burst_admits(first, last, window);
        let mut admitted = Vec::new();
        let mut refused = 0;
        for (i, reply) in answered.iter().enumerate() {
            let ok = reply.status == self.request.status;
            self.fields(c, &format!("burst-{i}"), reply, ok);
            if ok {
                admitted.push(reply);
            } else {
                refused += usize::from(self.refusal_ok(c, &format!("burst-{i}"), reply));
            }
            bucket.record(reply.sent, self.window(reply), ok);
        }
        let k = admitted.len() as u32;
        c.require((least..=most).contains(&k), || {
            format!(
                "{}: {k} of {n} requests sent at once were admitted; the bucket (burst {} + 1) \
                 admits {least}..={most} of them, counting the tokens refilled at {}/s over the \
                 {:.1} ms from the first sent to the last counted",
                self.name,
                self.limit.burst,
                self.limit.rate_per_second,
                ms(last + window - first)
            )
        });
        let spacing = self.spacing(c, &admitted, first);
        format!("{k} of {n} sent at once admitted, {refused} refused{spacing}")
    }

    /// For a limit keyed by a header or by client address: a request under another value, or
    /// from another address ([`crate::remote::ELSEWHERE`]), sent once the burst has spent the
    /// first key's bucket (twice the slack after it), which must be admitted. Nothing to judge
    /// for one key for all, or when a token comes back within that time.
    fn other_key(&self, c: &mut Ctx, started: Instant) -> Option<(String, Pending)> {
        let key = match &self.limit.key {
            LimitKey::All => return None,
            LimitKey::Header(header) => header.clone(),
            LimitKey::ClientAddress if self.t.on_loopback() => "client address".to_owned(),
            LimitKey::ClientAddress => {
                c.evidence.push(format!(
                    "{}: another client address not judged: the target is not on loopback, \
                     where the checker has a second address",
                    self.name
                ));
                return None;
            }
        };
        let wait = self.slack * 2;
        if wait.as_secs_f64() * f64::from(self.limit.rate_per_second) >= 0.9 {
            c.evidence.push(format!(
                "{}: another {key} not judged: at {}/s a token comes back within {} ms",
                self.name,
                self.limit.rate_per_second,
                wait.as_millis()
            ));
            return None;
        }
        let other = keyed(self.limit, "plimsoll-b");
        let elsewhere = matches!(self.limit.key, LimitKey::ClientAddress);
        let (t, limit, at) = (self.t.clone(), self.give_up(), started + wait);
        let task = tokio::spawn(async move {
            sleep_until(at).await;
            let sent = if elsewhere {
                t.send_recipe_elsewhere(&other, limit).await
            } else {
                t.send_recipe(&other, limit).await
            };
            Ok(sent?)
        });
        Some((key, task))
    }

    /// Judges the request under another key: admitted, or one key's requests spent another's.
    async fn isolation(&self, c: &mut Ctx, header: &str, task: Pending) -> String {
        let label = format!("{}-other-key", self.name);
        match task.await {
            Ok(Ok(reply)) => {
                c.reply(self.t, &label, &reply);
                c.require(reply.status == self.request.status, || {
                    format!(
                        "{}: a request under another {header} answered {} while the first \
                         one's bucket was spent: one key's requests spent another's",
                        self.name, reply.status
                    )
                });
                format!("; another {header}: {}", reply.status)
            }
            Ok(Err(e)) => {
                c.fail(format!("{label}: {e}"));
                format!("; another {header}: no answer")
            }
            Err(e) => {
                c.fail(format!("{label}: task failed: {e}"));
                format!("; another {header}: no answer")
            }
        }
    }

    /// The admitted requests' answers against the burst mode, when its delays are long enough
    /// beside the slack to tell from none.
    fn spacing(&self, c: &mut Ctx, admitted: &[&Reply], first: Instant) -> String {
        let n = admitted.len() as u32;
        let spread = self.step * n.saturating_sub(1);
        if n < 2 || spread < self.slack * 4 {
            c.evidence.push(format!(
                "{}: burst mode not judged: the delays `delay` would add ({:.0} ms) are within \
                 four times the slack",
                self.name,
                ms(spread)
            ));
            return String::new();
        }
        let mut ends: Vec<Duration> = admitted
            .iter()
            .map(|r| (r.sent + r.elapsed).saturating_duration_since(first))
            .collect();
        ends.sort();
        let over = ends[ends.len() - 1].saturating_sub(ends[0]);
        match self.limit.burst_mode {
            BurstMode::Delay => {
                for (i, end) in ends.iter().enumerate().skip(1) {
                    let due = self.step * i as u32;
                    c.require(*end + self.slack >= due, || {
                        format!(
                            "{}: admitted request {} of the burst answered {:.0} ms after it; \
                             `delay` spaces it to {:.0} ms at least",
                            self.name,
                            i + 1,
                            ms(*end),
                            ms(due)
                        )
                    });
                }
            }
            BurstMode::Nodelay => {
                c.require(over <= spread / 2, || {
                    format!(
                        "{}: the admitted requests were answered over {:.0} ms; `nodelay` \
                         answers them together (a delay would spread them over {:.0} ms)",
                        self.name,
                        ms(over),
                        ms(spread)
                    )
                });
            }
        }
        format!(", answered over {:.0} ms", ms(over))
    }

    /// Sends the rate's probes, one and a half times as fast as it, from three slacks after
    /// the burst (it has reached the service), when they can go far enough apart beside the
    /// slack. Returns when the first was due and their tasks.
    async fn probes(&self, c: &mut Ctx, started: Instant) -> Option<(Instant, Vec<Pending>)> {
        let every = self.step * 2 / 3;
        if every < self.slack * 2 {
            c.evidence.push(format!(
                "{}: the rate not probed: at {}/s probes would go out within twice the slack",
                self.name, self.limit.rate_per_second
            ));
            return None;
        }
        let start = started + every.max(self.slack * 3);
        let mut tasks = Vec::new();
        for k in 0..RATE_PROBES {
            sleep_until(start + every * k).await;
            tasks.push(spawn(self.t, &self.request, self.give_up(), Instant::now()));
        }
        Some((start, tasks))
    }

    /// Judges each probe against the bucket, in the order they were sent.
    async fn rate(
        &self,
        c: &mut Ctx,
        bucket: &mut Bucket,
        start: Instant,
        tasks: Vec<Pending>,
    ) -> String {
        let answered = self.collect(c, "probe", join_all(tasks).await);
        let (mut admitted, mut wrong) = (0, Vec::new());
        for (k, reply) in answered.iter().enumerate() {
            let ok = reply.status == self.request.status;
            self.fields(c, &format!("probe-{k}"), reply, ok);
            if !ok {
                self.refusal_ok(c, &format!("probe-{k}"), reply);
            }
            let at = ms(reply.sent.saturating_duration_since(start));
            let window = self.window(reply);
            match (bucket.allowed(reply.sent, window), ok) {
                (Allowed::Admit, false) => wrong.push(format!(
                    "probe {k} (sent at {at:.0} ms) was refused with a token in the bucket"
                )),
                (Allowed::Refuse, true) => wrong.push(format!(
                    "probe {k} (sent at {at:.0} ms) was admitted with none in the bucket"
                )),
                _ => {}
            }
            bucket.record(reply.sent, window, ok);
            admitted += usize::from(ok);
        }
        if !wrong.is_empty() {
            let shown: Vec<&str> = wrong.iter().take(3).map(String::as_str).collect();
            c.fail(format!(
                "{}: {} of {RATE_PROBES} probes at {:.1}/s went against the declared bucket \
                 ({}/s, burst {}): {}",
                self.name,
                wrong.len(),
                1.5 * f64::from(self.limit.rate_per_second),
                self.limit.rate_per_second,
                self.limit.burst,
                shown.join("; ")
            ));
        }
        format!(
            "{admitted} of {} probes admitted, {} against the bucket",
            answered.len(),
            wrong.len()
        )
    }

    /// The answers of a phase, each on the timeline (`NAME-PHASE-I`), and a failure for each
    /// request that got none.
    fn collect(
        &self,
        c: &mut Ctx,
        phase: &str,
        replies: Vec<Result<Reply, crate::checks::pool::TaskError>>,
    ) -> Vec<Reply> {
        let mut out = Vec::new();
        for (i, r) in replies.into_iter().enumerate() {
            let label = format!("{}-{phase}-{i}", self.name);
            match r {
                Ok(reply) => {
                    c.reply(self.t, &label, &reply);
                    out.push(reply);
                }
                Err(e) => c.fail(format!("{label}: {e}")),
            }
        }
        out
    }

    /// Judges a request the limit did not admit: its refusal, at once, with its hint.
    fn refusal_ok(&self, c: &mut Ctx, label: &str, reply: &Reply) -> bool {
        let tolerance = Duration::from_millis(self.t.expected.tolerances.refusal_latency_ms);
        if reply.status != self.request.status {
            c.sample("refusal latency", ms(reply.elapsed));
        }
        judge_refusal(
            self.t,
            c,
            self.refusal,
            self.allowed(),
            &format!("{}-{label}", self.name),
            reply,
            tolerance,
        )
    }
}

/// The limit's request, carrying `value` in its key header when the limit is keyed by one.
fn keyed(limit: &RateLimit, value: &str) -> Recipe {
    let mut request = limit.request.clone();
    if let LimitKey::Header(header) = &limit.key {
        request.headers.insert(header.clone(), value.to_owned());
    }
    request
}

/// Sends `recipe` at `at` on its own task, giving up after `limit`.
fn spawn(t: &Arc<Target>, recipe: &Recipe, limit: Duration, at: Instant) -> Pending {
    let (t, recipe) = (t.clone(), recipe.clone());
    tokio::spawn(async move {
        sleep_until(at).await;
        Ok(t.send_recipe(&recipe, limit).await?)
    })
}
