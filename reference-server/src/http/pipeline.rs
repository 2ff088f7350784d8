//! `POST /v1/digitize` and `POST /v1/export`: validate the request, read the body (before
//! admission, so a slow upload never holds a slot), then run the job on a worker slot under the
//! deadline, the memory cap and the client's cancellation.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State, rejection::QueryRejection};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use plimsoll_spec::{ErrorCode, ExportFormat, HookDirective, Stage};
use tokio_util::sync::CancellationToken;

use super::{RequestId, error_response};
use crate::admission::Pool;
use crate::error::{ApiError, ErrorKind};
use crate::job::{JobConfig, JobContext, JobError, JobErrorKind};
use crate::metrics::PoolLabel;
use crate::mutant::Mutant;
use crate::pipeline::DigitizeParams;
use crate::state::AppState;

type Params = Result<Query<HashMap<String, String>>, QueryRejection>;

pub async fn digitize(
    State(state): State<AppState>,
    Extension(RequestId(id)): Extension<RequestId>,
    query: Params,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let api = &state.config.contract.api.digitize;
    let prepared = async {
        let hooks = hooks(&state, &id, "digitize", &headers)?;
        let query = query_map(&id, "digitize", query)?;
        let p = &api.params;
        let value = |name: &str, param: &plimsoll_spec::model::Param| match query.get(name) {
            None => Ok(param.default),
            Some(raw) => param.parse(name, raw).map_err(|detail| {
                ApiError::rejected(&id, "digitize", ErrorCode::InvalidParameter, detail)
            }),
        };
        let params = DigitizeParams {
            width_mm: value("width_mm", &p.width_mm)?,
            density_mm: value("density_mm", &p.density_mm)?,
            colors: value("colors", &p.colors)? as u8,
            max_stitch_mm: value("max_stitch_mm", &p.max_stitch_mm)?,
            max_pixels: api.max_pixels,
        };
        if let Some(unknown) = query
            .keys()
            .find(|k| !p.iter().iter().any(|(name, _)| name == k))
        {
            return Err(ApiError::rejected(
                &id,
                "digitize",
                ErrorCode::InvalidParameter,
                format!("unknown parameter `{unknown}`"),
            ));
        }
        content_type(&id, "digitize", &headers, &api.content_types)?;
        let body = read_body(
            &state,
            &id,
            "digitize",
            &headers,
            body,
            api.max_upload_bytes,
        )
        .await?;
        Ok((hooks, params, body))
    };
    let (hooks, params, body) = match prepared.await {
        Ok(ok) => ok,
        Err(e) => return error_response(&state, e),
    };
    let timeout = Duration::from_millis(state.config.contract.clauses.b1.value.digitize_timeout_ms);
    let job = run_job(&state, &state.digitize, &id, hooks, timeout, move |ctx| {
        crate::pipeline::digitize(ctx, &body, &params).map(|out| out.json)
    });
    match job.await {
        Ok((json, timing)) => {
            state.metrics.outcome("digitize", "ok");
            let mut response = ([(header::CONTENT_TYPE, "application/json")], json).into_response();
            timing.stamp(&state, &mut response);
            response
        }
        Err(e) => error_response(&state, e),
    }
}

