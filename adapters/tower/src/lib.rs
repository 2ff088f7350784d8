//! `plimsoll-tower`: the test hook "in a line" for any tower or axum service, so the Plimsoll
//! checker can keep one of its workers busy on purpose.
//!
//! Every timing check of the checker (a pool's limit, its queue, its refusal and hint) needs a
//! slot held for a known time. A service that adds [`HoldLayer`] inside its concurrency limit
//! honours the contract's hook header (`X-Plimsoll-Hook` in the digitize contract; the name is
//! whatever the service's contract declares): a request carrying `hold=STAGE:MS` takes its
//! permit, waits `MS` milliseconds, then runs its handler as usual.
//!
//! ```
//! use http::HeaderName;
//! use plimsoll_tower::HoldLayer;
//! use tower::ServiceBuilder;
//! # async fn handler(_: http::Request<String>) -> Result<http::Response<String>, std::convert::Infallible> {
//! #     Ok(http::Response::new(String::new()))
//! # }
//!
//! let hold = HoldLayer::from_env("PLIMSOLL_TEST_HOOKS", HeaderName::from_static("x-plimsoll-hook"))
//!     .expect("PLIMSOLL_TEST_HOOKS is 1, true, 0, false or unset");
//! let pool = ServiceBuilder::new()
//!     .concurrency_limit(4) // outside: the permit is taken first …
//!     .layer(hold) //          … and held while the hook holds
//!     .service_fn(handler);
//! # let _ = pool;
//! ```
//!
//! **Which stage a `hold` names.** The grammar is the contract's, parsed by
//! [`plimsoll_spec::hooks::parse_hooks_as`] (never by hand here), its STAGE token any
//! [`plimsoll_spec::StageName`]: the service's own name for where it holds, as its contract
//! declares it (`hold.hook.stage = "search"`). A generic service has no stages of its own, so the
//! layer honours `hold` for *every* name alike, as one hold before the handler is called:
//! `hold=search:300` and `hold=fill:300` both wait 300 ms inside the permit. Several `hold`s in one header add up (the
//! reference server holds at each stage in turn, so the job is held for their sum there too).
//!
//! **What the layer refuses.** `fail`, `panic` and `alloc` act inside a handler, which a layer
//! cannot reach: a request carrying one, or a header the grammar refuses, is answered `400` with an
//! RFC 9457 `application/problem+json` body whose `directive` member quotes the directive, and the
//! handler is not called. Passing such a request through would let a check believe a fault was
//! injected when none was.
//!
//! **Hooks off.** A layer built disabled ([`HoldLayer::enabled`], or [`HoldLayer::from_env`] with
//! the variable unset, `0` or `false`) does not even read the header: every request goes straight
//! to the inner service, so the layer can stay in a production build.
//!
//! The layer's timer is tokio's: the service runs on a tokio runtime, as axum's do.
//!
//! **A client that leaves ends its hold.** The hold is a timer inside the request's future: when
//! the client disconnects, the server drops that future, the timer with it, and the concurrency
//! limit outside gets its permit back at once.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

mod future;
mod header;
mod refusal;

use std::task::{Context, Poll};

use http::{HeaderName, Request, Response};
use tower::{Layer, Service};

pub use future::ResponseFuture;
use header::hold_asked;

/// Builds [`Hold`] services: the header to read and whether hooks are on, as plain values (the
/// service's contract declares them; the layer takes the pieces, not the contract).
///
/// Place it **inside** the pool's concurrency limit (`tower::limit::ConcurrencyLimitLayer`, or a
/// middleware taking the pool's semaphore): a layer's service runs within the service outside
/// it, so the hold then happens while the request owns its permit, and the pool really has one
/// worker fewer. Inside is right for every kind of limit. Outside, it depends on the limit: tower's
/// `ConcurrencyLimit` admits in `poll_ready` and the hold keeps the service made ready, so the
/// permit is held anyway; a limit that admits in its future (an axum `from_fn` middleware
/// awaiting a semaphore) has given no permit when the layer outside it waits, and a held request
/// would hold nothing. A semaphore the handler takes itself is always inside the layer, so a
/// hold before the handler holds none of its permits: make such a limit a layer.
///
/// With axum, give a pool's routes `GlobalConcurrencyLimitLayer` (one semaphore, made when the
/// layer is): axum applies a handler's layers again for every connection unless the router was
/// given its state first (`axum::serve` calls `with_state(())` per connection), so
/// `ConcurrencyLimitLayer` on a plain router's handlers limits each *connection*, not the pool
/// (found writing `tests/hold.rs`: its one-route router calls `with_state(())` before layering,
/// which makes the handler a route, and its layers, once).
///
/// ```
/// use http::HeaderName;
/// use plimsoll_tower::HoldLayer;
/// use tower::ServiceBuilder;
/// use tower::limit::ConcurrencyLimitLayer;
/// # async fn handler(_: http::Request<String>) -> Result<http::Response<String>, std::convert::Infallible> {
/// #     Ok(http::Response::new(String::new()))
/// # }
///
/// // ServiceBuilder lists layers outside in: the limit first, the hold within it.
/// let pool = ServiceBuilder::new()
///     .layer(ConcurrencyLimitLayer::new(2))
///     .layer(HoldLayer::new(HeaderName::from_static("x-plimsoll-hook")))
///     .service_fn(handler);
/// # let _ = pool;
/// ```
#[derive(Debug, Clone)]
pub struct HoldLayer {
    header: HeaderName,
    enabled: bool,
}

