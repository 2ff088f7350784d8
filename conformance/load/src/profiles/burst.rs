//! `burst`: waves of workers × factor requests released together from a barrier, each holding
//! a fixed time; the next wave leaves once the busy gauge reads 0.

use std::time::Duration;

use plimsoll_conformance::remote::process::ProcessSource;
use plimsoll_conformance::session::Fatal;
use plimsoll_conformance::verdict::series::Span;

use super::super::progress::Goal;
use super::super::recovery::{self, Ending};
use super::super::run::{DrainWait, Hold, HoldPlan};
use super::super::run::{RunKind, RunSpec, keep_alive};
use super::super::verdicts;
use super::super::{Ctx, LoadPlan};
use super::{Profiled, drive};

pub(crate) async fn run(load: &LoadPlan, ctx: &Ctx<'_>) -> Result<Profiled, Fatal> {
    let l = ctx.section();
    let b = &l.burst;
    let (c, admit) = (ctx.expect.workers as usize, ctx.expect.admissible());
    let mut per_wave = c * b.factor as usize;
    if per_wave <= admit {
        // Too few to overflow workers + queue: send as many again as there are workers.
        per_wave = admit + c;
    }
    let waves = load.waves.unwrap_or(b.waves).max(1) as usize;
    let hold_ms = ctx.pool.fixed_hold_ms(load.profile.nominal_hold_ms(l));
    println!(
        "plimsoll load burst: {waves} waves of {per_wave} requests at once (hold {hold_ms} ms) against {}; expecting {admit} admitted per wave",
        ctx.target.base
    );
    let temp_before = recovery::temp_counts(ctx).await;
    let drain = DrainWait {
        client: ctx.client.clone(),
        metrics_url: ctx.target.metrics_url.clone(),
        gauges: ctx.pool.gauges.clone(),
        timeout: Duration::from_millis(hold_ms * 2 + 3000) + ctx.pool.stop_within(),
        poll: Duration::from_millis(l.scrape_interval_ms.min(10)),
    };
    let spec = RunSpec {
        host: ctx.target.base.clone(),
        users: per_wave,
        seed: load.seed,
        template: ctx.pool.template.clone(),
        hold: HoldPlan {
            hold: Hold::Fixed { ms: hold_ms },
            abandon_fraction: 0.0,
            pre_hold_ms: 0.0,
        },
        report: load.goose_report(),
        engine: load.engine(),
        keep_alive: keep_alive(&ctx.contract),
        trust: ctx.trust.clone(),
        kind: RunKind::Burst {
            waves,
            drain: Box::new(drain),
        },
    };
    let process = ProcessSource::Unavailable("not read in burst".into());
    let observed = drive(ctx, spec, process, Goal::Waves(waves as u64)).await?;
    let drained = recovery::drain_all(ctx, &temp_before, hold_ms, 0).await;
    let out = &observed.out;

    let mut main = verdicts::burst(
        &ctx.expect,
        &out.attempts,
        per_wave,
        hold_ms,
        ctx.contract.tolerances.refusal_latency_ms,
        out.drain_failed,
    );
    main.duration_ms = out.elapsed_ms;
    main.evidence.push(out.engine_summary.clone());
    ctx.print(&main);
    let mut results = vec![main];
    let end = Ending {
        observed: &observed,
        drained: &drained,
        must_reach: true,
        temp_allowance: 0,
    };
    results.extend(recovery::ending_verdicts(ctx, end).await);
    let series = observed.series(ctx, None, wave_spans(out));
    Ok(Profiled { results, series })
}

/// Each wave, from its first attempt sent to its last one ended.
fn wave_spans(out: &super::super::run::RunOutput) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    for a in &out.attempts {
        let (from, to) = (a.sent_ms, a.sent_ms + a.latency_ms);
        while spans.len() <= a.wave {
            spans.push(Span {
                label: format!("wave {}", spans.len() + 1),
                from_ms: f64::INFINITY,
                to_ms: 0.0,
            });
        }
        let span = &mut spans[a.wave];
        span.from_ms = span.from_ms.min(from);
        span.to_ms = span.to_ms.max(to);
    }
    spans.retain(|s| s.from_ms.is_finite());
    spans
}
