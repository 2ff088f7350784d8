//! The rate profiles, `steady`, `overload` and `soak`: closed-loop users, each thinking an
//! exponential time before every attempt, at a planned multiple of capacity; the refused
//! fraction held to the queueing prediction.

use std::time::Duration;

use plimsoll_conformance::remote::process::ProcessSource;
use plimsoll_conformance::session::Fatal;
use plimsoll_conformance::verdict::series::{Band, Span};
use plimsoll_conformance::verdict::{CheckResult, Lane};

use super::super::calibrate::Calibration;
use super::super::prediction::{self, Arrivals, Interval, Model};
use super::super::progress::Goal;
use super::super::recovery::{self, Ending};
use super::super::run::{Attempt, Hold, HoldPlan};
use super::super::run::{RunKind, RunSpec, keep_alive};
use super::super::verdicts;
use super::super::{Ctx, LoadPlan, ProfileName, fleet};
use super::{Observed, Profiled, drive, soak};

/// What a rate profile asks of the generator, from the contract and the calibration.
struct Plan {
    factor: f64,
    mean_hold_ms: u64,
    duration: Duration,
    abandon_fraction: f64,
    /// Capacity: workers / (mean hold + the pipeline's own time), per second.
    capacity: f64,
    target_rate: f64,
    /// Mean service time the plan assumes, s.
    service_s: f64,
    users: u32,
    think_s: f64,
    /// Exponential holds are cut here, far below the deadline whatever the target's timeout.
    hold_cap_ms: u64,
}

impl Plan {
    fn new(load: &LoadPlan, ctx: &Ctx<'_>, cal: &Calibration) -> Result<Plan, Fatal> {
        fleet::check_size(ctx)?;
        let l = ctx.section();
        let (factor, duration_s, abandon_fraction) = match load.profile {
            ProfileName::Steady => (l.steady.load_factor, l.steady.duration_s, 0.0),
            ProfileName::Overload => (l.overload.load_factor, l.overload.duration_s, 0.0),
            ProfileName::Soak => (
                l.soak.load_factor,
                l.soak.duration_s,
                l.soak.cancel_fraction,
            ),
            ProfileName::Burst => unreachable!("burst has its own runner"),
        };
        let factor = load.load_factor.unwrap_or(factor);
        // A slow request holds for its own time, whatever the profile's mean.
        let mean_hold_ms = ctx.pool.fixed_hold_ms(load.profile.nominal_hold_ms(l));
        let duration = Duration::from_secs_f64(load.duration.unwrap_or(duration_s as f64).max(1.0));
        let (c, k, r) = (ctx.expect.workers, ctx.expect.queue, ctx.replica_count());
        // Capacity counts the pipeline's own time on top of the hold; a fleet's is every
        // replica's.
        let service_s = (mean_hold_ms as f64 + cal.service_ms) / 1000.0;
        let capacity = f64::from(r * c) / service_s;
        let target_rate = factor * capacity;
        let mut users = match load.users {
            Some(n) => n.max(1),
            None => l.users.max(8 * r * (c + k)),
        };
        let server = Model {
            workers: c,
            queue: k,
            mean_service_s: service_s,
            arrivals: Arrivals::Poisson { rate_per_s: 0.0 },
            fleet: ctx.fleet(),
        };
        let mut think = prediction::think_for_rate(&server, users, target_rate);
        while think.is_none() && users < 1 << 16 {
            users *= 2;
            think = prediction::think_for_rate(&server, users, target_rate);
        }
        let think_s = think.ok_or_else(|| {
            Fatal::Contract(format!("{target_rate:.0} attempts/s cannot be generated"))
        })?;
        let longest = mean_hold_ms * u64::from(l.max_hold_factor);
        let hold_cap_ms = (ctx.pool.spec.deadline_ms).map_or(longest, |d| longest.min(d / 2));
        Ok(Plan {
            factor,
            mean_hold_ms,
            duration,
            abandon_fraction,
            capacity,
            target_rate,
            service_s,
            users,
            think_s,
            hold_cap_ms,
        })
    }
}

