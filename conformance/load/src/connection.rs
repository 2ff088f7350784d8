//! A goose user's own HTTP/1.1 connection to the target, and the one exchange at a time it
//! carries.
//!
//! A goose user is closed-loop: it waits for an answer before its next request, so one
//! connection is all it ever needs, as each of wrk's connections. goose's own
//! `GooseUser::request` sends through a reqwest client (its pool, its request and body wrappers,
//! the URL parsed per request): `bench_loadgen` measured goose at about 0.55 of wrk's rate that
//! way, the same users on a hyper connection each at about 0.9 (docs/benchmarks.md). goose still
//! counts and reports every attempt: the runner records each with
//! `GooseUser::record_custom_request_duration`, goose's API for requests it did not send.
//!
//! The connection is dropped once idle for the run's keep-alive (before a conforming server may
//! close it) and opened again on the next request; a request the closed connection never took
//! is sent again on a new one (it was not written, so no server saw it), as a pooled client
//! would.

use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HOST, HeaderValue};
use http::{HeaderMap, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use plimsoll_conformance::remote::Trust;
use plimsoll_conformance::remote::body::with_causes;
use rustls_platform_verifier::Verifier;
use tokio::net::TcpStream;
use tower::ServiceExt;

/// A request as the runner sends it: the body is shared by every attempt.
pub type OutgoingRequest = Request<Full<Bytes>>;

/// Where every user's connection goes, and how it is opened: built once per run, cloned into
/// each user.
#[derive(Clone)]
pub struct Target {
    connector: HttpsConnector<HttpConnector>,
    /// Scheme and authority of the target (what the connector dials).
    origin: Uri,
    /// The `Host` every request carries.
    host: HeaderValue,
}

impl Target {
    /// The target at `base` (`http://` or `https://`; an `https://` target's certificate is
    /// verified as the platform does, as reqwest's client would, the authorities of `trust`
    /// added to the platform's).
    pub fn new(base: &str, trust: &Trust) -> Result<Target, String> {
        let origin: Uri = base
            .parse()
            .map_err(|e| format!("the target {base:?} is no URL: {e}"))?;
        let authority = origin
            .authority()
            .ok_or_else(|| format!("the target {base:?} names no host"))?;
        let host = HeaderValue::from_str(authority.as_str()).map_err(|e| e.to_string())?;
        let tls = rustls::ClientConfig::builder();
        let verifier = Verifier::new_with_extra_roots(
            trust.roots().iter().cloned(),
            tls.crypto_provider().clone(),
        )
        .map_err(|e| format!("no TLS configuration: {e}"))?;
        let tls = (tls.dangerous())
            .with_custom_certificate_verifier(std::sync::Arc::new(verifier))
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Target {
            connector,
            origin,
            host,
        })
    }

    /// `path` (path and query) on this target as a request's URI: origin-form, as HTTP/1.1
    /// sends it on a connection of its own.
    pub fn uri(path: &str) -> Result<Uri, String> {
        path.parse()
            .map_err(|e| format!("the request path {path:?} is no URI path: {e}"))
    }

    async fn open(&self) -> Result<Open, ExchangeError> {
        let stream = self
            .connector
            .clone()
            .oneshot(self.origin.clone())
            .await
            .map_err(|e| ExchangeError::Connect(with_causes(e.as_ref())))?;
        let (sender, io) = hyper::client::conn::http1::handshake(stream)
            .await
            .map_err(|e| ExchangeError::Connect(with_causes(&e)))?;
        Ok(Open {
            sender,
            io: Some(Box::pin(io)),
            since: Instant::now(),
        })
    }
}

/// One user's connection: at most one open, reused while it is fresh.
pub struct UserConnection {
    target: Target,
    keep_alive: Duration,
    open: Option<Open>,
}

/// A copy opens a connection of its own: one connection has one user (goose keeps a user's
/// data as `Clone`).
impl Clone for UserConnection {
    fn clone(&self) -> UserConnection {
        UserConnection::new(self.target.clone(), self.keep_alive)
    }
}

/// An open connection: what sends on it, and its I/O, which the user's own task drives while
/// an exchange is under way ([`drive`]). The connection has no task of its own: with one, every
/// request and every answer crossed between two tasks, a wake-up each way.
struct Open {
    sender: SendRequest<Full<Bytes>>,
    /// None once the connection has closed.
    io: Option<Pin<Box<Io>>>,
    /// When its last exchange ended.
    since: Instant,
}

/// A connection's I/O: hyper's HTTP/1.1 state machine over the socket (plain or TLS).
type Io = Connection<MaybeHttpsStream<TokioIo<TcpStream>>, Full<Bytes>>;