pub async fn export(
    State(state): State<AppState>,
    Extension(RequestId(id)): Extension<RequestId>,
    query: Params,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let api = &state.config.contract.api.export;
    let prepared = async {
        let hooks = hooks(&state, &id, "export", &headers)?;
        let query = query_map(&id, "export", query)?;
        let format = match query.get("format") {
            None => api.default_format,
            Some(raw) => raw
                .parse::<ExportFormat>()
                .ok()
                .filter(|f| api.formats.contains(f))
                .ok_or_else(|| {
                    let known: Vec<&str> = api.formats.iter().map(|f| f.as_str()).collect();
                    ApiError::rejected(
                        &id,
                        "export",
                        ErrorCode::InvalidParameter,
                        format!("`format` must be one of {}, got `{raw}`", known.join(", ")),
                    )
                })?,
        };
        if let Some(unknown) = query.keys().find(|k| *k != "format") {
            return Err(ApiError::rejected(
                &id,
                "export",
                ErrorCode::InvalidParameter,
                format!("unknown parameter `{unknown}`"),
            ));
        }
        content_type(&id, "export", &headers, &api.content_types)?;
        let body = read_body(&state, &id, "export", &headers, body, api.max_upload_bytes).await?;
        Ok((hooks, format, body))
    };
    let (hooks, format, body) = match prepared.await {
        Ok(ok) => ok,
        Err(e) => return error_response(&state, e),
    };
    let timeout = Duration::from_millis(state.config.contract.clauses.b1.value.export_timeout_ms);
    let job = run_job(&state, &state.export, &id, hooks, timeout, move |ctx| {
        crate::export::export(ctx, &body, format)
    });
    match job.await {
        Ok((out, timing)) => {
            state.metrics.outcome("export", "ok");
            let disposition = format!(
                "attachment; filename=\"{}\"",
                safe_file_name(&out.file_name)
            );
            let mut response = (
                [
                    (header::CONTENT_TYPE, format.media_type().to_owned()),
                    (header::CONTENT_DISPOSITION, disposition),
                ],
                out.bytes,
            )
                .into_response();
            timing.stamp(&state, &mut response);
            response
        }
        Err(e) => error_response(&state, e),
    }
}

/// Keeps a file name to characters that need no quoting in `Content-Disposition`.
fn safe_file_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    if cleaned.is_empty() {
        "design".into()
    } else {
        cleaned
    }
}

/// The hook header: refused unless hooks are enabled, parsed by the contract's grammar.
fn hooks(
    state: &AppState,
    id: &str,
    pool: &'static str,
    headers: &HeaderMap,
) -> Result<Vec<HookDirective>, ApiError> {
    let h = &state.config.contract.hooks;
    let Some(value) = headers.get(h.header.as_str()) else {
        return Ok(Vec::new());
    };
    if !state.config.hooks_enabled {
        return Err(ApiError::rejected(
            id,
            pool,
            h.disabled_code,
            format!(
                "{} is only honoured when the server runs with {}=1",
                h.header, h.env
            ),
        ));
    }
    let text = value.to_str().unwrap_or_default();
    plimsoll_spec::parse_hooks(text)
        .map_err(|e| ApiError::rejected(id, pool, ErrorCode::InvalidParameter, e.to_string()))
}

fn query_map(
    id: &str,
    pool: &'static str,
    query: Params,
) -> Result<HashMap<String, String>, ApiError> {
    query.map(|Query(q)| q).map_err(|e| {
        ApiError::rejected(
            id,
            pool,
            ErrorCode::InvalidParameter,
            format!("bad query string: {e}"),
        )
    })
}

/// A present `Content-Type` must be one the endpoint takes (parameters such as `charset` aside).
fn content_type(
    id: &str,
    pool: &'static str,
    headers: &HeaderMap,
    accepted: &[String],
) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let media = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if accepted.contains(&media) {
        Ok(())
    } else {
        Err(ApiError::rejected(
            id,
            pool,
            ErrorCode::UnsupportedFormat,
            format!(
                "Content-Type `{media}` is not accepted; expected {}",
                accepted.join(" or ")
            ),
        ))
    }
}