/// The attempts a rate profile judges, and the model fed what the run really did.
struct Measurement<'a> {
    /// Attempts sent after the warm-up.
    window: Vec<&'a Attempt>,
    /// Of those, the ones the refused fraction counts: not abandoned, served or refused.
    counted: usize,
    ok: usize,
    refused: usize,
    window_s: f64,
    model: Model,
    measured_service_s: f64,
    measured_think_s: f64,
}

impl<'a> Measurement<'a> {
    /// The measurement window: after warm-up, to the end (no attempt starts after it).
    ///
    /// The model is fed the users' realised mean think time (every completed think plus the
    /// last ones the deadline cut short, over the number completed: the exponential's
    /// censored-sample estimate; the recorded thinks alone would be a biased sample) and the
    /// mean time an admitted request held its slot (Server-Timing `run`, else its latency),
    /// which includes the pipeline's own cost.
    fn new(ctx: &Ctx<'_>, plan: &Plan, observed: &'a Observed) -> Measurement<'a> {
        let out = &observed.out;
        let warm = ctx.section().warm_up_ms as f64;
        let run_ms = plan.duration.as_secs_f64() * 1000.0;
        let window: Vec<&Attempt> = out.attempts.iter().filter(|a| a.sent_ms >= warm).collect();
        let counted: Vec<&&Attempt> = window
            .iter()
            .filter(|a| !a.abandon_planned && (ctx.expect.is_ok(a) || ctx.expect.is_refusal(a)))
            .collect();
        let runs: Vec<f64> = counted
            .iter()
            .filter(|a| ctx.expect.is_ok(a))
            .map(|a| a.timing.map_or(a.latency_ms, |(_, run)| run))
            .collect();
        let measured_service_s = if runs.is_empty() {
            plan.service_s
        } else {
            runs.iter().sum::<f64>() / runs.len() as f64 / 1000.0
        };
        let completed: f64 = out.attempts.iter().map(|a| a.think_ms).sum();
        let measured_think_s = if out.attempts.is_empty() {
            plan.think_s
        } else {
            (completed + out.censored_think_ms) / out.attempts.len() as f64 / 1000.0
        };
        Measurement {
            counted: counted.len(),
            ok: runs.len(),
            refused: counted.len() - runs.len(),
            window,
            window_s: (run_ms - warm).max(1.0) / 1000.0,
            model: Model {
                workers: ctx.expect.workers,
                queue: ctx.expect.queue,
                mean_service_s: measured_service_s,
                arrivals: Arrivals::Closed {
                    users: plan.users,
                    mean_think_s: measured_think_s,
                },
                fleet: ctx.fleet(),
            },
            measured_service_s,
            measured_think_s,
        }
    }
}

pub(crate) async fn run(
    load: &LoadPlan,
    ctx: &Ctx<'_>,
    cal: &Calibration,
    process: &ProcessSource,
) -> Result<Profiled, Fatal> {
    let plan = Plan::new(load, ctx, cal)?;
    announce(load, ctx, cal, &plan);
    let temp_allowance = if load.profile == ProfileName::Soak {
        ctx.section().soak.temp_files_growth
    } else {
        0
    };
    let temp_before = recovery::temp_counts(ctx).await;
    let spec = run_spec(load, ctx, cal, &plan);
    let goal = Goal::Seconds(plan.duration.as_secs());
    let observed = drive(ctx, spec, process.clone(), goal).await?;
    let drained = recovery::drain_all(ctx, &temp_before, plan.hold_cap_ms, temp_allowance).await;
    let judged = Judged::new(load, ctx, &plan, &observed);
    let mut results = Vec::new();
    let mut push = |mut r: CheckResult| {
        r.duration_ms = observed.out.elapsed_ms;
        ctx.print(&r);
        results.push(r);
    };
    match load.profile {
        ProfileName::Steady | ProfileName::Overload => {
            push(judged.refusals(evidence(cal, &judged)));
        }
        ProfileName::Soak | ProfileName::Burst => {}
    }
    match load.profile {
        ProfileName::Steady => push(judged.latency()),
        ProfileName::Overload => {
            push(judged.goodput());
            push(judged.refusal_latency());
        }
        ProfileName::Soak => {
            for r in soak::verdicts(ctx, &observed, &drained[0], process, judged.run_ms) {
                push(r);
            }
        }
        ProfileName::Burst => {}
    }
    let end = Ending {
        observed: &observed,
        drained: &drained,
        must_reach: load.profile == ProfileName::Overload,
        temp_allowance,
    };
    results.extend(recovery::ending_verdicts(ctx, end).await);
    let series = observed.series(ctx, judged.band(load.profile), judged.phases());
    Ok(Profiled { results, series })
}

