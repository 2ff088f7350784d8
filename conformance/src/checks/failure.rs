//! F1: a failing or panicking stage answers the exact body and leaves nothing behind.

use std::sync::Arc;

use super::{Ctx, capacity_recovered};
use crate::target::{Op, Target};

pub async fn f1(t: &Arc<Target>, c: &mut Ctx) {
    c.expected = "503 stage_failed with the failing stage and exactly the stages before it; no temp files; next request fine".into();
    let design = match t.digitize(None).await {
        Ok(r) if r.status == 200 => r.body,
        other => {
            c.fail(format!(
                "a plain digitize did not succeed: {:?}",
                other.map(|r| r.status)
            ));
            return;
        }
    };
    let api = &t.expected.api;
    let mut cases = 0;
    for (op, stages) in [
        (Op::Digitize, &t.expected.stages.digitize),
        (Op::Export, &t.expected.stages.export),
    ] {
        for kind in ["fail", "panic"] {
            for (i, stage) in stages.iter().enumerate() {
                let hook = format!("{kind}={stage}");
                let request = match op {
                    Op::Export => t
                        .client
                        .post(t.url(&api.export.path))
                        .header("content-type", api.export.content_types[0].as_str())
                        .header(t.hook_header(), &hook)
                        .body(design.clone()),
                    _ => t.digitize_request(Some(&hook)),
                };
                let label = format!("{:?} {hook}", op).to_lowercase();
                let reply = match t.send(request, op).await {
                    Ok(r) => r,
                    Err(e) => {
                        c.fail(format!("{label}: {e}"));
                        continue;
                    }
                };
                cases += 1;
                c.reply(&label, &reply, t.request_id_header());
                let body = reply.json();
                let before: Vec<&str> = stages[..i].iter().map(|s| s.as_str()).collect();
                c.require(
                    reply.status == 503 && body["code"] == "stage_failed",
                    || {
                        format!(
                            "{label}: expected 503 stage_failed, got {} {}",
                            reply.status, body["code"]
                        )
                    },
                );
                c.require(body["failed_stage"] == stage.as_str(), || {
                    format!("{label}: failed_stage {}", body["failed_stage"])
                });
                c.require(
                    body["completed_stages"] == serde_json::json!(before),
                    || {
                        format!(
                            "{label}: completed_stages {} instead of {before:?}",
                            body["completed_stages"]
                        )
                    },
                );
                c.require(
                    body["error"].as_str().is_some_and(|e| !e.is_empty()),
                    || format!("{label}: no `error` message"),
                );
                c.require(
                    body["request_id"].as_str().is_some_and(|e| !e.is_empty()),
                    || format!("{label}: no `request_id`"),
                );
                if let Some(entries) = t.temp_entries() {
                    c.require(entries.is_empty(), || {
                        format!("{label}: temp files left: {entries:?}")
                    });
                }
            }
        }
    }
    if t.temp_entries().is_none() {
        let n = t
            .metric("plimsoll_temp_files", "")
            .await
            .unwrap_or(f64::NAN);
        c.require(n == 0.0, || {
            format!("plimsoll_temp_files is {n} after the failures")
        });
    }
    match t.digitize(None).await {
        Ok(r) => {
            c.reply("next", &r, t.request_id_header());
            c.require(r.status == 200, || {
                format!("the request after the failures answered {}", r.status)
            });
        }
        Err(e) => c.fail(format!("the request after the failures: {e}")),
    }
    c.observed = format!(
        "{cases} injected failures and panics answered; temp dir {}",
        match t.temp_entries() {
            Some(e) if e.is_empty() => "empty".to_owned(),
            Some(e) => format!("holds {e:?}"),
            None => "not visible (metric used)".to_owned(),
        }
    );
    capacity_recovered(t, c).await;
}
