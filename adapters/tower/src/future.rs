//! The future of a request through [`crate::Hold`]: refused at once, held then called, or called
//! at once. A named type rather than a boxed one, so the layer adds no allocation and asks no
//! `Send` of the inner service.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower::Service;

pin_project! {
    /// The response future of [`crate::Hold`]. Dropping it (the client left) drops the hold's
    /// timer and the request with it: the handler is never called, and the permit of a limit
    /// outside is given back.
    pub struct ResponseFuture<S, Req>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, Req>
    where
        S: Service<Req>,
    {
        // The layer's own answer (a hook it cannot honour), taken once.
        Refused { response: Option<S::Response> },
        // Waiting out the hold with the service that was made ready and the request.
        Holding {
            #[pin]
            sleep: Sleep,
            service: Option<S>,
            request: Option<Req>,
        },
        // The inner service's own future.
        Calling {
            #[pin]
            future: S::Future,
        },
    }
}

impl<S: Service<Req>, Req> ResponseFuture<S, Req> {
    /// The inner service's future, passed through.
    pub(crate) fn calling(future: S::Future) -> Self {
        ResponseFuture {
            state: State::Calling { future },
        }
    }

    /// Waits `hold`, then calls `service` (made ready already) with `request`.
    pub(crate) fn holding(hold: Duration, service: S, request: Req) -> Self {
        ResponseFuture {
            state: State::Holding {
                sleep: tokio::time::sleep(hold),
                service: Some(service),
                request: Some(request),
            },
        }
    }

    /// Answers `response` without calling the inner service.
    pub(crate) fn refused(response: S::Response) -> Self {
        ResponseFuture {
            state: State::Refused {
                response: Some(response),
            },
        }
    }
}

impl<S: Service<Req>, Req> Future for ResponseFuture<S, Req> {
    type Output = Result<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Refused { response } => {
                    let response = response.take().expect("a future is not polled after Ready");
                    return Poll::Ready(Ok(response));
                }
                StateProj::Holding {
                    sleep,
                    service,
                    request,
                } => {
                    ready!(sleep.poll(cx));
                    let (mut service, request) = service
                        .take()
                        .zip(request.take())
                        .expect("a hold ends once");
                    let future = service.call(request);
                    state.set(State::Calling { future });
                }
                StateProj::Calling { future } => return future.poll(cx),
            }
        }
    }
}

impl<S: Service<Req>, Req> std::fmt::Debug for ResponseFuture<S, Req> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Refused { .. } => "refused",
            State::Holding { .. } => "holding",
            State::Calling { .. } => "calling",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
