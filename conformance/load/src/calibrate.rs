//! Before the load: a few requests with a zero hold measure the pipeline's own cost (it is added
//! to the hold when computing capacity) and prove the target honours the test hooks. A slow
//! request, which holds for its own time, measures what it takes beyond that time.

use std::time::Instant;

use plimsoll_conformance::remote::body::{MAX_REPLY_BYTES, read_capped};
use plimsoll_conformance::session::Fatal;

use super::verdicts::percentile;
use super::{Ctx, Node};

/// Requests sent one after another; their medians are the calibration.
const REQUESTS: usize = 8;

/// The pipeline's own cost per request, measured before the load so capacity and the
/// abandonment timing account for it.
pub(super) struct Calibration {
    /// Median Server-Timing `run` of a request with no hold (client latency if absent).
    pub service_ms: f64,
    /// Median client latency of such a request: when an abandoning client's hold has begun.
    pub latency_ms: f64,
}

/// Sends [`REQUESTS`] zero-hold requests one at a time to `node`. A reference target that
/// refuses hooks stops the run ([`Fatal::Hooks`]); any other answer but the served one means it
/// is not idle or not usable.
pub(super) async fn calibrate(ctx: &Ctx<'_>, node: &Node) -> Result<Calibration, Fatal> {
    let t = &ctx.pool.template;
    let (mut runs, mut latencies) = (Vec::new(), Vec::new());
    for i in 0..REQUESTS {
        let sent = Instant::now();
        let response = t
            .request(&ctx.client, &node.base, 0)
            .send()
            .await
            .map_err(|e| Fatal::Unreachable(format!("{}: {e}", node.base)))?;
        let status = response.status().as_u16();
        let timing = t.server_timing(response.headers());
        let body = read_capped(response, MAX_REPLY_BYTES)
            .await
            .map_err(|e| Fatal::Unreachable(format!("{}: {e}", node.base)))?;
        if status != t.ok_status {
            let code = super::run::problem_code(&body).unwrap_or_default();
            let reference = ctx.contract.is_reference();
            if reference && status == 400 && code == ctx.contract.hooks().disabled_code.as_str() {
                return Err(Fatal::Hooks(format!(
                    "{} refuses test hooks: start it with {}=1",
                    node.base,
                    ctx.contract.hooks().env
                )));
            }
            return Err(Fatal::Unreachable(format!(
                "calibration request {} to {} was answered {status} {code}; the target must be idle and answer {} {} with {}",
                i + 1,
                node.base,
                t.method,
                t.path,
                t.ok_status
            )));
        }
        let latency = sent.elapsed().as_secs_f64() * 1000.0;
        latencies.push(latency);
        runs.push(timing.map_or(latency, |(_, run)| run));
    }
    // A slow request's own hold is in every figure: what is calibrated is the time beyond it.
    let own = ctx.pool.own_hold_ms.unwrap_or(0) as f64;
    let beyond = |values: &[f64]| (percentile(values, 50.0).unwrap_or(0.0) - own).max(0.0);
    Ok(Calibration {
        service_ms: beyond(&runs),
        latency_ms: beyond(&latencies),
    })
}