/// The variable that turns hooks on held a value that is neither on nor off: refused rather than
/// read as off, so a typo does not silently disable the checks that need a hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: expected 1 or true (hooks on), 0, false or empty (off)")]
pub struct HoldEnvError {
    /// The variable's name.
    pub var: String,
    /// The value it held.
    pub value: String,
}

impl HoldLayer {
    /// A layer honouring `header`, enabled: for tests and services that decide elsewhere.
    pub fn new(header: HeaderName) -> Self {
        HoldLayer {
            header,
            enabled: true,
        }
    }

    /// The same layer, on or off: off, the header is never read.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// A layer enabled by the environment variable `var` (`1` or `true`; unset, empty, `0` or
    /// `false` leave it off), as the reference server reads its own (`PLIMSOLL_TEST_HOOKS`).
    pub fn from_env(var: &str, header: HeaderName) -> Result<Self, HoldEnvError> {
        Self::from_lookup(var, header, |name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// [`HoldLayer::from_env`] reading the variable through `lookup` (a test's own map rather
    /// than the process environment, which a test cannot change safely while threads run).
    pub fn from_lookup(
        var: &str,
        header: HeaderName,
        lookup: impl FnOnce(&str) -> Option<String>,
    ) -> Result<Self, HoldEnvError> {
        let enabled = match lookup(var) {
            None => false,
            Some(value) => match value.trim() {
                "1" | "true" => true,
                "0" | "false" | "" => false,
                _ => {
                    return Err(HoldEnvError {
                        var: var.to_owned(),
                        value,
                    });
                }
            },
        };
        Ok(HoldLayer::new(header).enabled(enabled))
    }

    /// Whether the layer honours the header (a service may log it at start).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The header the layer reads.
    pub fn header(&self) -> &HeaderName {
        &self.header
    }
}

impl<S> Layer<S> for HoldLayer {
    type Service = Hold<S>;

    fn layer(&self, inner: S) -> Hold<S> {
        Hold {
            inner,
            header: self.header.clone(),
            enabled: self.enabled,
        }
    }
}

/// The service [`HoldLayer`] wraps around `S`: holds a request that asks for it, then calls `S`.
///
/// `S` must be `Clone` because the request is handed to the service that was made ready, later,
/// after the hold (the usual tower pattern: the ready one goes with the request, a clone stays).
/// Its response body must be buildable from a `String` (axum's `Body`, `String` and
/// `http_body_util::Full<Bytes>` are) for the layer's own `400`.
#[derive(Debug, Clone)]
pub struct Hold<S> {
    inner: S,
    header: HeaderName,
    enabled: bool,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Hold<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: From<String>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S, Request<ReqBody>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        if !self.enabled {
            return ResponseFuture::calling(self.inner.call(request));
        }
        match hold_asked(request.headers(), &self.header) {
            Ok(None) => ResponseFuture::calling(self.inner.call(request)),
            Ok(Some(hold)) => {
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::holding(hold, ready, request)
            }
            Err(refusal) => ResponseFuture::refused(refusal.response(&self.header)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> HeaderName {
        HeaderName::from_static("x-hook")
    }

    #[test]
    fn the_environment_turns_hooks_on_or_is_refused() {
        let layer = |value: Option<&str>| {
            HoldLayer::from_lookup("HOOKS", header(), |_| value.map(str::to_owned))
        };
        for on in ["1", "true", " 1 "] {
            assert!(layer(Some(on)).unwrap().is_enabled(), "{on}");
        }
        for off in [None, Some(""), Some("0"), Some("false")] {
            assert!(!layer(off).unwrap().is_enabled(), "{off:?}");
        }
        assert_eq!(
            layer(Some("yes please")).unwrap_err(),
            HoldEnvError {
                var: "HOOKS".into(),
                value: "yes please".into()
            }
        );
    }
}
