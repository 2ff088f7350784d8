//! The HTTP surface: routes, and the request-id and access-log middleware. Errors are answered
//! through [`crate::problem`], like the relay's.

mod disconnect;
mod endpoints;
mod info;
mod intake;
mod run;
mod timing;

use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use tracing::instrument::WithSubscriber;

use crate::logging::{Access, RequestLine};
use crate::problem::ErrorLine;
use crate::state::AppState;
use endpoints::{Digitize, Export};

/// The request's id (F4), set by the middleware before any handler runs.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The router of a server.
pub fn router(state: AppState) -> Router {
    let api = &state.config.contract.api;
    Router::new()
        .route(&api.digitize.path, post(endpoints::handle::<Digitize>))
        .route(&api.export.path, post(endpoints::handle::<Export>))
        .route(&api.relay.path, get(info::relay))
        .route(&api.contract.path, get(info::contract))
        .route(&api.metrics.path, get(info::metrics))
        .route(&api.healthz.path, get(info::healthz))
        .fallback(info::not_found)
        // Bodies are limited per endpoint by the handlers, with the contract's codes.
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// F4 and F3: assigns the request id (keeping a well-formed client one), runs the request under
/// this server's log, writes the request's one log line — the error's F3 line with the access
/// fields when the response carries an [`ErrorLine`], the access line otherwise — and stamps
/// `X-Request-Id` on the response.
// clause: F4 — every response carries X-Request-Id; a well-formed client id is kept
async fn observe(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let header = state.headers.request_id.clone();
    let f4 = &state.config.contract.clauses.f4.value;
    let id = request
        .headers()
        .get(&header)
        .and_then(|v| v.to_str().ok())
        .filter(|v| f4.accepts(v))
        .map(str::to_owned)
        .unwrap_or_else(|| state.new_request_id());
    request.extensions_mut().insert(RequestId(id.clone()));
    let header_value = HeaderValue::from_str(&id).ok();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let dispatch = state.dispatch.clone();
    let mut response = next.run(request).with_subscriber(dispatch).await;
    let error = response.extensions_mut().remove::<ErrorLine>();
    state.requests.write(&RequestLine {
        request_id: &id,
        status: response.status().as_u16(),
        error: error.as_ref().map(ErrorLine::fields),
        access: Some(Access {
            method: method.as_str(),
            path: &path,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        }),
    });
    if let Some(value) = header_value.and_then(|v| state.components().claims.request_id(v)) {
        response.headers_mut().insert(header, value);
    }
    response
}
