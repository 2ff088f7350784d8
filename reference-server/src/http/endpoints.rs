//! `POST /v1/digitize` and `POST /v1/export`: intake, then the job ([`super::run`]), then the
//! answer. Only what differs between the two lives here: their parameters, their work and the
//! shape of their success.

use std::time::Duration;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use plimsoll_spec::model::Param;
use plimsoll_spec::{ErrorCode, ExportFormat, Outcome, Pool};

use super::RequestId;
use super::intake::{self, Params, Prepared};
use super::run::{self, Job};
use crate::error::{ApiError, ErrorKind};
use crate::job::{JobContext, JobError};
use crate::pipeline::DigitizeParams;
use crate::state::AppState;
use crate::upload::Upload;

pub async fn digitize(
    State(state): State<AppState>,
    Extension(RequestId(id)): Extension<RequestId>,
    query: Params,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let contract = &state.config.contract;
    let api = &contract.api.digitize;
    let prepared = intake::prepare(
        &state,
        &id,
        Pool::Digitize,
        query,
        &headers,
        &api.content_types,
        |query| {
            let p = &api.params;
            let value = |name: &str, param: &Param| match query.get(name) {
                None => Ok(param.default),
                Some(raw) => param
                    .parse(name, raw)
                    .map_err(|detail| ErrorKind::rejected(ErrorCode::InvalidParameter, detail)),
            };
            let params = DigitizeParams {
                width_mm: value("width_mm", &p.width_mm)?,
                density_mm: value("density_mm", &p.density_mm)?,
                colors: value("colors", &p.colors)? as u8,
                max_stitch_mm: value("max_stitch_mm", &p.max_stitch_mm)?,
                max_pixels: api.max_pixels,
            };
            intake::no_unknown(query, p.iter().map(|(name, _)| name))?;
            Ok(params)
        },
    );
    let job = Job {
        pool: Pool::Digitize,
        timeout: Duration::from_millis(contract.clauses.b1.value.digitize_timeout_ms),
        first_stage: contract.stages.digitize[0],
    };
    let upload = upload(&state, &headers, body, api.max_upload_bytes);
    let work = |ctx: &mut JobContext, image: Bytes, params: DigitizeParams| {
        crate::pipeline::digitize(ctx, &image, &params).map(|out| out.json)
    };
    serve(&state, &id, job, prepared, upload, work, |json| {
        ([(header::CONTENT_TYPE, "application/json")], json).into_response()
    })
    .await
}

pub async fn export(
    State(state): State<AppState>,
    Extension(RequestId(id)): Extension<RequestId>,
    query: Params,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let contract = &state.config.contract;
    let api = &contract.api.export;
    let prepared = intake::prepare(
        &state,
        &id,
        Pool::Export,
        query,
        &headers,
        &api.content_types,
        |query| {
            let format = match query.get("format") {
                None => api.default_format,
                Some(raw) => raw
                    .parse::<ExportFormat>()
                    .ok()
                    .filter(|f| api.formats.contains(f))
                    .ok_or_else(|| {
                        let known: Vec<&str> = api.formats.iter().map(|f| f.as_str()).collect();
                        ErrorKind::rejected(
                            ErrorCode::InvalidParameter,
                            format!("`format` must be one of {}, got `{raw}`", known.join(", ")),
                        )
                    })?,
            };
            intake::no_unknown(query, ["format"])?;
            Ok(format)
        },
    );
    let job = Job {
        pool: Pool::Export,
        timeout: Duration::from_millis(contract.clauses.b1.value.export_timeout_ms),
        first_stage: contract.stages.export[0],
    };
    let upload = upload(&state, &headers, body, api.max_upload_bytes);
    let work = |ctx: &mut JobContext, design: Bytes, format: ExportFormat| {
        crate::export::export(ctx, &design, format).map(|out| (out, format))
    };
    serve(&state, &id, job, prepared, upload, work, |(out, format)| {
        let disposition = format!(
            "attachment; filename=\"{}\"",
            safe_file_name(&out.file_name)
        );
        (
            [
                (header::CONTENT_TYPE, format.media_type().to_owned()),
                (header::CONTENT_DISPOSITION, disposition),
            ],
            out.bytes,
        )
            .into_response()
    })
    .await
}

fn upload(state: &AppState, headers: &HeaderMap, body: Body, limit: u64) -> Upload {
    let read_timeout = Duration::from_millis(state.config.contract.api.upload_read_timeout_ms);
    Upload::new(body, headers, limit, read_timeout)
}

/// Runs a prepared request's job and answers: a success is counted, shaped by `respond` and
/// stamped with `Server-Timing`; an error is answered by [`crate::problem`].
async fn serve<P, T>(
    state: &AppState,
    id: &str,
    job: Job,
    prepared: Result<Prepared<P>, ApiError>,
    upload: Upload,
    work: impl FnOnce(&mut JobContext, Bytes, P) -> Result<T, JobError> + Send + 'static,
    respond: impl FnOnce(T) -> Response,
) -> Response
where
    P: Send + 'static,
    T: Send + 'static,
{
    let pool = job.pool;
    let ran = async {
        let Prepared { hooks, params } = prepared?;
        run::run_job(state, id, job, hooks, upload, move |ctx, body| {
            work(ctx, body, params)
        })
        .await
    };
    match ran.await {
        Ok((value, timing)) => {
            state.metrics.outcome(pool, Outcome::Ok);
            let mut response = respond(value);
            timing.stamp(state, &mut response);
            response
        }
        Err(e) => state.problems().respond(e),
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