/// Reads the whole body before admission, bounded in size and in time. An oversize body is
/// still drained (up to a bound) before the 400 is answered: a client that is still sending
/// when the server closes would see a reset instead of the answer.
async fn read_body(
    state: &AppState,
    id: &str,
    pool: &'static str,
    headers: &HeaderMap,
    body: Body,
    limit: u64,
) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;

    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // Past this much, stop draining and let the connection close.
    let drain_cap = limit.saturating_mul(4);
    let read_timeout = Duration::from_millis(state.config.contract.api.upload_read_timeout_ms);
    let mut body = body;
    let mut kept = Vec::new();
    let mut seen: u64 = 0;
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| e.to_string())?;
            if let Ok(data) = frame.into_data() {
                seen += data.len() as u64;
                if seen <= limit && declared.is_none_or(|n| n <= limit) {
                    kept.extend_from_slice(&data);
                } else if seen > drain_cap {
                    break;
                }
            }
        }
        Ok::<(), String>(())
    };
    match tokio::time::timeout(read_timeout, read).await {
        Err(_) => {
            return Err(ApiError::rejected(
                id,
                pool,
                ErrorCode::UploadTimeout,
                format!(
                    "the request body did not arrive within {} ms",
                    read_timeout.as_millis()
                ),
            ));
        }
        Ok(Err(e)) => {
            return Err(ApiError::rejected(
                id,
                pool,
                ErrorCode::EmptyBody,
                format!("the body could not be read: {e}"),
            ));
        }
        Ok(Ok(())) => {}
    }
    if seen > limit || declared.is_some_and(|n| n > limit) {
        return Err(ApiError::rejected(
            id,
            pool,
            ErrorCode::PayloadTooLarge,
            format!("the upload is larger than {limit} bytes"),
        ));
    }
    if kept.is_empty() {
        return Err(ApiError::rejected(
            id,
            pool,
            ErrorCode::EmptyBody,
            "the request body is empty",
        ));
    }
    Ok(Bytes::from(kept))
}

/// Queue and run durations, for `Server-Timing`.
pub struct Timing {
    queue: Duration,
    run: Duration,
}

impl Timing {
    fn stamp(&self, state: &AppState, response: &mut Response) {
        let obs = &state.config.contract.observability;
        let durations = [self.queue, self.run];
        let value = obs
            .server_timing_metrics
            .iter()
            .zip(durations)
            .map(|(name, d)| format!("{name};dur={:.1}", d.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(", ");
        if let Ok(v) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(super::header_name(&obs.server_timing_header), v);
        }
    }
}

/// Cancels the job when the handler's future is dropped before it finished — that is how a
/// client disconnect reaches us (hyper drops the connection's future) (B3).
struct DisconnectGuard {
    token: CancellationToken,
    /// Set when the client went away (as opposed to a deadline or shutdown cancel).
    gone: Arc<AtomicBool>,
    state: AppState,
    pool: &'static str,
    armed: bool,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.gone.store(true, Ordering::SeqCst);
        if !self.state.config.is(Mutant::IgnoreDisconnect) {
            self.token.cancel();
        }
        self.state
            .metrics
            .cancellations
            .get_or_create(&PoolLabel {
                pool: self.pool.to_owned(),
            })
            .inc();
        self.state.metrics.outcome(self.pool, "cancelled");
    }
}