/// Says what the run will do before it starts: the plan's every figure, so a surprising
/// verdict can be read against it.
fn announce(load: &LoadPlan, ctx: &Ctx<'_>, cal: &Calibration, plan: &Plan) {
    println!(
        "plimsoll load {}: {} x capacity ({:.1}/s = {}{} workers / ({} ms hold + {:.1} ms pipeline)) = {:.1} attempts/s from {} users thinking {:.0} ms on average, for {:.0} s against {}",
        load.profile.as_str(),
        plan.factor,
        plan.capacity,
        fleet::replicas_times(ctx),
        ctx.expect.workers,
        plan.mean_hold_ms,
        cal.service_ms,
        plan.target_rate,
        plan.users,
        plan.think_s * 1000.0,
        plan.duration.as_secs_f64(),
        ctx.target.base
    );
}

/// The plan as the engine runs it: exponential holds and thinks for the planned duration.
fn run_spec(load: &LoadPlan, ctx: &Ctx<'_>, cal: &Calibration, plan: &Plan) -> RunSpec {
    RunSpec {
        host: ctx.target.base.clone(),
        users: plan.users as usize,
        seed: load.seed,
        template: ctx.pool.template.clone(),
        hold: HoldPlan {
            hold: ctx.pool.hold(Hold::Exponential {
                mean_ms: plan.mean_hold_ms as f64,
                cap_ms: plan.hold_cap_ms,
            }),
            abandon_fraction: plan.abandon_fraction,
            pre_hold_ms: cal.latency_ms,
        },
        report: load.goose_report(),
        engine: load.engine(),
        keep_alive: keep_alive(&ctx.contract),
        trust: ctx.trust.clone(),
        kind: RunKind::Rate {
            mean_think_ms: plan.think_s * 1000.0,
            duration: plan.duration,
        },
    }
}

/// One finished rate run as its verdicts read it: the measurement, the prediction for it,
/// and the window the timelines draw.
struct Judged<'a> {
    ctx: &'a Ctx<'a>,
    plan: &'a Plan,
    observed: &'a Observed,
    m: Measurement<'a>,
    iv: Interval,
    /// The planned run's length, ms.
    run_ms: f64,
    warm: f64,
}

