//! The HTTP surface: [`Api`], the service every request enters (the relay bridge's envelopes
//! too). It gives the request its id, answers the pipeline endpoints itself and every other
//! route through an axum [`Router`], and writes the request's one log line. Errors are answered
//! through [`crate::problem`], like the relay's.
//!
//! The pipeline endpoints are matched before the router rather than inside it: they carry the
//! floods (a refused request must cost as little as possible, T3), and the router's per-request
//! layers and extractors were a third of a refusal's cost (docs/benchmarks.md). The router still
//! lists them, so other methods on their paths get its 405.

mod disconnect;
mod endpoints;
mod info;
mod intake;
mod run;
mod timing;

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, Method};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{BoxError, Router};
use futures_util::future::BoxFuture;
use tower::{Service, ServiceExt};
use tracing::instrument::WithSubscriber;

use crate::logging::{Access, RequestLine};
use crate::problem::ErrorLine;
use crate::state::AppState;
use endpoints::{Digitize, Export};

/// The request's id (F4), set before any handler runs.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub String);

/// A server's HTTP API: cheap to clone (its state and router are shared).
#[derive(Clone)]
pub(crate) struct Api {
    state: AppState,
    router: Router,
}

impl Api {
    pub(crate) fn new(state: AppState) -> Api {
        Api {
            router: router(state.clone()),
            state,
        }
    }

    /// F4 and F3: assigns the request id (keeping a well-formed client one), runs the request
    /// under this server's log, writes the request's one log line — the error's F3 line with the
    /// access fields when the response carries an [`ErrorLine`], the access line otherwise — and
    /// stamps `X-Request-Id` on the response.
    // clause: F4 — every response carries X-Request-Id; a well-formed client id is kept
    async fn answer(self, mut request: Request) -> Response {
        let started = Instant::now();
        let state = &self.state;
        let header = &state.headers.request_id;
        let id = state.request_id_of(request.headers());
        let method = request.method().clone();
        let uri = request.uri().clone();
        let routed = async {
            let api = state.config.contract.api();
            if method == Method::POST {
                if uri.path() == api.digitize.path {
                    return endpoints::serve::<Digitize>(state, &id, request).await;
                }
                if uri.path() == api.export.path {
                    return endpoints::serve::<Export>(state, &id, request).await;
                }
            }
            request.extensions_mut().insert(RequestId(id.clone()));
            match self.router.clone().oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        };
        let mut response = routed.with_subscriber(state.dispatch.clone()).await;
        let error = response.extensions_mut().remove::<ErrorLine>();
        state.requests.write(&RequestLine {
            request_id: &id,
            status: response.status().as_u16(),
            error: error.as_ref().map(ErrorLine::fields),
            access: Some(Access {
                method: method.as_str(),
                path: uri.path(),
                duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            }),
        });
        // The id's own bytes become the header's, without a copy.
        let value = HeaderValue::from_maybe_shared(Bytes::from(id)).ok();
        if let Some(value) = value {
            let claims = &state.components().claims;
            claims.stamp_request_id(response.headers_mut(), header, value);
        }
        response
    }
}

impl<B> Service<axum::http::Request<B>> for Api
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let api = self.clone();
        Box::pin(async move { Ok(api.answer(request.map(Body::new)).await) })
    }
}

/// The routes besides the pipeline endpoints' POSTs, which [`Api`] answers first.
fn router(state: AppState) -> Router {
    let api = state.config.contract.api();
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
        .with_state(state)
}