/// Admission, then the job on a blocking worker thread under the deadline. The slot is held by
/// the worker thread and given back when the worker actually stops, so a timed-out or cancelled
/// job keeps its slot until its next checkpoint (at most the B3 bound).
async fn run_job<T, F>(
    state: &AppState,
    pool: &Arc<Pool>,
    id: &str,
    hooks: Vec<HookDirective>,
    timeout: Duration,
    work: F,
) -> Result<(T, Timing), ApiError>
where
    T: Send + 'static,
    F: FnOnce(&mut JobContext) -> Result<T, JobError> + Send + 'static,
{
    let config = &state.config;
    let name = pool.name();
    let fail = |kind| ApiError {
        request_id: id.to_owned(),
        pool: name,
        kind,
    };
    let admitted = Instant::now();
    let deadline = admitted + timeout;
    let token = state.shutdown.child_token();
    let gone = Arc::new(AtomicBool::new(false));
    let mut guard = DisconnectGuard {
        token: token.clone(),
        gone: gone.clone(),
        state: state.clone(),
        pool: name,
        armed: true,
    };
    let timed_out = |failed_stage, completed_stages| ErrorKind::Timeout {
        failed_stage,
        completed_stages,
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    };

    let permit = match tokio::time::timeout_at(deadline.into(), pool.acquire()).await {
        Err(_) => {
            guard.armed = false;
            return Err(fail(timed_out(Stage::Queue, Vec::new())));
        }
        Ok(Err(refused)) => {
            if config.is(Mutant::RefusalWaits) {
                pool.wait_for_free_slot().await;
            }
            guard.armed = false;
            let (busy, queued) = pool.load();
            return Err(fail(ErrorKind::Overloaded {
                retry_after_s: refused.retry_after_s,
                detail: format!(
                    "all {busy} {name} workers are busy and {queued} requests are queued; retry after {} s",
                    refused.retry_after_s
                ),
            }));
        }
        Ok(Ok(permit)) => permit,
    };
    let started = permit.granted();

    let job_config = JobConfig {
        cancel: token.clone(),
        deadline: if config.is(Mutant::IgnoreTimeout) {
            admitted + Duration::from_secs(86_400)
        } else {
            deadline
        },
        memory_cap_bytes: if config.is(Mutant::IgnoreMemoryCap) {
            u64::MAX / 4
        } else {
            config
                .contract
                .clauses
                .b2
                .value
                .memory_cap_mb
                .saturating_mul(1 << 20)
        },
        temp_root: config.temp_root.clone(),
        hooks,
    };
    let first_stage = if name == "export" {
        config.contract.stages.export[0]
    } else {
        config.contract.stages.digitize[0]
    };
    let ctx = JobContext::new(job_config).map_err(|e| {
        fail(ErrorKind::Job(Box::new(JobError {
            kind: JobErrorKind::Failed {
                message: format!("cannot create the job's temp dir: {e}"),
                backtrace: String::new(),
            },
            failed_stage: first_stage,
            completed_stages: Vec::new(),
        })))
    })?;
    let progress = ctx.progress();
    let leak_temp = config
        .is(Mutant::LeakTempFiles)
        .then(|| config.temp_root.clone());
    let leak_slot = config.is(Mutant::LeakSlotOnCancel);
    let handle = tokio::task::spawn_blocking(move || {
        let mut ctx = ctx;
        let result = work(&mut ctx);
        if let (Some(root), Err(_)) = (&leak_temp, &result) {
            let _ = std::fs::create_dir_all(root.join(format!(
                "{}leaked-{:?}",
                crate::temp::JOB_DIR_PREFIX,
                Instant::now()
            )));
        }
        // The temp dir goes before the slot comes back.
        drop(ctx);
        if leak_slot && gone.load(Ordering::SeqCst) {
            permit.leak();
        } else {
            drop(permit);
        }
        result
    });

    let joined = if config.is(Mutant::IgnoreTimeout) {
        Ok(handle.await)
    } else {
        tokio::time::timeout_at(deadline.into(), handle).await
    };
    guard.armed = false;
    let timing = || Timing {
        queue: started - admitted,
        run: started.elapsed(),
    };
    match joined {
        Err(_) => {
            token.cancel();
            let (current, completed) = progress.snapshot();
            Err(fail(timed_out(current.unwrap_or(first_stage), completed)))
        }
        Ok(Err(join_error)) => Err(fail(ErrorKind::Job(Box::new(JobError {
            kind: JobErrorKind::Panicked {
                message: join_error.to_string(),
                backtrace: String::new(),
            },
            failed_stage: progress.snapshot().0.unwrap_or(first_stage),
            completed_stages: progress.snapshot().1,
        })))),
        Ok(Ok(Ok(value))) => Ok((value, timing())),
        Ok(Ok(Err(e)))
            if e.kind == JobErrorKind::Interrupted(crate::job::Interrupt::DeadlineExceeded) =>
        {
            Err(fail(timed_out(e.failed_stage, e.completed_stages)))
        }
        Ok(Ok(Err(e))) => Err(fail(ErrorKind::Job(Box::new(e)))),
    }
}