impl<'a> Judged<'a> {
    /// Measures the run and predicts its refused fraction from what the run really did.
    fn new(
        load: &LoadPlan,
        ctx: &'a Ctx<'a>,
        plan: &'a Plan,
        observed: &'a Observed,
    ) -> Judged<'a> {
        let l = ctx.section();
        let m = Measurement::new(ctx, plan, observed);
        let iv = prediction::interval(&m.model, m.counted, l.sigma, load.seed);
        Judged {
            ctx,
            plan,
            observed,
            m,
            iv,
            run_ms: plan.duration.as_secs_f64() * 1000.0,
            warm: l.warm_up_ms as f64,
        }
    }

    /// The prediction's accepted refused fraction over the window it judges, for the profiles
    /// that judge one.
    fn band(&self, profile: ProfileName) -> Option<Band> {
        matches!(profile, ProfileName::Steady | ProfileName::Overload).then(|| Band {
            predicted: self.iv.predicted,
            low: self.iv.low,
            high: self.iv.high,
            from_ms: self.warm,
            to_ms: self.run_ms,
        })
    }

    /// The warm-up, whose attempts no verdict counts.
    fn phases(&self) -> Vec<Span> {
        vec![Span {
            label: "warm-up".into(),
            from_ms: 0.0,
            to_ms: self.warm.min(self.run_ms),
        }]
    }

    /// The timeline lanes: the second half of the run (after warm-up), 120 users at most.
    fn lanes(&self) -> Vec<Lane> {
        let slice_from = self.warm.max(self.run_ms / 2.0);
        let out = &self.observed.out;
        verdicts::lanes(&out.attempts, slice_from, 120, &self.ctx.expect)
    }

    /// The refused fraction against the prediction, with the prediction printed beside it.
    fn refusals(&self, evidence: Vec<String>) -> CheckResult {
        let (ctx, m, iv, model) = (self.ctx, &self.m, &self.iv, &self.m.model);
        let attempts = &self.observed.out.attempts;
        let mut r = verdicts::refusals(&ctx.expect, model, iv, m.refused, attempts, evidence);
        r.timeline = self.lanes();
        println!(
            "prediction ({}, {}): refused {:.1}% ± {:.1}% ({}σ); measured {:.1}% of {} attempts",
            model.formula(),
            model.describe(),
            iv.predicted * 100.0,
            (iv.high - iv.predicted) * 100.0,
            iv.z,
            100.0 * m.refused as f64 / m.counted.max(1) as f64,
            m.counted
        );
        r
    }

    /// Steady: admitted requests take their hold plus a bounded overhead.
    fn latency(&self) -> CheckResult {
        let l = self.ctx.section();
        verdicts::latency(
            &self.ctx.expect,
            &self.m.window,
            &self.observed.out.stalls,
            l.steady.latency_overhead_p99_ms,
        )
    }

    /// Overload: the admitted rate stays near capacity.
    fn goodput(&self) -> CheckResult {
        let (l, m) = (self.ctx.section(), &self.m);
        verdicts::goodput(
            &self.ctx.expect,
            &m.model,
            m.counted as f64 / m.window_s,
            m.ok,
            m.window_s,
            l.overload.goodput_fraction,
            l.sigma,
        )
    }

    /// Overload: refusals come fast.
    fn refusal_latency(&self) -> CheckResult {
        let l = self.ctx.section();
        let mut r = verdicts::refusal_latency(
            &self.ctx.expect,
            &self.m.window,
            &self.observed.out.stalls,
            l.overload.refusal_p99_ms,
        );
        r.timeline = self.lanes();
        r
    }
}

/// The refused-fraction verdict's evidence: the rates planned, realised and modelled, the
/// open-loop comparison, the window, and the engine's own counts.
fn evidence(cal: &Calibration, j: &Judged<'_>) -> Vec<String> {
    let (plan, m, model) = (j.plan, &j.m, &j.m.model);
    let open = model.open_loop_equivalent();
    let attempts_rate = m.window.len() as f64 / m.window_s;
    let (warm, run_ms) = (j.warm, j.run_ms);
    vec![
        format!(
            "attempts {attempts_rate:.1}/s in the window (target {:.1}/s, model {:.1}/s); realised mean think {:.1} ms (planned {:.1}); mean service {:.1} ms (hold mean {} + calibrated pipeline {:.1})",
            plan.target_rate,
            model.attempt_rate(),
            m.measured_think_s * 1000.0,
            plan.think_s * 1000.0,
            m.measured_service_s * 1000.0,
            plan.mean_hold_ms,
            cal.service_ms
        ),
        format!(
            "an open-loop Poisson stream at the same rate would see {:.1}% refused ({}); goose's users are closed-loop, hence {}",
            open.blocking() * 100.0,
            open.formula(),
            model.formula()
        ),
        format!(
            "window: attempts sent after {warm:.0} ms of {run_ms:.0} ms; {} excluded (abandoned or other answers)",
            m.window.len() - m.counted
        ),
        j.observed.out.engine_summary.clone(),
    ]
}
