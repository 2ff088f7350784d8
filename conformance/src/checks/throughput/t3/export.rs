//! The export pool's part of T3: saturated, refused and retried on its own task while the
//! digitize levels run.

use super::*;

/// The export pool, saturated and refused, on its own task while the digitize levels run: the
/// raw replies, judged afterwards.
pub(super) struct ExportRun {
    pub(super) holders: Vec<Result<Reply, TaskError>>,
    /// The refusal, or why none was sent: the pool was not seen full in time.
    pub(super) probe: Result<Result<Reply, RequestError>, String>,
    pub(super) retry: Option<Result<Reply, RequestError>>,
}

pub(super) async fn export_run(t: Arc<Target>) -> ExportRun {
    let pool = Pool::Export;
    let _ = t
        .wait_metric(MetricName::WorkersBusy, pool, t.stop_within() * 2, |v| {
            v <= 0.0
        })
        .await;
    let hold = Duration::from_millis(500).min(t.deadline(pool) / 2);
    let s = saturate(&t, pool, hold).await;
    let probe = match s.too_late(pool) {
        Some(why) => Err(why),
        None => Ok(t.send_pool(pool, None, give_up(&t, pool)).await),
    };
    let t3 = t.expected.retry_after();
    let advertised = (probe.as_ref().ok())
        .and_then(|r| r.as_ref().ok())
        .and_then(|r| Some((r.sent, t3.format.parse(r.header(&t3.header)?)?)));
    let retry = match advertised {
        Some((at, n)) if n <= t.max_retry_after_s(pool) => {
            sleep_until(at + Duration::from_secs(n)).await;
            Some(t.send_pool(pool, None, give_up(&t, pool)).await)
        }
        _ => None,
    };
    let mut holders = join_all(s.holders).await;
    holders.extend(join_all(s.queued).await);
    ExportRun {
        holders,
        probe,
        retry,
    }
}

pub(super) fn judge_export(
    t: &Target,
    c: &mut Ctx,
    run: ExportRun,
    latencies: &mut Vec<f64>,
) -> String {
    let pool = Pool::Export;
    for (i, r) in run.holders.iter().enumerate() {
        match r {
            Ok(reply) => c.reply(t, format!("export-held-{i}"), reply),
            Err(e) => c.fail(format!("export-held-{i}: {e}")),
        }
    }
    let n = match &run.probe {
        Err(why) => {
            c.skip(why);
            return "export: not refused (its pool was not seen full in time)".into();
        }
        Ok(Ok(reply)) => {
            latencies.push(ms(reply.elapsed));
            judge_refusal(t, c, pool, "export-probe", reply)
        }
        Ok(Err(e)) => {
            c.fail(format!("export-probe: {e}"));
            None
        }
    };
    let header = &t.expected.retry_after().header;
    match (n, run.retry) {
        (Some(n), Some(Ok(reply))) => {
            c.reply(t, "export-retry", &reply);
            c.require(reply.ok(), || {
                format!(
                    "export-retry: a retry {n} s after the refusal (its {header}) answered {} {}",
                    reply.status,
                    reply.code()
                )
            });
            format!(
                "export: refused with {n} s; retry after it: {}",
                reply.status
            )
        }
        (Some(_), Some(Err(e))) => {
            c.fail(format!("export-retry: {e}"));
            "export: retry failed".into()
        }
        _ => "export: no valid refusal".into(),
    }
}