/// What one exchange got back: the answer's head and its body read whole (or why not).
pub struct Answer {
    /// The status.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body, read to its end within the cap.
    pub body: Result<Bytes, ExchangeError>,
}

/// Why an exchange has no answer, or no whole body.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The connection could not be opened (refused, unresolved, a TLS failure).
    #[error("connecting failed: {0}")]
    Connect(String),
    /// The request was not answered: the connection failed or closed first.
    #[error("no answer: {0}")]
    Send(String),
    /// The body broke off while it was read.
    #[error("reading the body failed: {0}")]
    Read(String),
    /// The body passed the cap; the rest was left unread.
    #[error(
        "the body passed {} MB, more than any reply of the contract holds; the checker stopped reading it",
        .cap >> 20
    )]
    TooLarge {
        /// The cap, bytes.
        cap: usize,
    },
    /// The exchange outlasted the time it was given (the client gave up on it).
    #[error("the client gave up after {} ms", .0.as_millis())]
    TimedOut(Duration),
}

impl ExchangeError {
    /// Whether the client gave up on the exchange (planned abandonment, or the run's timeout).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ExchangeError::TimedOut(_))
    }
}

impl UserConnection {
    /// No connection yet: the first exchange opens one.
    pub fn new(target: Target, keep_alive: Duration) -> UserConnection {
        UserConnection {
            target,
            keep_alive,
            open: None,
        }
    }

    /// Sends `request` and reads its answer whole (at most `cap` bytes of body), all within
    /// `limit`: past it the exchange is given up and its connection closed.
    pub async fn exchange(
        &mut self,
        request: OutgoingRequest,
        cap: usize,
        limit: Duration,
    ) -> Result<Answer, ExchangeError> {
        match tokio::time::timeout(limit, self.exchange_unbounded(request, cap)).await {
            Ok(answer) => answer,
            Err(_) => {
                self.open = None;
                Err(ExchangeError::TimedOut(limit))
            }
        }
    }

    async fn exchange_unbounded(
        &mut self,
        mut request: OutgoingRequest,
        cap: usize,
    ) -> Result<Answer, ExchangeError> {
        (request.headers_mut()).insert(HOST, self.target.host.clone());
        let (mut open, response) = self.send(request).await?;
        let (head, body) = response.into_parts();
        let body = drive(&mut open.io, read_capped(body, cap)).await;
        // Kept once hyper has seen the whole answer and the connection stays open.
        if body.is_ok() && drive(&mut open.io, open.sender.ready()).await.is_ok() {
            open.since = Instant::now();
            self.open = Some(open);
        }
        Ok(Answer {
            status: head.status.as_u16(),
            headers: head.headers,
            body,
        })
    }

    /// Sends on the fresh open connection, or a new one; a request the open one did not take
    /// (it had closed) goes again on a new one.
    async fn send(
        &mut self,
        request: OutgoingRequest,
    ) -> Result<(Open, hyper::Response<Incoming>), ExchangeError> {
        let request = match self.fresh() {
            Some(mut open) => {
                let sent = open.sender.try_send_request(request);
                match drive(&mut open.io, sent).await {
                    Ok(response) => return Ok((open, response)),
                    Err(mut e) => match e.take_message() {
                        Some(unsent) => unsent,
                        None => return Err(ExchangeError::Send(with_causes(&e.into_error()))),
                    },
                }
            }
            None => request,
        };
        let mut open = self.target.open().await?;
        let sent = open.sender.send_request(request);
        let response =
            (drive(&mut open.io, sent).await).map_err(|e| ExchangeError::Send(with_causes(&e)))?;
        Ok((open, response))
    }

    /// The open connection, if it is neither closed nor idle past the keep-alive.
    fn fresh(&mut self) -> Option<Open> {
        let open = self.open.take()?;
        (open.since.elapsed() < self.keep_alive && open.io.is_some() && open.sender.is_ready())
            .then_some(open)
    }
}

/// Runs `work` while driving the connection's I/O, so both make progress in the user's own
/// task; once the I/O has finished (the connection closed) it is not polled again.
async fn drive<T>(io: &mut Option<Pin<Box<Io>>>, work: impl Future<Output = T>) -> T {
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx| {
        if let Some(connection) = io.as_mut()
            && connection.as_mut().poll(cx).is_ready()
        {
            *io = None;
        }
        work.as_mut().poll(cx)
    })
    .await
}

