//! F3: exactly one JSON log line per error with request_id, stage, error and stack, the stage
//! agreeing with the response. F3 provokes errors of each kind under client-chosen ids, then
//! judges every error reply of the run so far against the server log.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use image::ImageFormat;
use plimsoll_spec::model::ErrorLogs;
use plimsoll_spec::{ClauseId, ErrorCode, HookDirective, Pool};
use reqwest::header::CONTENT_TYPE;

use super::Seen;
use super::server_log::{self, ServerLog};
use crate::checks::ctx::Ctx;
use crate::checks::pool::{self, Held, hold_first, hook};
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::{Op, Target};

/// F3's entry in the check registry: the evidence the docs print, and `f3`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::F3,
    "Errors provoked under client-chosen request ids (a failing stage, a panic, an empty body, a \
     charge past the memory cap, a refusal of a full pool), then the server log is read (it \
     needs `--server-log`, and is skipped without it): every line parses as a JSON object, and \
     every error reply of the run so far (the provoked ones and those of the checks before) has \
     exactly one line with its request id carrying every field the clause lists. `request_id`, \
     `stage` and `error` are non-empty; `stage` is the response's `failed_stage` when the body \
     names one, `admission` for an overloaded refusal, `request` for any other 4xx (refused \
     before admission); `stack` is present, a non-empty backtrace when the contract's `stack` \
     is on. For another service, its `[error_logs]` lists the fields: each declared bad request, \
     and a burst one past a held pool's workers and places (a refusal), are sent under \
     client-chosen ids, and every error reply of the run must have exactly one line with its \
     `request_id` carrying every field.",
    |t, c| Box::pin(f3(t, c)),
)
.applies_when(applies)
.covers(&["error-line", "log-file"]);

/// F3 judges the reference surface's error lines (`clauses.f3`), or any contract's
/// `[error_logs]`.
fn applies(contract: &plimsoll_spec::Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        contract.error_logs.is_some(),
        "the contract declares no error log (`[error_logs]`) and no reference API (`[api]`)",
    )
}

/// The log's `stage` of an error refused before admission (bad input, a stalled upload).
const STAGE_REQUEST: &str = "request";
/// The log's `stage` of a refusal by a full pool.
const STAGE_ADMISSION: &str = "admission";
/// How long the log may take to show the lines of errors already answered.
const LOG_WAIT: Duration = Duration::from_secs(2);
/// Problems listed as evidence, at most.
const SHOWN: usize = 8;
/// How long each request of the overload burst holds its slot.
const BURST_HOLD_MS: u64 = 300;

/// The `stage` an error's log line must name, by the rule of F3's rationale; `None` when the
/// response does not pin it (a 5xx other than a refusal without `failed_stage`: F1/B1 judge
/// that body, F3 only requires a non-empty stage).
pub fn expected_stage(seen: &Seen) -> Option<&str> {
    if let Some(stage) = seen.failed_stage.as_deref() {
        return Some(stage);
    }
    if seen.code.as_deref() == Some(ErrorCode::Overloaded.as_str()) {
        return Some(STAGE_ADMISSION);
    }
    (400..500).contains(&seen.status).then_some(STAGE_REQUEST)
}

async fn f3(t: &Arc<Target>, c: &mut Ctx) {
    let reference = t.expected.is_reference();
    let f3 = match &t.expected.error_logs {
        Some(declared) if !reference => declared.clone(),
        _ => t.expected.clauses().f3.value.clone(),
    };
    c.expected = format!(
        "every log line is JSON; exactly one line per error with {} (stage as the response says; stack {})",
        f3.fields.join(", "),
        if f3.stack { "a backtrace" } else { "present" }
    );
    let Some(log) = t.server_log.clone() else {
        c.skip("needs --server-log FILE to read the implementation's log");
        return;
    };
    if reference {
        provoke(t, c).await;
    } else {
        provoke_declared(t, c).await;
    }

    let errors = errors_of_run(t);
    let Some(log) = read(c, &log, &f3, &errors).await else {
        return;
    };
    require_json(c, &log);
    let judged = Judged::of(&log, &errors, (&f3, reference));
    judged.report(c, &log, errors.len());
}

/// Every error reply of the run so far: the provoked ones and those of the checks before.
fn errors_of_run(t: &Target) -> Vec<Seen> {
    t.seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|s| s.is_error())
        .cloned()
        .collect()
}

