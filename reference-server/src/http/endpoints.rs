//! `POST /v1/digitize` and `POST /v1/export`: one handler ([`handle`]) runs intake, the job
//! ([`super::run`]) and the answer; an [`Endpoint`] says only what differs between the two:
//! their parameters, their work and the shape of their success.

use std::collections::HashMap;
use std::time::Duration;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use plimsoll_spec::model::Param;
use plimsoll_spec::{Contract, ErrorCode, ExportFormat, Outcome, Pool};

use super::RequestId;
use super::intake::{self, Params, Prepared};
use super::run::{self, Job};
use crate::error::ErrorKind;
use crate::state::AppState;
use crate::upload::Upload;
use plimsoll_engine::export::ExportOutput;
use plimsoll_engine::job::{JobContext, JobError};
use plimsoll_engine::pipeline::DigitizeParams;
use plimsoll_engine::pipeline::serialize::Json;

/// What one pipeline endpoint adds to the shared handler.
pub(super) trait Endpoint {
    /// The endpoint's query parameters, parsed.
    type Params: Send + 'static;
    /// What its job produces.
    type Output: Send + 'static;

    const POOL: Pool;

    /// Its timeout (B1) and first stage, from the contract.
    fn job(contract: &Contract) -> Job;
    /// Accepted `Content-Type`s and the upload limit.
    fn upload_limits(contract: &Contract) -> (&[String], u64);
    fn params(
        contract: &Contract,
        query: &HashMap<String, String>,
    ) -> Result<Self::Params, ErrorKind>;
    fn work(
        ctx: &mut JobContext,
        body: Bytes,
        params: Self::Params,
    ) -> Result<Self::Output, JobError>;
    fn respond(output: Self::Output) -> Response;
}

/// The pipeline endpoint `E` as an axum handler (its route in the router; [`super::Api`]
/// answers its POSTs before the router, through [`serve`]).
pub(super) async fn handle<E: Endpoint>(
    State(state): State<AppState>,
    Extension(RequestId(id)): Extension<RequestId>,
    request: Request,
) -> Response {
    serve::<E>(&state, &id, request).await
}

/// Every pipeline endpoint: intake, then the job, then the answer. A success is counted and
/// stamped with `Server-Timing`; an error is answered by [`crate::problem`].
pub(super) async fn serve<E: Endpoint>(state: &AppState, id: &str, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let query: Params = Query::try_from_uri(&parts.uri);
    let headers = &parts.headers;
    let contract = &state.config.contract;
    let (content_types, limit) = E::upload_limits(contract);
    let read_timeout = Duration::from_millis(contract.upload().read_timeout_ms);
    let upload = Upload::new(
        body,
        headers,
        limit,
        (read_timeout, state.components().deadline.clone()),
        &state.upload_budget,
        &*state.config.components().upload_budget,
    );
    let ran = async {
        let Prepared { hooks, params } =
            intake::prepare(state, id, E::POOL, query, headers, content_types, |q| {
                E::params(contract, q)
            })?;
        let job = E::job(contract);
        run::run_job(state, id, job, hooks, upload, move |ctx, body| {
            E::work(ctx, body, params)
        })
        .await
    };
    match ran.await {
        Ok((output, timing)) => {
            state.metrics.outcome(E::POOL, Outcome::Ok);
            let mut response = E::respond(output);
            timing.stamp(state, &mut response);
            response
        }
        Err(e) => state.problems().respond(e),
    }
}

/// The timeout of a pool that declares no deadline: a year, far past any request, and an
/// `Instant` offset the clock's arithmetic bears (`Duration::MAX` would overflow it).
const NO_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

/// `POST /v1/digitize`: image → design JSON.
pub(super) struct Digitize;

impl Endpoint for Digitize {
    type Params = DigitizeParams;
    type Output = Json;

    const POOL: Pool = Pool::Digitize;

    fn job(contract: &Contract) -> Job {
        Job {
            pool: Self::POOL,
            timeout: contract.pool(Self::POOL).deadline.unwrap_or(NO_DEADLINE),
            first_stage: contract.pool(Self::POOL).stages[0],
        }
    }

    fn upload_limits(contract: &Contract) -> (&[String], u64) {
        let api = &contract.api().digitize;
        (&api.content_types, api.max_upload_bytes)
    }

    fn params(
        contract: &Contract,
        query: &HashMap<String, String>,
    ) -> Result<DigitizeParams, ErrorKind> {
        let api = &contract.api().digitize;
        let p = &api.params;
        let value = |name: &str, param: &Param| match query.get(name) {
            None => Ok(param.default),
            Some(raw) => param
                .parse(name, raw)
                .map_err(|e| ErrorKind::rejected(ErrorCode::InvalidParameter, e.to_string())),
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
    }

    fn work(ctx: &mut JobContext, image: Bytes, params: DigitizeParams) -> Result<Json, JobError> {
        plimsoll_engine::pipeline::digitize(ctx, &image, &params).map(|out| out.json)
    }

    /// The parts one after the other, never joined (a 4 MP design is 24 MB in two parts), with
    /// their whole length as `Content-Length`.
    fn respond(json: Json) -> Response {
        let length = json.len();
        let parts = json
            .into_parts()
            .into_iter()
            .map(|part| Ok::<_, std::convert::Infallible>(Bytes::from(part)));
        (
            [
                (header::CONTENT_TYPE, "application/json".to_owned()),
                (header::CONTENT_LENGTH, length.to_string()),
            ],
            Body::from_stream(futures_util::stream::iter(parts)),
        )
            .into_response()
    }
}

/// `POST /v1/export`: design JSON → machine file or SVG preview.
pub(super) struct Export;

impl Endpoint for Export {
    type Params = ExportFormat;
    type Output = (ExportOutput, ExportFormat);

    const POOL: Pool = Pool::Export;

    fn job(contract: &Contract) -> Job {
        Job {
            pool: Self::POOL,
            timeout: contract.pool(Self::POOL).deadline.unwrap_or(NO_DEADLINE),
            first_stage: contract.pool(Self::POOL).stages[0],
        }
    }

    fn upload_limits(contract: &Contract) -> (&[String], u64) {
        let api = &contract.api().export;
        (&api.content_types, api.max_upload_bytes)
    }

    fn params(
        contract: &Contract,
        query: &HashMap<String, String>,
    ) -> Result<ExportFormat, ErrorKind> {
        let api = &contract.api().export;
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
    }

    fn work(
        ctx: &mut JobContext,
        design: Bytes,
        format: ExportFormat,
    ) -> Result<(ExportOutput, ExportFormat), JobError> {
        plimsoll_engine::export::export(ctx, &design, format).map(|out| (out, format))
    }

    fn respond((out, format): (ExportOutput, ExportFormat)) -> Response {
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
