//! F3: one JSON log line per error with request_id, stage, error and stack.

use std::sync::Arc;
use std::time::Duration;

use image::ImageFormat;
use plimsoll_spec::{ClauseId, HookDirective};
use reqwest::header::CONTENT_TYPE;

use crate::checks::ctx::Ctx;
use crate::checks::pool::hook;
use crate::checks::registry::Check;
use crate::target::{Op, Target};

pub const CHECK: Check = Check::clause(
    ClauseId::F3,
    "Errors provoked under client-chosen request ids (a failing stage, a panic, an empty body), \
     then the server log is read (it needs `--server-log`, and is skipped without it): every \
     line parses as a JSON object, and each error has a line joined to its response by request \
     id that carries every field the clause lists.",
    |t, c| Box::pin(f3(t, c)),
);

async fn f3(t: &Arc<Target>, c: &mut Ctx) {
    let fields = t.expected.clauses.f3.value.fields.clone();
    c.expected = format!(
        "every log line is JSON; each error has a line with {}",
        fields.join(", ")
    );
    let Some(log) = t.server_log.clone() else {
        c.skip("needs --server-log FILE to read the implementation's log");
        return;
    };
    let stages = &t.expected.stages.digitize;
    let header = t.request_id_header().to_owned();
    let run = std::process::id();
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
        (format!("f3-{run}-empty"), None),
    ];
    let mut ids = Vec::new();
    for (id, hook) in &provoked {
        let mut request = match hook {
            Some(h) => t.digitize_request(Some(h)),
            None => t
                .client
                .post(t.url(&t.expected.api.digitize.path))
                .header(CONTENT_TYPE, ImageFormat::Png.to_mime_type()),
        };
        request = request.header(header.as_str(), id.as_str());
        match t.send(request, Op::Digitize).await {
            Ok(reply) => {
                c.reply(t, id.as_str(), &reply);
                // Join by the id the server answered under (it may replace ours).
                ids.push(reply.request_id(&header).unwrap_or_else(|| id.clone()));
            }
            Err(e) => c.fail(format!("{id}: {e}")),
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = match std::fs::read_to_string(&log) {
        Ok(text) => text,
        Err(e) => {
            c.fail(format!("cannot read {}: {e}", log.display()));
            return;
        }
    };
    let mut parsed = Vec::new();
    let mut bad = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) if v.is_object() => parsed.push(v),
            _ => bad.push(n + 1),
        }
    }
    c.require(bad.is_empty(), || {
        format!(
            "{} of {} log lines are not JSON objects (first: line {})",
            bad.len(),
            bad.len() + parsed.len(),
            bad[0]
        )
    });
    let mut joined = 0;
    for id in &ids {
        let line = parsed.iter().find(|v| {
            v.get("request_id").and_then(|x| x.as_str()) == Some(id.as_str())
                && v.get("error").is_some()
        });
        match line {
            None => c.fail(format!("no error line with request_id {id}")),
            Some(v) => {
                let missing: Vec<&String> = fields
                    .iter()
                    .filter(|f| v.get(f.as_str()).is_none())
                    .collect();
                if c.require(missing.is_empty(), || {
                    format!("error line of {id} lacks {missing:?}")
                }) {
                    joined += 1;
                }
                c.evidence
                    .push(format!("{id}: {v}").chars().take(300).collect());
            }
        }
    }
    c.observed = format!(
        "{} JSON lines, {} not JSON; {joined} of {} errors joined by request_id with all fields",
        parsed.len(),
        bad.len(),
        ids.len()
    );
}