/// Reads the log, waiting (bounded) until every error has a line: a log may be written a
/// little after the reply. None when the file cannot be read (a failure is recorded).
async fn read(c: &mut Ctx, path: &Path, f3: &ErrorLogs, errors: &[Seen]) -> Option<ServerLog> {
    let wanted = errors.iter().flat_map(ids).map(str::to_owned).collect();
    let mut log = ServerLog::new(path.to_owned(), f3.format, &f3.fields, wanted);
    let started = Instant::now();
    loop {
        let out_of_time = started.elapsed() >= LOG_WAIT;
        if let Err(e) = log.poll(out_of_time) {
            c.fail(format!(
                "cannot read the server log {}: {e}",
                path.display()
            ));
            return None;
        }
        let complete = errors
            .iter()
            .all(|s| !joined(&log.by_id, s).is_empty() || ids(s).is_empty());
        if out_of_time || complete {
            // The last line, if its newline is still to come.
            let _ = log.poll(true);
            return Some(log);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every line of the log is a JSON object.
fn require_json(c: &mut Ctx, log: &ServerLog) {
    if let Some(first) = log.first_bad {
        c.fail(format!(
            "{} of {} log lines are not JSON objects (first: line {first})",
            log.bad,
            log.bad + log.json
        ));
    }
}

/// The error replies judged against the log: how many have exactly one valid line, and what
/// is wrong with the others, in words.
struct Judged {
    good: usize,
    problems: Vec<String>,
}

impl Judged {
    /// Joins each error reply to its error lines by request id and judges the one it must have
    /// (its `stage` too, for the reference, whose answers imply it).
    fn of(log: &ServerLog, errors: &[Seen], (f3, reference): (&ErrorLogs, bool)) -> Judged {
        let index = &log.by_id;
        let mut problems = Vec::new();
        let mut good = 0;
        for seen in errors {
            let what = format!(
                "{} ({} {})",
                seen.label(),
                seen.status,
                seen.code.as_deref().unwrap_or("no code")
            );
            if ids(seen).is_empty() {
                problems.push(format!(
                    "{what}: no request id in header or body to join a log line by"
                ));
                continue;
            }
            match joined(index, seen).as_slice() {
                [] => problems.push(format!("{what}: no error line with its request_id")),
                [line] => match judge_line(line, seen, f3, reference) {
                    Ok(()) => good += 1,
                    Err(why) => problems.push(format!("{what}: {why}; line {line}")),
                },
                more => problems.push(format!(
                    "{what}: {} error lines with its request_id (one per error)",
                    more.len()
                )),
            }
        }
        Judged { good, problems }
    }

    /// Fails on any problem (the first named, the first few as evidence) and says how the run's
    /// `errors` error replies fared.
    fn report(&self, c: &mut Ctx, log: &ServerLog, errors: usize) {
        let Judged { good, problems } = self;
        if !problems.is_empty() {
            c.fail(format!(
                "{} of {} error replies lack exactly one valid log line; first: {}",
                problems.len(),
                errors,
                problems[0]
            ));
        }
        c.evidence.extend(
            problems
                .iter()
                .take(SHOWN)
                .map(|p| p.chars().take(400).collect()),
        );
        c.observed = format!(
            "{} JSON lines, {} not JSON; {good} of {} error replies of the run have exactly one valid line{}",
            log.json,
            log.bad,
            errors,
            if log.capped {
                format!(
                    "; the log passed {} MB, and the rest was not read",
                    server_log::MAX_BYTES >> 20
                )
            } else {
                String::new()
            }
        );
    }
}

/// A tag no other run's F3 has used in the target's log: the process and the run's number in it.
/// A fault set runs the suite several times from one process against one target and its one
/// log; ids made from the process alone would be logged once per run.
fn run_tag() -> String {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}.{n}", std::process::id())
}

/// Errors of each kind under client-chosen ids; F3 then judges them with the rest of the run's.
async fn provoke(t: &Arc<Target>, c: &mut Ctx) {
    let stages = t.expected.pool(Pool::Digitize).stages;
    let header = t.request_id_header().to_owned();
    let run = run_tag();
    let cap = t
        .expected
        .pool_spec(Pool::Digitize)
        .memory_cap_mb
        .unwrap_or_default();
    let provoked = [
        (
            format!("f3-{run}-fail"),
            Some(hook(HookDirective::Fail {
                stage: stages[stages.len() / 2],
            })),
        ),
        (
            format!("f3-{run}-panic"),
            Some(hook(HookDirective::Panic { stage: stages[0] })),
        ),
        (
            format!("f3-{run}-memory"),
            Some(hook(HookDirective::Alloc { mb: cap + 1 })),
        ),
        (format!("f3-{run}-empty"), None),
    ];
    for (id, hook) in &provoked {
        let request = match hook {
            Some(h) => t.digitize_request(Some(h)),
            None => t
                .client
                .post(t.url(&t.expected.api().digitize.path))
                .header(CONTENT_TYPE, ImageFormat::Png.to_mime_type()),
        };
        match t
            .send(request.header(header.as_str(), id.as_str()), Op::Digitize)
            .await
        {
            Ok(reply) => c.reply(t, id.as_str(), &reply),
            Err(e) => c.fail(format!("{id}: {e}")),
        }
    }
    // A burst one larger than workers plus queue places: at least one is refused (`admission`).
    let burst = t.digitize_workers() + t.digitize_queue() + 1;
    let hold = hold_first(t, BURST_HOLD_MS);
    let sends = (0..burst).map(|i| {
        let id = format!("f3-{run}-burst-{i}");
        let request = t
            .digitize_request(Some(&hold))
            .header(header.as_str(), id.as_str());
        async move { (id, t.send(request, Op::Digitize).await) }
    });
    for (id, reply) in futures_util::future::join_all(sends).await {
        match reply {
            Ok(reply) => c.reply(t, id, &reply),
            Err(e) => c.fail(format!("{id}: {e}")),
        }
    }
}

/// Errors of another service under client-chosen ids: each bad request its pools declare, once,
/// and a full pool's refusal.
async fn provoke_declared(t: &Arc<Target>, c: &mut Ctx) {
    let header = t.request_id_header().to_owned();
    let run = run_tag();
    provoke_refusal(t, c, &header, &run).await;
    for (i, (pool, bad)) in super::declared::declared(&t.expected)
        .into_iter()
        .enumerate()
    {
        let id = format!("f3-{run}-{i}");
        let mut request = bad.request.clone();
        request.headers.insert(header.clone(), id.clone());
        match t.send_recipe(&request, super::declared::PATIENCE).await {
            Ok(reply) => c.reply(t, id.as_str(), &reply),
            Err(e) => c.fail(format!("{pool}: {}: {e}", bad.what)),
        }
    }
}

/// A full pool's refusal under client-chosen ids: the first pool the checker can hold, that
/// refuses when its queue is full, gets a burst one larger than its workers and places.
async fn provoke_refusal(t: &Arc<Target>, c: &mut Ctx, header: &str, run: &str) {
    let contract = &t.expected;
    let full = contract.pools.iter().find_map(|(name, spec)| {
        let places = spec.queue.capacity.places()?;
        spec.refusal.as_ref()?;
        match pool::held(contract, name, spec) {
            Held::Request(held) => Some((name, spec.workers + places + 1, held)),
            Held::Hook(_) | Held::Not(_) => None,
        }
    });
    let Some((pool, n, held)) = full else {
        return;
    };
    let sends = (0..n).map(|i| {
        let id = format!("f3-{run}-{pool}-{i}");
        let held = held.with_header(header, &id);
        async move { (id, pool::send_held(t, &held, BURST_LIMIT).await) }
    });
    for (id, reply) in futures_util::future::join_all(sends).await {
        match reply {
            Ok(reply) => c.reply(t, id, &reply),
            Err(e) => c.fail(format!("{id}: {e}")),
        }
    }
}

/// How long a request of another service's refusal burst may take: its pool's held requests
/// and their queue, well within.
const BURST_LIMIT: Duration = Duration::from_secs(20);

/// The ids an error reply is known by: its header's and its body's.
fn ids(seen: &Seen) -> Vec<&str> {
    let mut ids: Vec<&str> = [seen.header_id.as_deref(), seen.body_id.as_deref()]
        .into_iter()
        .flatten()
        .filter(|id| !id.is_empty())
        .collect();
    ids.dedup();
    ids
}

/// The error lines of one reply (by either of its ids).
fn joined<'a>(
    index: &'a HashMap<String, Vec<serde_json::Value>>,
    seen: &Seen,
) -> Vec<&'a serde_json::Value> {
    ids(seen)
        .into_iter()
        .flat_map(|id| index.get(id).into_iter().flatten())
        .collect()
}

