//! T3: refusal at once, with a delay-seconds Retry-After that tracks the p50 queue wait.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::{ClauseId, ErrorCode, MetricName, Pool};

use crate::checks::ctx::{Ctx, ms, worst_and_median};
use crate::checks::pool::{
    Pending, drained, hold_first, join_all, plain_request_succeeds, spawn_digitize,
};
use crate::checks::registry::Check;
use crate::target::{Reply, Target};

pub const CHECK: Check = Check::clause(
    ClauseId::T3,
    "With every worker and queue place held, each further request gets {status:overloaded} \
     `overloaded` within the refusal tolerance, with `{retry_after_header}` as {format} in \
     range. A scripted scenario fills the estimator's window of {window_samples} samples with \
     refusals of known wait; the advertised delay must track their {estimator}, and a retry after \
     that delay succeeds.",
    |t, c| Box::pin(t3(t, c)),
);

/// Occupies every worker and queue place with requests held for `hold_ms`.
async fn saturate(t: &Arc<Target>, c: &mut Ctx, hold_ms: u64) -> Vec<Pending> {
    // Start from an idle pool: a worker still stopping after an earlier 504 would otherwise
    // push our holders into the queue and make the count wrong.
    if let Err(e) = drained(t, c).await {
        c.fail(format!("pool not idle before saturating: {e}"));
    }
    let mut tasks = Vec::new();
    let places = [
        (
            MetricName::WorkersBusy,
            t.digitize_workers(),
            "occupy every worker",
        ),
        (MetricName::QueueDepth, t.digitize_queue(), "fill the queue"),
    ];
    for (gauge, count, what) in places {
        if count == 0 {
            continue;
        }
        tasks.extend((0..count).map(|_| spawn_digitize(t, Some(hold_first(t, hold_ms)))));
        let full = |v: f64| v >= count as f64;
        if let Err(e) = t
            .wait_metric(gauge, Pool::Digitize, Duration::from_secs(5), full)
            .await
        {
            c.fail(format!("could not {what}: {e}"));
        }
    }
    tasks
}

/// Checks one refusal; returns its Retry-After seconds when well-formed.
fn judge_refusal(t: &Target, c: &mut Ctx, label: &str, reply: &Reply) -> Option<u64> {
    c.reply(t, label, reply);
    let t3 = &t.expected.clauses.t3.value;
    let header = &t3.retry_after_header;
    let max_s = Duration::from_millis(t.expected.clauses.b1.value.digitize_timeout_ms)
        .as_secs()
        .max(1);
    if !c.require_error(t, label, reply, ErrorCode::Overloaded) {
        return None;
    }
    let Some(raw) = reply.header(header) else {
        c.fail(format!("{label}: no {header} header"));
        return None;
    };
    match raw.trim().parse::<u64>() {
        Ok(n) if (t3.min_seconds..=max_s).contains(&n) => Some(n),
        Ok(n) => {
            c.fail(format!(
                "{label}: {header} {n} outside {}..={max_s}",
                t3.min_seconds
            ));
            None
        }
        Err(_) => {
            c.fail(format!("{label}: {header} `{raw}` is not {}", t3.format));
            None
        }
    }
}

async fn t3(t: &Arc<Target>, c: &mut Ctx) {
    let tol = &t.expected.tolerances;
    let t3 = &t.expected.clauses.t3.value;
    let header = &t3.retry_after_header;
    let overloaded = format!(
        "{} {}",
        t.status(ErrorCode::Overloaded),
        ErrorCode::Overloaded
    );
    let window = t3.window_samples as usize;
    c.expected = format!(
        "{overloaded} within {} ms, {header}: {} in range, within ±{} s of the p50 queue wait; a retry after it succeeds",
        tol.refusal_latency_ms,
        t3.format,
        tol.retry_after_jitter_ms.div_ceil(1000)
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
                // Judged by status alone here: the first three and any non-refusal are judged
                // in full below.
                let refused = reply.status == t.status(ErrorCode::Overloaded);
                if refused {
                    latencies.push(ms(reply.elapsed));
                }
                if i < 3 || !refused {
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
            c.reply(t, format!("held-{i}"), reply);
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
            c.reply(t, format!("resaturate-{i}"), reply);
        }
    }
    if let Some(n) = advertised {
        c.require(n.abs_diff(predicted) <= tol.retry_after_jitter_ms.div_ceil(1000), || {
            format!("{header} {n} s, but the p50 queue wait of the scenario was {:.2} s (→ {predicted} s)", p50.as_secs_f64())
        });
        // 4. Retry after the advertised delay, once the load has dropped: it succeeds.
        let _ = drained(t, c).await;
        tokio::time::sleep(Duration::from_secs(n).saturating_sub(advertised_at.elapsed())).await;
        plain_request_succeeds(t, c, "retry", &format!("the retry after {n} s")).await;
    }
    c.observed = format!(
        "{} refusals: worst {worst:.1} ms, median {median:.1} ms; {header} {} s vs p50 wait {:.2} s",
        latencies.len(),
        advertised.map_or("missing".to_owned(), |n| n.to_string()),
        p50.as_secs_f64()
    );
    c.evidence.push(format!(
        "predicted {header} {predicted} s from {} samples",
        samples.len()
    ));
}
