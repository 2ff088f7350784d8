//! T3: refusal at once, with a delay-seconds Retry-After that tracks the p50 queue wait.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Ctx, join_all, ms, spawn_digitize, worst_and_median};
use crate::target::{Reply, Target};

/// Occupies every worker and queue place with requests held for `hold_ms`.
async fn saturate(
    t: &Arc<Target>,
    c: &mut Ctx,
    hold_ms: u64,
) -> Vec<tokio::task::JoinHandle<Result<Reply, String>>> {
    let (workers, queue) = (t.digitize_workers(), t.digitize_queue());
    let stage = t.expected.stages.digitize[0];
    // Start from an idle pool: a worker still stopping after an earlier 504 would otherwise
    // push our holders into the queue and make the count wrong.
    let settle = t.stop_within() * 2;
    let baseline = c.baseline_busy;
    if let Err(e) = t
        .wait_metric("plimsoll_workers_busy", "digitize", settle, |v| {
            v <= baseline
        })
        .await
    {
        c.fail(format!("pool not idle before saturating: {e}"));
    }
    let mut tasks = Vec::new();
    for _ in 0..workers {
        tasks.push(spawn_digitize(t, Some(format!("hold={stage}:{hold_ms}"))));
    }
    if let Err(e) = t
        .wait_metric(
            "plimsoll_workers_busy",
            "digitize",
            Duration::from_secs(5),
            |v| v >= workers as f64,
        )
        .await
    {
        c.fail(format!("could not occupy every worker: {e}"));
    }
    for _ in 0..queue {
        tasks.push(spawn_digitize(t, Some(format!("hold={stage}:{hold_ms}"))));
    }
    if queue > 0
        && let Err(e) = t
            .wait_metric(
                "plimsoll_queue_depth",
                "digitize",
                Duration::from_secs(5),
                |v| v >= queue as f64,
            )
            .await
    {
        c.fail(format!("could not fill the queue: {e}"));
    }
    tasks
}

/// Checks one refusal; returns its Retry-After seconds when well-formed.
fn judge_refusal(t: &Target, c: &mut Ctx, label: &str, reply: &Reply) -> Option<u64> {
    c.reply(label, reply, t.request_id_header());
    let t3 = &t.expected.clauses.t3.value;
    let max_s = Duration::from_millis(t.expected.clauses.b1.value.digitize_timeout_ms)
        .as_secs()
        .max(1);
    if !c.require(reply.status == 503 && reply.code() == "overloaded", || {
        format!(
            "{label}: expected 503 overloaded, got {} {}",
            reply.status,
            reply.code()
        )
    }) {
        return None;
    }
    let Some(raw) = reply.header(&t3.retry_after_header) else {
        c.fail(format!("{label}: no {} header", t3.retry_after_header));
        return None;
    };
    match raw.trim().parse::<u64>() {
        Ok(n) if (t3.min_seconds..=max_s).contains(&n) => Some(n),
        Ok(n) => {
            c.fail(format!(
                "{label}: Retry-After {n} outside {}..={max_s}",
                t3.min_seconds
            ));
            None
        }
        Err(_) => {
            c.fail(format!("{label}: Retry-After `{raw}` is not delay-seconds"));
            None
        }
    }
}

