//! `plimsoll discover --rate-limit`: the command line turned into a [`RatePlan`], the limit
//! measured with its progress on stderr, the draft written and read back by the loader (a
//! value not measured is a placeholder, which the loader names).

use std::time::Duration;

use plimsoll_conformance::discover::rate::{QUIET, RatePlan, discover_rate, draft};
use plimsoll_spec::Contract;

use super::{WHO, measure_and_write, request};
use crate::args::DiscoverArgs;

/// The plan `args` describe, or why they describe none.
fn plan(args: &DiscoverArgs) -> Result<RatePlan, String> {
    if args.hook_stage.is_some() {
        return Err("--hook-stage names the stage of --hook's hold: not with --rate-limit".into());
    }
    let (method, path, headers, body) = request(args)?;
    Ok(RatePlan {
        target: args.target.trim_end_matches('/').to_owned(),
        method,
        path,
        body,
        headers,
        key_header: args.key_header.clone(),
        ceiling: args.ceiling,
        quiet: args.quiet_ms.map_or(QUIET, Duration::from_millis),
    })
}

/// Runs `plimsoll discover --rate-limit`; returns the exit code: 0 the draft written and a
/// valid contract, 1 written but a value not measured (a placeholder, each named) or a rule
/// broken, 2 the route could not be measured or the draft not written.
pub(super) fn run(args: DiscoverArgs) -> u8 {
    let plan = match plan(&args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("{WHO}: {e}");
            return 2;
        }
    };
    eprintln!(
        "{WHO}: the rate limit of {} {} of {}: at most {} request(s) at once (--ceiling) and {} in all, never more",
        plan.method,
        plan.path,
        plan.target,
        plan.ceiling,
        plan.most_sent()
    );
    let (findings, text) = match measure_and_write(
        args.output.as_deref(),
        async |say| discover_rate(&plan, say).await,
        |findings| draft::render(&plan, findings),
    ) {
        Ok(done) => done,
        Err(code) => return code,
    };
    if !findings.refused() {
        eprintln!(
            "{WHO}: all {} sent at once were admitted: the burst is above the ceiling, and the draft's burst is a placeholder",
            findings.burst.sent
        );
    }
    eprintln!(
        "{WHO}: {} request(s) sent in all, of the {} the plan allows (a connection closed after its refusal carries one less)",
        findings.sent,
        plan.most_sent()
    );
    match Contract::from_toml(&text, "the draft") {
        Ok(_) => {
            eprintln!(
                "{WHO}: the draft is a contract: `plimsoll check --contract DRAFT --target {} --only T4`",
                plan.target
            );
            0
        }
        Err(e) => {
            eprintln!("{WHO}: {e}");
            1
        }
    }
}