/// Whether one error line carries what the clause lists, with the stage the response implies.
// `String`: the Err is the findings joined into the failure's text, never matched on.
fn judge_line(
    line: &serde_json::Value,
    seen: &Seen,
    f3: &ErrorLogs,
    reference: bool,
) -> Result<(), String> {
    let mut why = Vec::new();
    for field in &f3.fields {
        let value = line.get(field.as_str());
        match (field.as_str(), value) {
            (_, None) => why.push(format!("no `{field}`")),
            ("stack", Some(v)) => {
                let backtrace = v.as_str().is_some_and(|s| !s.trim().is_empty());
                if f3.stack && !backtrace {
                    why.push(format!(
                        "`stack` is {v}, not a backtrace (the contract's stack is on)"
                    ));
                } else if !(f3.stack || v.is_string() || v.is_null()) {
                    why.push(format!("`stack` is {v}, neither a string nor null"));
                }
            }
            (_, Some(serde_json::Value::String(s))) if !s.trim().is_empty() => {}
            (_, Some(v)) => why.push(format!("`{field}` is {v}, not a non-empty string")),
        }
    }
    if let (true, Some(want), Some(stage)) = (reference, expected_stage(seen), line.get("stage"))
        && stage.as_str() != Some(want)
    {
        why.push(format!("`stage` is {stage}, the response implies `{want}`"));
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seen(status: u16, code: &str, failed_stage: Option<&str>) -> Seen {
        Seen {
            status,
            header_id: Some("id-1".into()),
            header_ids: 1,
            body_id: Some("id-1".into()),
            code: Some(code.into()),
            failed_stage: failed_stage.map(str::to_owned),
        }
    }

    fn f3(stack: bool) -> plimsoll_spec::model::ErrorLogs {
        let mut v = plimsoll_spec::Contract::embedded()
            .clauses()
            .f3
            .value
            .clone();
        v.stack = stack;
        v
    }

    #[test]
    fn the_stage_rule() {
        assert_eq!(
            expected_stage(&seen(503, "stage_failed", Some("fill"))),
            Some("fill")
        );
        assert_eq!(
            expected_stage(&seen(504, "timeout", Some("queue"))),
            Some("queue")
        );
        assert_eq!(
            expected_stage(&seen(503, "memory_cap_exceeded", Some("decode"))),
            Some("decode")
        );
        assert_eq!(
            expected_stage(&seen(503, "overloaded", None)),
            Some("admission")
        );
        assert_eq!(
            expected_stage(&seen(400, "empty_body", None)),
            Some("request")
        );
        assert_eq!(expected_stage(&seen(500, "", None)), None);
    }

    #[test]
    fn a_line_needs_every_field_non_empty_and_the_right_stage() {
        let s = seen(503, "stage_failed", Some("fill"));
        let good = json!({"request_id": "id-1", "stage": "fill", "error": "boom", "stack": ""});
        assert_eq!(judge_line(&good, &s, &f3(false), true), Ok(()));
        let null_stage = json!({"request_id": "id-1", "stage": null, "error": "boom", "stack": ""});
        assert!(judge_line(&null_stage, &s, &f3(false), true).is_err());
        let wrong_stage =
            json!({"request_id": "id-1", "stage": "segment", "error": "boom", "stack": ""});
        assert!(
            judge_line(&wrong_stage, &s, &f3(false), true)
                .unwrap_err()
                .contains("implies `fill`")
        );
        // Another service's answers imply no stage: its lines' `stage`, if any, is its own.
        assert_eq!(judge_line(&wrong_stage, &s, &f3(false), false), Ok(()));
        let empty_error = json!({"request_id": "id-1", "stage": "fill", "error": "", "stack": ""});
        assert!(judge_line(&empty_error, &s, &f3(false), true).is_err());
        let no_stack = json!({"request_id": "id-1", "stage": "fill", "error": "boom"});
        assert!(judge_line(&no_stack, &s, &f3(false), true).is_err());
        // Stack on: an empty stack is no backtrace.
        assert!(judge_line(&good, &s, &f3(true), true).is_err());
        let traced =
            json!({"request_id": "id-1", "stage": "fill", "error": "boom", "stack": "at x"});
        assert_eq!(judge_line(&traced, &s, &f3(true), true), Ok(()));
    }
}
