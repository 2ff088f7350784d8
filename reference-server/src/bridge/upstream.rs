//! The bridge's local handler when it is not this server (`--relay-upstream URL`): each
//! envelope's request is performed over HTTP against that base URL, as seed 003's bridge does
//! with `urlopen`, and the upstream's answer streams back as the response. An upstream that cannot
//! be reached is answered `502 Bad Gateway`, as any gateway answers it.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower::util::BoxCloneSyncService;

use crate::state::ApiService;

/// How long one upstream request may take: the seed's `urlopen(…, timeout=300)`.
pub(crate) const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(300);

/// The upstream at `base` (`http://host:port`, a path prefix allowed) as the bridge's API.
pub(crate) fn service(base: &str) -> Result<ApiService, reqwest::Error> {
    let client = reqwest::Client::builder()
        .timeout(UPSTREAM_TIMEOUT)
        // The bridge relays what the upstream answers, redirects included.
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let base = base.trim_end_matches('/').to_owned();
    Ok(BoxCloneSyncService::new(tower::service_fn(
        move |request: Request| {
            let client = client.clone();
            let base = base.clone();
            async move { Ok::<_, Infallible>(perform(&client, &base, request).await) }
        },
    )))
}

/// Sends `request` to the upstream and turns its answer (or its failure) into the response.
async fn perform(client: &reqwest::Client, base: &str, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{base}{path}");
    // The envelope's body, already bounded by the WebSocket message that carried it.
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(e) => return bad_gateway(&url, &e.to_string()),
    };
    let mut headers = parts.headers;
    headers.remove(header::HOST);
    let sent = client
        .request(parts.method, &url)
        .headers(headers)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(answer) => {
            let status = answer.status();
            let headers: HeaderMap = answer.headers().clone();
            let mut response = Body::from_stream(answer.bytes_stream()).into_response();
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            response
        }
        Err(e) => bad_gateway(&url, &e.to_string()),
    }
}

fn bad_gateway(url: &str, error: &str) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        format!("the bridge's local handler {url} did not answer: {error}"),
    )
        .into_response()
}
