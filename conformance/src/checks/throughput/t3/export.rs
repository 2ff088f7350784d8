//! The export pool's part of T3: saturated, refused and retried on its own task while the
//! digitize levels run.

use super::*;

/// The export pool, saturated and refused, on its own task while the digitize levels run: the
/// raw replies, judged afterwards.
pub(super) struct ExportRun {
    pub(super) holders: Vec<Result<Reply, TaskError>>,
    /// The refusal, or why none was sent: the pool was not seen full in time.
    pub(super) probe: Result<Result<Reply, RequestError>, String>,
    /// The retry after the refusal's delay, judged as the levels' are ([`judge_retry`]).
    pub(super) retry: Option<Retry>,
    /// When the first of the checker's holders freed its slot.
    pub(super) freed: Option<Freed>,
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
        Some((at, n)) if n <= t.max_retry_after_s(pool) => Some(spawn_retry(&t, pool, at, n)),
        _ => None,
    };
    let mut holders = join_all(s.holders).await;
    let answered = holders.iter().filter_map(|r| r.as_ref().ok());
    let freed = Freed::first(s.sent + s.hold, answered);
    holders.extend(join_all(s.queued).await);
    ExportRun {
        holders,
        probe,
        retry,
        freed,
    }
}

/// Judges the export pool's lone part: its holders, its refusal, and the retry after the
/// refusal's delay; its note for the observation.
pub(super) async fn judge_export(
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
    match (n, run.retry) {
        (Some(n), Some(retry)) => {
            let retried = judge_retry(t, c, (pool, "export-retry"), Some(retry), run.freed).await;
            format!("export: refused with {n} s; {retried}")
        }
        _ => "export: no valid refusal".into(),
    }
}