pub async fn t3(t: &Arc<Target>, c: &mut Ctx) {
    let tol = &t.expected.tolerances;
    let t3 = &t.expected.clauses.t3.value;
    let window = t3.window_samples as usize;
    c.expected = format!(
        "503 overloaded within {} ms, {}: delay-seconds in range, within ±{} s of the p50 queue wait; a retry after it succeeds",
        tol.refusal_latency_ms, t3.retry_after_header, tol.retry_after_tracking_s
    );

    // 1. Saturate, then probe: every refusal answered at once.
    let hold_ms = 1500;
    let held = saturate(t, c, hold_ms).await;
    let mut latencies = Vec::new();
    let mut refused_at = Vec::new();
    for i in 0..t.trials.max(1) {
        match t.digitize(None).await {
            Ok(reply) => {
                latencies.push(ms(reply.elapsed));
                refused_at.push(reply.sent);
                judge_refusal(t, c, &format!("probe-{i}"), &reply);
            }
            Err(e) => c.fail(format!("probe-{i}: {e}")),
        }
    }
    // 2. A scripted scenario that fills the estimator's window with refusals of known wait:
    //    each waits from its refusal until the next slot frees.
    let scripted: Vec<_> = (0..window).map(|_| spawn_digitize(t, None)).collect();
    for (i, r) in join_all(scripted).await.into_iter().enumerate() {
        match r {
            Ok(reply) => {
                refused_at.push(reply.sent);
                if reply.status == 503 {
                    latencies.push(ms(reply.elapsed));
                }
                if i < 3 || reply.status != 503 {
                    judge_refusal(t, c, &format!("scripted-{i}"), &reply);
                }
            }
            Err(e) => c.fail(format!("scripted-{i}: {e}")),
        }
    }
    let held = join_all(held).await;
    let freed = held
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| r.sent + r.elapsed)
        .min()
        .unwrap_or_else(Instant::now);
    for (i, r) in held.iter().enumerate() {
        if let Ok(reply) = r {
            c.reply(format!("held-{i}"), reply, t.request_id_header());
        }
    }
    let (worst, median) = worst_and_median(&latencies);
    c.trials_ms = latencies.clone();
    c.require(worst <= tol.refusal_latency_ms as f64, || {
        format!(
            "slowest refusal took {worst:.1} ms > {} ms",
            tol.refusal_latency_ms
        )
    });

    // The window now ends with the last `window` refusal samples.
    let mut samples: Vec<Duration> = refused_at
        .iter()
        .map(|&at| freed.saturating_duration_since(at))
        .collect();
    let keep = samples.len().saturating_sub(window);
    samples.drain(..keep);
    samples.sort();
    let p50 = samples
        .get(samples.len().div_ceil(2).saturating_sub(1))
        .copied()
        .unwrap_or_default();
    let predicted = (p50.as_secs() + u64::from(p50.subsec_nanos() > 0)).max(t3.min_seconds);

    // 3. Saturate again and read the advertised delay.
    let held = saturate(t, c, hold_ms).await;
    let advertised = match t.digitize(None).await {
        Ok(reply) => judge_refusal(t, c, "retry-after-probe", &reply),
        Err(e) => {
            c.fail(format!("retry-after probe: {e}"));
            None
        }
    };
    let advertised_at = Instant::now();
    for (i, r) in join_all(held).await.iter().enumerate() {
        if let Ok(reply) = r {
            c.reply(format!("resaturate-{i}"), reply, t.request_id_header());
        }
    }
    if let Some(n) = advertised {
        c.require(n.abs_diff(predicted) <= tol.retry_after_tracking_s, || {
            format!("Retry-After {n} s, but the p50 queue wait of the scenario was {:.2} s (→ {predicted} s)", p50.as_secs_f64())
        });
        // 4. Retry after the advertised delay, once the load has dropped: it succeeds.
        let _ = t
            .wait_metric(
                "plimsoll_workers_busy",
                "digitize",
                t.stop_within() * 2,
                |v| v <= c.baseline_busy,
            )
            .await;
        tokio::time::sleep(Duration::from_secs(n).saturating_sub(advertised_at.elapsed())).await;
        match t.digitize(None).await {
            Ok(reply) => {
                c.reply("retry", &reply, t.request_id_header());
                c.require(reply.status == 200, || {
                    format!("the retry after {n} s answered {}", reply.status)
                });
            }
            Err(e) => c.fail(format!("retry: {e}")),
        }
    }
    c.observed = format!(
        "{} refusals: worst {worst:.1} ms, median {median:.1} ms; Retry-After {} s vs p50 wait {:.2} s",
        latencies.len(),
        advertised.map_or("missing".to_owned(), |n| n.to_string()),
        p50.as_secs_f64()
    );
    c.evidence.push(format!(
        "predicted Retry-After {predicted} s from {} samples",
        samples.len()
    ));
}
