//! Judging one refusal by what the client received: the declared answer (an error of the
//! contract's table or a bare status), at once, with the declared hint. T3 judges a full pool's
//! refusals with it and T4 a spent rate limit's, so both read a refusal the same way.

use std::ops::RangeInclusive;
use std::time::Duration;

use plimsoll_spec::model::{Hint, PoolSpec, Refusal, RetryAfterFormat};

use crate::checks::ctx::{Ctx, ms};
use crate::remote::{Reply, Target};

/// Whether `reply` is `refusal`; if it is, requires it within `tolerance` and, when the refusal
/// declares a hint, the hint's header with a delay in `allowed` (RFC 9110 delay-seconds).
/// `label` names the request in the failure messages.
pub fn judge_refusal(
    t: &Target,
    c: &mut Ctx,
    refusal: &Refusal,
    allowed: Option<RangeInclusive<u64>>,
    label: &str,
    reply: &Reply,
    tolerance: Duration,
) -> bool {
    if let Some(why) = t.refusal_mismatch(reply, refusal) {
        let status = t.expected.refusal_status(refusal).unwrap_or(0);
        if status == reply.status {
            // The right status with the wrong body: say which body was expected.
            c.fail(format!(
                "{label}: {why} (after {:.0} ms)",
                ms(reply.elapsed)
            ));
        } else {
            c.fail(format!(
                "{label}: expected the refusal {status}, got {} after {:.0} ms",
                reply.status,
                ms(reply.elapsed)
            ));
        }
        return false;
    }
    c.require(reply.elapsed <= tolerance, || {
        format!(
            "{label}: refused after {:.1} ms, not at once (tolerance {} ms)",
            ms(reply.elapsed),
            tolerance.as_millis()
        )
    });
    if let (Some(hint), Some(allowed)) = (&refusal.hint, allowed) {
        // Every form travels as RFC 9110 delay-seconds.
        let format = RetryAfterFormat::DelaySeconds;
        match reply
            .header(hint.header())
            .map(|raw| (raw, format.parse(raw)))
        {
            None => c.fail(format!("{label}: no {} header", hint.header())),
            Some((_, Some(n))) if allowed.contains(&n) => {}
            Some((raw, _)) => c.fail(format!(
                "{label}: {} `{raw}` is not {format} in {}..={}",
                hint.header(),
                allowed.start(),
                allowed.end()
            )),
        }
    }
    true
}

/// Whether `reply` is `refusal` (none declared: no reply is), with the words for one that is
/// not: what a burst sorts its answers by.
pub fn refused_as(t: &Target, refusal: Option<&Refusal>, reply: &Reply) -> Result<(), String> {
    match refusal {
        Some(r) => t.refusal_mismatch(reply, r).map_or(Ok(()), Err),
        None => Err(crate::checks::pool::answered(reply)),
    }
}

/// The delays `hint` may advertise: its constant, its range, or the estimator's bounds, up to
/// `max` (the pool's deadline cap, none for a rate limit).
pub fn allowed_seconds(hint: &Hint, max: Option<u64>) -> RangeInclusive<u64> {
    match hint {
        Hint::Constant(h) => h.seconds..=h.seconds,
        Hint::Range(h) => h.min_seconds..=h.max_seconds,
        Hint::Estimated(h) => h.min_seconds..=max.unwrap_or(u64::MAX),
    }
}

/// The delays a full pool's refusal may advertise: its constant, its range, or the estimator's
/// bounds (up to the pool's deadline, when it has one); `None` when the refusal declares no
/// hint. T3 and the load profiles read a pool's hint through this.
pub fn pool_allowed(refusal: &Refusal, spec: &PoolSpec) -> Option<RangeInclusive<u64>> {
    let hint = refusal.hint.as_ref()?;
    let max = match (hint.estimated(), spec.deadline_ms) {
        (Some(h), Some(_)) => Some(h.max.seconds(&spec.limits(), h.min_seconds)),
        _ => None,
    };
    Some(allowed_seconds(hint, max))
}

/// How a refusal's body and hint read in a check's expectation (``the body `"busy\n"`, Retry-After
/// in 1..=1 s``).
pub fn hint_words(refusal: &Refusal, allowed: Option<RangeInclusive<u64>>) -> String {
    let hint = match (&refusal.hint, allowed) {
        (Some(h), Some(allowed)) => format!(
            "{} in {}..={} s",
            h.header(),
            allowed.start(),
            allowed.end()
        ),
        _ => "no hint declared (none judged)".to_owned(),
    };
    match &refusal.body {
        Some(body) => format!("{}, {hint}", body.words()),
        None => hint,
    }
}
