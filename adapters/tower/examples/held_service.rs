//! An axum service whose one pool (two routes, two workers) the Plimsoll checker can hold:
//!
//! ```text
//! PLIMSOLL_TEST_HOOKS=1 cargo run -p plimsoll-tower --example held_service
//! curl -H 'X-Plimsoll-Hook: hold=queue:2000' http://127.0.0.1:8080/v1/search   # 2 s, one worker
//! ```
//!
//! The pool's limit is `GlobalConcurrencyLimitLayer` (one semaphore for both routes: axum layers
//! each route separately, so `ConcurrencyLimitLayer` would give each route its own pool), and the
//! hold is inside it. `PORT` chooses the port (default 8080); it listens on loopback only.

use axum::Router;
use axum::routing::{get, post};
use http::HeaderName;
use plimsoll_tower::HoldLayer;
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;

/// The pool's workers, as the service's contract would declare them.
const WORKERS: usize = 2;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The header and the switch are the ones the service's contract declares under `[hooks]`.
    let hold = HoldLayer::from_env(
        "PLIMSOLL_TEST_HOOKS",
        HeaderName::from_static("x-plimsoll-hook"),
    )?;
    let app = Router::new()
        .route("/v1/search", get(|| async { "results\n" }))
        .route("/v1/index", post(|body: String| async move { body }))
        .route_layer(
            ServiceBuilder::new()
                .layer(GlobalConcurrencyLimitLayer::new(WORKERS)) // the pool's permits …
                .layer(hold), // … held here, inside them
        );
    let port = std::env::var("PORT").unwrap_or_else(|_| "8080".into());
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
