//! What the service answers when it will not serve a request: a full pool's refusal or a spent
//! quota's, each with the status, body and hint its contract declares.

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

/// What a full pool answers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refusal {
    /// `/search`'s: the status given, with a JSON body naming the error given
    /// (`{"error":"too many searches"}`) and the `Retry-After` seconds given.
    Search(StatusCode, &'static str, Option<u64>),
    /// `/reports`': `503` with plain text.
    Reports,
    /// `/quota`'s: `429` with the plain text given and `Retry-After: 1`.
    Quota(&'static str),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Search(status, error, retry_after) => {
                // A word of the service's own configuration: nothing to escape.
                let body = format!("{{\"error\":\"{error}\"}}");
                let mut response =
                    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
                if let Some(seconds) = retry_after {
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, seconds.into());
                }
                response
            }
            Refusal::Reports => {
                (StatusCode::SERVICE_UNAVAILABLE, "busy, try later\n").into_response()
            }
            Refusal::Quota(text) => (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, "1")],
                text,
            )
                .into_response(),
        }
    }
}

/// Marks a refusal (`429`, `503`) `Connection: close`, so the server closes its connection once
/// it is sent: what [`crate::Config::close_after_refusal`] turns on.
pub(crate) async fn close_connection(mut response: Response) -> Response {
    let status = response.status();
    if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
    }
    response
}
