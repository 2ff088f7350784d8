//! The contract draft discover writes (contract language 2): one pool for the route, its hold as
//! the user gave it, its refusal, and the embedded contract's `[tolerances]`; each measured
//! value followed by a comment with its evidence and a confidence, and each value the service
//! cannot show from outside marked [`CANNOT_MEASURE`] (and left out, being optional).

use std::fmt::Write as _;

use plimsoll_spec::Contract;
use plimsoll_spec::model::{LANGUAGE, QueueOrder, RefusalBody};

use crate::checks::ctx::ms;

use super::{ConnectionSeen, DeadlineSeen, Findings, Kept, Limit, NotSeen, Plan, RefusalSeen};

/// The mark on every place of the draft the service cannot show from outside.
pub const CANNOT_MEASURE: &str = "plimsoll: cannot be measured from outside";

/// The name the draft gives the route's pool: its path's last plain segment (`/v1/reports` →
/// `reports`), `route` when there is none.
pub fn pool_name(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    path.rsplit('/')
        .find(|s| !s.is_empty() && !s.starts_with('{'))
        .map(|s| {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .unwrap_or_else(|| "route".into())
}

/// A TOML value in its inline form.
pub(super) fn inline<T: serde::Serialize>(value: &T) -> Result<String, toml::ser::Error> {
    Ok(toml::Value::try_from(value)?.to_string())
}

/// The route without a query, as a pool's `routes` entry declares it.
fn route_path(plan: &Plan) -> &str {
    plan.path.split('?').next().unwrap_or_default()
}

/// The document discover probes under: the route as a pool as large as the ceiling, refusing
/// nothing, so that the checks' pieces can send its held request.
pub(super) fn probe_document(plan: &Plan) -> Result<String, toml::ser::Error> {
    let mut out = format!(
        "language = {LANGUAGE}\n\n[contract]\nname = \"discover-probe\"\ntitle = \"probe\"\nversion = \"0.0.0\"\nsummary = \"probe\"\n\n"
    );
    pool_head(&mut out, plan)?;
    let _ = writeln!(out, "workers = {}", plan.ceiling.max(1));
    let _ = writeln!(
        out,
        "queue = {{ capacity = \"unbounded\", order = \"unordered\" }}"
    );
    let _ = writeln!(out, "hold = {}\n", inline(&plan.hold())?);
    out.push_str("[refusals]\n\n");
    tolerances(&mut out)?;
    Ok(out)
}

/// `[tolerances]`, the embedded contract's, read from it.
pub(super) fn tolerances(out: &mut String) -> Result<(), toml::ser::Error> {
    out.push_str("[tolerances]\n");
    out.push_str(&toml::to_string(&Contract::embedded().tolerances)?);
    Ok(())
}

/// How sure a value is: `high` when two bursts or more showed it, `medium` when one did.
fn confidence(times: usize) -> &'static str {
    if times >= 2 { "high" } else { "medium" }
}

/// The draft for `findings` of `plan`'s route.
pub fn render(plan: &Plan, f: &Findings) -> Result<String, toml::ser::Error> {
    let mut out = String::new();
    head(&mut out, plan, f)?;
    pool(&mut out, plan, f)?;
    refusal(&mut out, f);
    tolerances(&mut out)?;
    Ok(out)
}

/// Whether the ramp reached the ceiling without a refusal: every value a lower bound.
fn above(f: &Findings) -> bool {
    f.limit == Limit::AboveCeiling
}

/// The `#:schema` line, what the draft is, `language` and `[contract]`.
fn head(out: &mut String, plan: &Plan, f: &Findings) -> Result<(), toml::ser::Error> {
    let name = pool_name(&plan.path);
    out.push_str("#:schema spec/schemas/contract.schema.json\n");
    let _ = writeln!(
        out,
        "# A draft written by `plimsoll discover` from what {} {} of {} answered, by the",
        plan.method, plan.path, plan.target
    );
    out.push_str(
        "# client's clock alone, never more than the ceiling's requests at once. Each measured value\n\
         # says what showed it and how sure that is; each place the service cannot show from outside\n\
         # is marked `plimsoll: cannot be measured from outside`. Read it, name it, then run\n\
         # `plimsoll check --contract THIS-FILE --target URL` against the same service.\n",
    );
    let _ = writeln!(out, "language = {LANGUAGE}\n");
    out.push_str("[contract]\n");
    let _ = writeln!(out, "name = {}", inline(&format!("discovered-{name}"))?);
    let _ = writeln!(
        out,
        "title = {}",
        inline(&format!("{} {}, as discovered", plan.method, plan.path))?
    );
    out.push_str("version = \"0.1.0\"\n");
    let summary = match (&f.refusal, above(f)) {
        (Some(r), false) => format!(
            "{} at once, {} waiting, the next refused {}.",
            f.workers,
            f.queue,
            r.status()
        ),
        _ => format!(
            "At least {} at once and {} waiting: no refusal up to the ceiling of {}.",
            f.workers, f.queue, plan.ceiling
        ),
    };
    let _ = writeln!(out, "summary = {}\n", inline(&summary)?);
    Ok(())
}

/// A pool's table head for the route: its name, title and route, the same in the probe document
/// and in the draft.
fn pool_head(out: &mut String, plan: &Plan) -> Result<(), toml::ser::Error> {
    let _ = writeln!(out, "[pools.{}]", pool_name(&plan.path));
    let _ = writeln!(
        out,
        "title = {}",
        inline(&format!("{} {}", plan.method, plan.path))?
    );
    let _ = writeln!(
        out,
        "routes = [{{ method = {}, path = {} }}]",
        inline(&plan.method)?,
        inline(&route_path(plan))?
    );
    Ok(())
}

/// `[pools.NAME]`: the route, its measured workers and queue, its refusal's name, its hold, and
/// the marks of what cannot be measured.
fn pool(out: &mut String, plan: &Plan, f: &Findings) -> Result<(), toml::ser::Error> {
    pool_head(out, plan)?;
    workers(out, plan, f);
    queue(out, f);
    match (&f.refusal, above(f)) {
        (Some(_), false) => out.push_str("refusal = \"refused\"\n"),
        _ => {
            let _ = writeln!(
                out,
                "# refusal: none seen up to the ceiling of {}; raise --ceiling to find it",
                plan.ceiling
            );
        }
    }
    let hold_note = match &plan.holding {
        super::Holding::Slow(_) => {
            "as given (--slow-ms): the route's least time, by your word".to_owned()
        }
        super::Holding::Hook { stage, .. } => format!(
            "as given (--hook, --hook-stage): the service holds a request in `{stage}` for the time its hook names"
        ),
    };
    let _ = writeln!(out, "hold = {}  # {hold_note}", inline(&plan.hold())?);
    deadline(out, f.deadline.as_ref());
    let _ = writeln!(out, "# cancellation: {CANNOT_MEASURE}");
    let _ = writeln!(out, "# memory_cap_mb: {CANNOT_MEASURE}");
    out.push('\n');
    Ok(())
}

/// `workers`, with the bursts that showed it.
fn workers(out: &mut String, plan: &Plan, f: &Findings) {
    let bursts = f.bursts.len();
    let showed = f.bursts.iter().filter(|b| b.ran == f.workers).count();
    let _ = if above(f) {
        writeln!(
            out,
            "workers = {}  # at least: {bursts} bursts up to the ceiling of {}, none refused; at most {} ran at once; confidence low",
            f.workers, plan.ceiling, f.workers
        )
    } else {
        writeln!(
            out,
            "workers = {}  # {bursts} bursts: at most {} ran at once ({showed} bursts showed it); confidence {}",
            f.workers,
            f.workers,
            confidence(showed)
        )
    };
}

/// `queue`: its capacity with the bursts that showed it, its order with the trial's waves.
fn queue(out: &mut String, f: &Findings) {
    let showed = f.bursts.iter().filter(|b| b.waited == f.queue).count();
    let (order, order_note) = match (&f.order, f.queue) {
        (_, 0) => (
            QueueOrder::Unordered,
            "no request waited: no order to see".to_owned(),
        ),
        (_, 1) => (
            QueueOrder::Unordered,
            format!("one place: no order to see; {CANNOT_MEASURE}"),
        ),
        (Some(o), _) => (
            o.order,
            format!(
                "1 trial: {} queued {} ms apart started in waves {:?}; confidence medium",
                f.queue,
                o.gap.as_millis(),
                o.waves
            ),
        ),
        (None, _) => (
            QueueOrder::Unordered,
            format!("the hold left no room to queue in a known order; {CANNOT_MEASURE}"),
        ),
    };
    let capacity_note = if above(f) {
        format!(
            "at least: at most {} waited, none refused; confidence low",
            f.queue
        )
    } else if f.queue == 0 {
        "no request waited before refusals began; confidence high".to_owned()
    } else {
        format!(
            "at most {} waited before the refusal ({showed} bursts showed it); confidence {}",
            f.queue,
            confidence(showed)
        )
    };
    let _ = writeln!(
        out,
        "queue = {{ capacity = {}, order = \"{}\" }}  # {capacity_note}; order: {order_note}",
        f.queue,
        order.as_str()
    );
}

/// The refusal's hint: none when no refusal had `Retry-After`; a constant one when every
/// refusal gave the same delay, marked, since whether that delay would follow the load (an
/// estimator's, as the reference server's) the probes of one load cannot show; none declared,
/// with the delays seen, when it varied or was missing on some.
fn hint(out: &mut String, r: &super::RefusalSeen) {
    let seen = r.hint();
    match r.constant_delay() {
        _ if seen == "absent" => {
            out.push_str("# hint: no Retry-After on any refusal: none declared\n");
        }
        Some(seconds) => {
            let _ = writeln!(
                out,
                "hint = {{ header = \"Retry-After\", seconds = {seconds} }}  # Retry-After {seen}, on {} refusals under one load; confidence {}",
                r.retry_after.len(),
                confidence(r.retry_after.len())
            );
            let _ = writeln!(
                out,
                "# hint: constant, or an estimate that follows the load (its estimator, window and bounds): {CANNOT_MEASURE} (one load gave one value)"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "# hint: Retry-After {seen}: an estimate that follows the load, or missing on some refusals; none declared. Its estimator, window and bounds: {CANNOT_MEASURE}"
            );
            if let Some((least, most)) = r.delay_range() {
                let _ = writeln!(
                    out,
                    "# hint = {{ header = \"Retry-After\", min_seconds = {least}, max_seconds = {most} }}  # the delays seen under one load, if the service promises a range"
                );
            }
        }
    }
}

/// The refusal a deadline's answer is drafted as.
const DEADLINE_ANSWER: &str = "timed_out";

/// `[refusals.refused]`: the status with its evidence, and the body, hint, rate-limit headers
/// and connection as comments; an empty `[refusals]` when none was seen. Then the deadline's
/// answer, when one was seen.
fn refusal(out: &mut String, f: &Findings) {
    match f.refusal.as_ref().filter(|_| !above(f)) {
        Some(r) => {
            out.push_str("[refusals.refused]\n");
            status(out, r, ("T3", f.refusal_latency_ms));
            hint(out, r);
            refusal_rest(out, r, f.connection.as_ref());
        }
        None => out.push_str("[refusals]\n\n"),
    }
    if let Some(DeadlineSeen::Answered { status, .. }) = &f.deadline {
        let _ = writeln!(
            out,
            "[refusals.{DEADLINE_ANSWER}]\n\
             status = {status}  # the deadline's answer (B1), seen once; its body is not declared: any body\n"
        );
    }
}

/// A refusal's `status` with its evidence: how many refusals had it, the slowest against
/// the latency bound of the clause that judges it (`T3` or `T4`). Both drafts write it.
pub(super) fn status(out: &mut String, r: &RefusalSeen, (clause, allowed_ms): (&str, u64)) {
    let worst = r.latencies_ms.iter().copied().fold(0.0, f64::max);
    let same = r.statuses.iter().filter(|s| **s == r.status()).count();
    let _ = writeln!(
        out,
        "status = {}  # {same} of {} refusals, the slowest after {worst:.0} ms ({clause} allows {allowed_ms} ms); confidence {}",
        r.status(),
        r.statuses.len(),
        confidence(same)
    );
}

/// What follows a refusal's hint in both drafts: its body's shape and RateLimit headers as
/// comments, its `connection`, and the table's end.
pub(super) fn refusal_rest(
    out: &mut String,
    r: &RefusalSeen,
    connection_seen: Option<&Result<ConnectionSeen, NotSeen>>,
) {
    let _ = match r.declared_body() {
        Some(body) => writeln!(
            out,
            "body = {}  # {} on all {} refusals; confidence {}",
            inline_body(body),
            r.body().as_str(),
            r.declared.len(),
            confidence(r.declared.len())
        ),
        None => writeln!(
            out,
            "# body: {} (not the same declarable body on every refusal: any body)",
            r.body().as_str()
        ),
    };
    if r.rate_limit.is_empty() {
        out.push_str("# RateLimit, RateLimit-Policy: absent\n");
    } else {
        for (name, value) in &r.rate_limit {
            let _ = writeln!(out, "# {name}: {value}");
        }
    }
    connection(out, connection_seen);
    out.push('\n');
}

/// A refusal's body as a TOML inline table on one line (its texts basic strings, every
/// control character escaped: TOML's own writer would make a text with a newline a multi-line
/// string).
fn inline_body(body: &RefusalBody) -> String {
    let quoted = |text: &str| {
        let mut out = String::from('"');
        for ch in text.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{:04X}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    };
    match body {
        RefusalBody::Json(c) => format!(
            "{{ pointer = {}, value = {} }}",
            quoted(&c.pointer),
            quoted(&c.value)
        ),
        RefusalBody::Text(t) => format!("{{ text = {} }}", quoted(&t.text)),
        RefusalBody::Contains(c) => format!("{{ contains = {} }}", quoted(&c.contains)),
    }
}

/// How far below the client's count of a deadline the draft writes it, ms: a third of B1's
/// late tolerance (`tolerances.timeout_late_ms`, the draft's own, the embedded contract's).
fn deadline_allowance_ms() -> u64 {
    Contract::embedded().tolerances.timeout_late_ms / 3
}

/// The pool's `deadline_ms` when a deadline answered the held request, with its answer,
/// `[refusals.timed_out]`, or a comment saying what was seen instead.
///
/// The client counts from its sending and sees the answer after its way back, so its count is
/// the deadline and a lateness one request cannot show. Written as counted, the deadline sat
/// above the service's whenever that lateness was a few milliseconds more than a later check's,
/// and the check failed the service's 504 as early (CI: 1511 ms counted, 1510 written, 1502
/// seen). So the draft writes it a third of B1's late tolerance lower (rounded down to 10 ms):
/// a check then accepts the service's answers for a discovery that much late, and its own that
/// much later again.
fn deadline(out: &mut String, seen: Option<&DeadlineSeen>) {
    let _ = match seen {
        Some(DeadlineSeen::Answered { status, after }) => writeln!(
            out,
            "deadline_ms = {}  # answered {status} after {:.0} ms, before its hold ended (one request, by the client's clock), written {} ms lower for the lateness one request cannot show (a third of the late tolerance); confidence medium\n\
             deadline_answer = \"{DEADLINE_ANSWER}\"  # [refusals.{DEADLINE_ANSWER}] below",
            (after.as_millis() as u64).saturating_sub(deadline_allowance_ms()) / 10 * 10,
            ms(*after),
            deadline_allowance_ms()
        ),
        Some(DeadlineSeen::NoneWithin(within)) => writeln!(
            out,
            "# deadline_ms: none within {} ms (a request held that long was served)",
            within.as_millis()
        ),
        Some(DeadlineSeen::NotProbed(why)) => {
            writeln!(out, "# deadline_ms: {CANNOT_MEASURE} ({why})")
        }
        None => writeln!(
            out,
            "# deadline_ms: {CANNOT_MEASURE} (not probed: --deadline-within MS with --hook probes it)"
        ),
    };
}

/// What a connection did after a refusal: the refusal's `connection` (T6) with its evidence,
/// or a comment saying why it was not seen. Both drafts, a pool's and a rate limit's, write it.
pub(super) fn connection(out: &mut String, seen: Option<&Result<ConnectionSeen, NotSeen>>) {
    let _ = match seen {
        Some(Ok(seen)) => writeln!(
            out,
            "connection = \"{}\"  # {}; confidence medium (one connection)",
            if matches!(seen.kept, Kept::Open { .. }) {
                "kept"
            } else {
                "closed"
            },
            seen.evidence()
        ),
        Some(Err(e)) => writeln!(out, "# connection: not seen: {e}"),
        None => writeln!(out, "# connection: not probed"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_named_after_its_last_plain_segment() {
        assert_eq!(pool_name("/v1/reports"), "reports");
        assert_eq!(pool_name("/slow?ms=500"), "slow");
        assert_eq!(pool_name("/items/{id}"), "items");
        assert_eq!(pool_name("/"), "route");
        assert_eq!(pool_name("/big-job"), "big_job");
    }

    #[test]
    fn a_body_is_written_on_one_line_and_reads_back_as_itself() {
        #[derive(serde::Deserialize)]
        struct Doc {
            body: RefusalBody,
        }
        for body in [
            RefusalBody::Text(plimsoll_spec::model::BodyText {
                text: "busy, \"try\" later\n\t\u{7f}\\".into(),
            }),
            RefusalBody::Contains(plimsoll_spec::model::BodyContains {
                contains: "<title>503 Service Temporarily Unavailable</title>".into(),
            }),
            RefusalBody::Json(plimsoll_spec::model::AnswerCode {
                pointer: "/error".into(),
                value: "too many searches".into(),
            }),
        ] {
            let line = format!("body = {}  # a comment", inline_body(&body));
            assert!(!line.contains('\n'), "{line}");
            let doc: Doc = toml::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(doc.body, body, "{line}");
        }
    }
}
