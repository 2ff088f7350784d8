//! `POST /reports`' body, read whole before anything else looks at it (its memory estimate, its
//! pool), so a body on its way never holds a worker: at most [`Bodies::max_bytes`], a larger one
//! (declared by its `Content-Length`, or counted while a chunked one arrives) refused `413` with
//! `{"code":"body_too_large"}`; a body that sends nothing for [`Bodies::read_timeout`] answered
//! `408` with a line of text. Both close the connection: what is left of the body is not read.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use http_body_util::BodyExt as _;

/// How a route's bodies are read.
#[derive(Debug, Clone, Copy)]
pub struct Bodies {
    /// The largest body taken.
    pub max_bytes: usize,
    /// How long the body may send nothing before it is answered `408` (none: as long as the
    /// client likes, a broken configuration's).
    pub read_timeout: Option<Duration>,
}

impl Default for Bodies {
    /// `/reports`' contract: at most 64 KiB, none stalled for two seconds.
    fn default() -> Bodies {
        Bodies {
            max_bytes: 64 * 1024,
            read_timeout: Some(Duration::from_secs(2)),
        }
    }
}

/// Reads the request's body within the bounds, then passes the request on with it.
pub(crate) async fn read(State(bounds): State<Bodies>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let declared = (parts.headers.get(header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > bounds.max_bytes as u64) {
        return too_large();
    }
    match whole(body, bounds).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(answer) => answer,
    }
}

/// The body's bytes, or the answer that ends it: too large, stalled, or broken off.
async fn whole(mut body: Body, bounds: Bodies) -> Result<Vec<u8>, Response> {
    let mut bytes = Vec::new();
    loop {
        let frame = match bounds.read_timeout {
            Some(limit) => (tokio::time::timeout(limit, body.frame()).await).map_err(|_| {
                closing(StatusCode::REQUEST_TIMEOUT, "request body timed out\n").into_response()
            })?,
            None => body.frame().await,
        };
        let Some(frame) = frame else {
            return Ok(bytes);
        };
        let frame = frame.map_err(|_| {
            closing(StatusCode::BAD_REQUEST, "request body broken off\n").into_response()
        })?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > bounds.max_bytes {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
}

/// A body larger than the route takes.
fn too_large() -> Response {
    let json = [(header::CONTENT_TYPE, "application/json")];
    let body = "{\"code\":\"body_too_large\"}";
    (json, closing(StatusCode::PAYLOAD_TOO_LARGE, body)).into_response()
}

/// An answer after which the connection closes: the rest of the body is never read.
fn closing(status: StatusCode, body: &'static str) -> impl IntoResponse {
    (status, [(header::CONNECTION, "close")], body)
}