/// The whole body, or an error once it passes `cap` bytes (nothing more is read).
async fn read_capped(mut body: Incoming, cap: usize) -> Result<Bytes, ExchangeError> {
    let mut whole = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ExchangeError::Read(with_causes(&e)))?;
        if let Ok(data) = frame.into_data() {
            if whole.len() + data.len() > cap {
                return Err(ExchangeError::TooLarge { cap });
            }
            if whole.is_empty() && body.is_end_stream() {
                // The whole body in one frame (most answers): no copy.
                return Ok(data);
            }
            whole.extend_from_slice(&data);
        }
    }
    Ok(whole.into())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

    /// What the test server does after each answer.
    #[derive(Clone, Copy)]
    enum After {
        /// Waits for the connection's next request.
        KeepOpen,
        /// Closes the connection this long after the answer, without saying so.
        CloseIn(Duration),
    }

    /// A loopback server answering every request with `reply` (`None`: never answering);
    /// its base URL and how many connections it accepted.
    async fn server(reply: Option<&'static [u8]>, after: After) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while let Ok(n @ 1..) = socket.read(&mut buf).await {
                        head.extend_from_slice(&buf[..n]);
                        if !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            continue;
                        }
                        head.clear();
                        let Some(reply) = reply else { continue };
                        socket.write_all(reply).await.unwrap();
                        if let After::CloseIn(delay) = after {
                            tokio::time::sleep(delay).await;
                            return;
                        }
                    }
                });
            }
        });
        (base, accepted)
    }

    fn get(path: &str) -> OutgoingRequest {
        Request::get(path).body(Full::default()).unwrap()
    }

    async fn exchange(user: &mut UserConnection) -> Result<Answer, ExchangeError> {
        user.exchange(get("/"), 1024, Duration::from_secs(5)).await
    }

    fn user(base: &str, keep_alive: Duration) -> UserConnection {
        UserConnection::new(Target::new(base, &Trust::default()).unwrap(), keep_alive)
    }

    #[tokio::test]
    async fn a_user_sends_its_requests_on_one_connection() {
        let (base, accepted) = server(Some(OK), After::KeepOpen).await;
        let mut user = user(&base, Duration::from_secs(10));
        for _ in 0..3 {
            let answer = exchange(&mut user).await.unwrap();
            assert_eq!(answer.status, 200);
            assert_eq!(answer.body.unwrap(), "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_request_the_closed_connection_never_took_goes_on_a_new_one() {
        // The server closes each connection 20 ms after its answer, saying nothing: the next
        // request finds it closed before it is written, and is sent again, not lost.
        let (base, accepted) = server(Some(OK), After::CloseIn(Duration::from_millis(20))).await;
        let mut user = user(&base, Duration::from_secs(10));
        for _ in 0..3 {
            assert_eq!(exchange(&mut user).await.unwrap().status, 200);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_connection_idle_past_the_keep_alive_or_closed_by_the_answer_is_not_reused() {
        let (base, accepted) = server(Some(OK), After::KeepOpen).await;
        let mut user = user(&base, Duration::from_millis(50));
        exchange(&mut user).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        exchange(&mut user).await.unwrap();
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "idle past the keep-alive"
        );

        let closing = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";
        let (base, accepted) = server(Some(closing), After::KeepOpen).await;
        let mut user = self::user(&base, Duration::from_secs(10));
        for _ in 0..2 {
            assert_eq!(exchange(&mut user).await.unwrap().status, 200);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "closed by the answer");
    }

    #[tokio::test]
    async fn an_answer_past_the_cap_is_cut_and_its_connection_dropped() {
        let big = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 2048\r\n\r\n{}",
            "x".repeat(2048)
        );
        let (base, accepted) = server(Some(big.leak().as_bytes()), After::KeepOpen).await;
        let mut user = user(&base, Duration::from_secs(10));
        for _ in 0..2 {
            let answer = exchange(&mut user).await.unwrap();
            assert!(matches!(
                answer.body,
                Err(ExchangeError::TooLarge { cap: 1024 })
            ));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_exchange_past_its_limit_is_given_up_as_a_timeout() {
        let (base, accepted) = server(None, After::KeepOpen).await;
        let mut user = user(&base, Duration::from_secs(10));
        let started = Instant::now();
        let limit = Duration::from_millis(100);
        let e = user.exchange(get("/"), 1024, limit).await.err().unwrap();
        assert!(e.is_timeout(), "{e}");
        assert!(started.elapsed() < Duration::from_secs(2));
        // Given up with its connection: the next exchange opens another.
        let _ = user.exchange(get("/"), 1024, limit).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn no_answer_and_no_server_are_errors_that_say_so() {
        let (base, _) = server(Some(b"NOT HTTP\r\n\r\n"), After::KeepOpen).await;
        let e = exchange(&mut user(&base, Duration::from_secs(1)))
            .await
            .err()
            .unwrap();
        assert!(matches!(e, ExchangeError::Send(_)), "{e}");

        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let e = exchange(&mut user(&base, Duration::from_secs(1)))
            .await
            .err()
            .unwrap();
        assert!(matches!(e, ExchangeError::Connect(_)), "{e}");
    }
}
