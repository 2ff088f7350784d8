//! Broken behaviour hidden behind claims that say all is well. Each object here fills every seam
//! its lie needs (the behaviour, and the claim that hides it), so a checker has to catch it from
//! what its own client observes: `/metrics` and `/v1/contract` are only claims.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use plimsoll_spec::{Contract, MetricName, Pool};
use tokio_util::sync::CancellationToken;

use super::JOB_POOLS;
use crate::admission::Slot;
use crate::bounds::OnDisconnect;
use crate::claims::Claims;
use crate::worker::{SlotRelease, WorkerEnd};

/// How a lying `/metrics` rewrites what the server measured.
pub(super) trait MetricsLie: Debug + Send + Sync {
    fn rewrite(&self, exposition: String, effective: &Contract) -> String;
}

/// Every claim truthful except `/metrics`, which `L` rewrites.
#[derive(Debug)]
pub(super) struct LyingMetrics<L>(pub Arc<L>);

impl<L: MetricsLie> Claims for LyingMetrics<L> {
    fn metrics(&self, exposition: String, effective: &Contract) -> String {
        self.0.rewrite(exposition, effective)
    }
}

/// Replaces the value of every `name{…pool="P"…} V` sample with `f(P, V)`.
fn rewrite_samples(exposition: &str, name: MetricName, f: impl Fn(Pool, f64) -> f64) -> String {
    let prefix = format!("{name}{{");
    let mut out = String::with_capacity(exposition.len());
    for line in exposition.lines() {
        let pool = Pool::ALL
            .into_iter()
            .find(|p| line.starts_with(&prefix) && line.contains(&format!("pool=\"{p}\"")));
        let sample = line
            .rsplit_once(' ')
            .and_then(|(series, v)| Some((series, v.parse::<f64>().ok()?)));
        match (pool, sample) {
            (Some(pool), Some((series, value))) => {
                out.push_str(&format!("{series} {}", f(pool, value)));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these locks are held; recover the data regardless.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// B3: a client that goes away leaves its job running to its natural end (at most its
/// deadline), holding its slot, while `/metrics` drops it from the busy gauge at once.
#[derive(Debug, Default)]
pub(super) struct GaugeDropsOnDisconnect {
    /// Slots still held by jobs whose client went away: hidden from the gauge.
    hidden: Mutex<Vec<(Slot, Pool)>>,
}

impl OnDisconnect for GaugeDropsOnDisconnect {
    fn client_gone(&self, _job: &CancellationToken) {}
}

impl SlotRelease for GaugeDropsOnDisconnect {
    fn client_gone(&self, slot: &Slot, pool: Pool) {
        let mut hidden = lock(&self.hidden);
        if slot.is_held() {
            hidden.push((slot.clone(), pool));
        }
    }

    fn worker_stopped(&self, slot: &Slot, _end: &WorkerEnd<'_>) {
        let mut hidden = lock(&self.hidden);
        hidden.retain(|(s, _)| !s.same(slot));
        slot.release();
    }
}

impl MetricsLie for GaugeDropsOnDisconnect {
    fn rewrite(&self, exposition: String, _effective: &Contract) -> String {
        let hidden = lock(&self.hidden);
        rewrite_samples(&exposition, MetricName::WorkersBusy, |pool, busy| {
            busy - hidden.iter().filter(|(_, p)| *p == pool).count() as f64
        })
    }
}

/// B3: a job whose client went away never gives its slot back, and `/metrics` shows the busy
/// gauge as if it had.
#[derive(Debug, Default)]
pub(super) struct SlotLeakHonestGauge {
    leaked: Mutex<BTreeMap<Pool, u32>>,
}

impl SlotRelease for SlotLeakHonestGauge {
    fn worker_stopped(&self, slot: &Slot, end: &WorkerEnd<'_>) {
        if end.client_gone && JOB_POOLS.contains(&end.pool) {
            let mut leaked = lock(&self.leaked);
            if let Some(permit) = slot.take() {
                std::mem::forget(permit);
                *leaked.entry(end.pool).or_default() += 1;
            }
        } else {
            slot.release();
        }
    }
}

impl MetricsLie for SlotLeakHonestGauge {
    fn rewrite(&self, exposition: String, _effective: &Contract) -> String {
        let leaked = lock(&self.leaked);
        rewrite_samples(&exposition, MetricName::WorkersBusy, |pool, busy| {
            busy - f64::from(leaked.get(&pool).copied().unwrap_or(0))
        })
    }
}

/// T1: `/metrics` never shows more busy workers than the contract's limit, and shows that limit
/// as the pool's (paired with a sizing that has no limit, so the gauge hides the overrun).
#[derive(Debug)]
pub(super) struct ClampToLimit;

impl MetricsLie for ClampToLimit {
    fn rewrite(&self, exposition: String, effective: &Contract) -> String {
        let limit = |pool: Pool| f64::from(effective.pool(pool).workers);
        let clamped = rewrite_samples(&exposition, MetricName::WorkersBusy, |p, v| v.min(limit(p)));
        rewrite_samples(&clamped, MetricName::WorkersLimit, |p, _| limit(p))
    }
}

/// B3 (and the contract check): `/v1/contract` claims a looser stop bound and wider tolerances
/// than the contract's, and a job whose client went away runs on for `stops_after` before it
/// is cancelled: within the claimed bound, far past the contract's.
#[derive(Debug)]
pub(super) struct LooserContract {
    pub claimed_stop_within_ms: u64,
    /// Every `tolerances.*_ms` is claimed this many times wider.
    pub tolerance_factor: u64,
    pub stops_after: Duration,
}

impl Claims for LooserContract {
    fn contract<'c>(&self, effective: &'c Contract) -> Cow<'c, Contract> {
        let mut claimed = effective.clone();
        let digitize = claimed.pools.get_mut(Pool::Digitize.as_str());
        if let Some(cancellation) = digitize.and_then(|p| p.cancellation.as_mut()) {
            cancellation.stop_within_ms = self.claimed_stop_within_ms;
        }
        let t = &mut claimed.tolerances;
        for ms in [
            &mut t.refusal_latency_ms,
            &mut t.timeout_late_ms,
            &mut t.retry_after_jitter_ms,
            &mut t.metrics_poll_interval_ms,
        ] {
            *ms = ms.saturating_mul(self.tolerance_factor);
        }
        Cow::Owned(claimed)
    }
}

impl OnDisconnect for LooserContract {
    fn client_gone(&self, job: &CancellationToken) {
        let job = job.clone();
        let after = self.stops_after;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(after).await;
                    job.cancel();
                });
            }
            Err(_) => job.cancel(),
        }
    }
}
