//! Whether a service keeps a connection open after refusing a request on it, seen from outside:
//! one plain HTTP/1.1 connection (hyper's client, as B4 opens its own), the held request sent on
//! it while the pool is full, then a second request on the same connection. A client that keeps
//! its connections (every client pool does) pays a new handshake per refusal when the service
//! closes them, and one that does not expect the close sees its next request fail. `discover`
//! records what it saw; T6 judges it against a refusal's declared `connection`.

use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use plimsoll_spec::model::Recipe;
use tokio::net::TcpStream;

use super::Target;

/// How long the second request may wait for the connection to say whether it is still open:
/// a service that closes after a refusal does so as it sends it, well within this.
const READY: Duration = Duration::from_secs(1);

/// What a connection did after a refusal on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// A second request on it was answered with this status.
    Open {
        /// The second answer's status.
        second: u16,
    },
    /// It was closed: the second request could not be sent or was not answered.
    Closed,
}

/// A connection's fate after a refusal, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionSeen {
    /// Open or closed.
    pub kept: Kept,
    /// The refusal's status on that connection.
    pub refused: u16,
    /// The refusal's body (at most a reply's cap), for the refusal's declared body shape.
    pub body: Vec<u8>,
    /// Whether the refusal said `Connection: close`.
    pub said_close: bool,
    /// How long after the refusal the second request was answered or found the connection
    /// closed.
    pub after: Duration,
}

impl ConnectionSeen {
    /// The evidence, in words.
    pub fn evidence(&self) -> String {
        let said = if self.said_close {
            "with `Connection: close`"
        } else {
            "without `Connection: close`"
        };
        match self.kept {
            Kept::Open { second } => format!(
                "kept open: refused {} {said}, then a second request on the same connection was answered {second} after {:.0} ms",
                self.refused,
                ms(self.after)
            ),
            Kept::Closed => format!(
                "closed: refused {} {said}, then the same connection could not carry a second request ({:.0} ms later)",
                self.refused,
                ms(self.after)
            ),
        }
    }
}

/// Why the connection's fate was not seen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotSeen {
    /// The target is not plain HTTP (the probe speaks HTTP/1.1 on a bare socket).
    #[error("the target is not plain http://: the probe speaks HTTP/1.1 on a bare connection")]
    NotPlain,
    /// The connection could not be opened or the request not sent.
    #[error("{0}")]
    Failed(String),
    /// The request on it was not refused (a worker freed first).
    #[error("the request on it was answered {0}, not refused")]
    NotRefused(u16),
}

/// Sends `recipe` on a fresh connection to `t` (whose pool is full, so it is refused), then a
/// second request on the same connection: one request in flight at a time, each given up after
/// `limit`.
pub async fn after_refusal(
    t: &Target,
    recipe: &Recipe,
    limit: Duration,
) -> Result<ConnectionSeen, NotSeen> {
    let Open {
        mut sender,
        driver,
        host,
    } = open(t, limit).await?;
    let failed = |what: &str, e: &dyn std::fmt::Display| NotSeen::Failed(format!("{what}: {e}"));
    let first = tokio::time::timeout(limit, send(&mut sender, recipe, &host)).await;
    let (refused, said_close, body) = match first {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            driver.abort();
            return Err(failed("the first request", &e));
        }
        Err(_) => {
            driver.abort();
            return Err(NotSeen::Failed(format!(
                "the first request was not answered within {} ms",
                limit.as_millis()
            )));
        }
    };
    if refused < 400 {
        driver.abort();
        return Err(NotSeen::NotRefused(refused));
    }
    let refused_at = Instant::now();
    let kept = match tokio::time::timeout(READY, sender.ready()).await {
        Ok(Ok(())) => match tokio::time::timeout(limit, send(&mut sender, recipe, &host)).await {
            Ok(Ok((second, ..))) => Kept::Open { second },
            _ => Kept::Closed,
        },
        _ => Kept::Closed,
    };
    driver.abort();
    Ok(ConnectionSeen {
        kept,
        refused,
        body,
        said_close,
        after: refused_at.elapsed(),
    })
}

/// A plain HTTP/1.1 connection to the target, its driver running.
struct Open {
    sender: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    host: String,
}

/// Opens a connection to `t`, the connect and the handshake each given up after `limit` (a
/// target whose backlog is full never completes the handshake).
async fn open(t: &Target, limit: Duration) -> Result<Open, NotSeen> {
    let (addr, host) = t.raw_address().ok_or(NotSeen::NotPlain)?;
    let failed = |what: &str, e: &dyn std::fmt::Display| NotSeen::Failed(format!("{what}: {e}"));
    let stream = match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
        Ok(connected) => connected.map_err(|e| failed("connect", &e))?,
        Err(_) => {
            return Err(NotSeen::Failed(format!(
                "the connection was not accepted within {} ms",
                limit.as_millis()
            )));
        }
    };
    let (sender, conn) = tokio::time::timeout(limit, http1::handshake(TokioIo::new(stream)))
        .await
        .map_err(|_| NotSeen::Failed("the HTTP/1 handshake did not end".into()))?
        .map_err(|e| failed("HTTP/1 handshake", &e))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Open {
        sender,
        driver,
        host,
    })
}

/// A connection left open and idle after one answered request, as a client's connection pool
/// keeps it between requests; closed when dropped. A service whose limit counts connections
/// (`counts = "connections"`) keeps a slot taken for it; one that counts requests does not.
pub struct Idle {
    _sender: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    /// The status the request on it was answered.
    pub status: u16,
}

impl Drop for Idle {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Opens a connection to `t`, sends `recipe` on it and reads the whole answer, and keeps the
/// connection open and idle; everything given up after `limit`.
pub async fn idle(t: &Target, recipe: &Recipe, limit: Duration) -> Result<Idle, NotSeen> {
    let Open {
        mut sender,
        driver,
        host,
    } = open(t, limit).await?;
    match tokio::time::timeout(limit, send(&mut sender, recipe, &host)).await {
        Ok(Ok((status, _, _))) => Ok(Idle {
            _sender: sender,
            driver,
            status,
        }),
        Ok(Err(e)) => {
            driver.abort();
            Err(NotSeen::Failed(format!("the request on it: {e}")))
        }
        Err(_) => {
            driver.abort();
            Err(NotSeen::Failed(format!(
                "the request on it was not answered within {} ms",
                limit.as_millis()
            )))
        }
    }
}

/// Sends `recipe` on `sender`'s connection and reads the whole answer (at most a reply's cap):
/// its status, whether it said `Connection: close`, and its body. B4 asks its probe with it.
pub async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    recipe: &Recipe,
    host: &str,
) -> Result<(u16, bool, Vec<u8>), String> {
    let mut request = hyper::Request::builder()
        .method(recipe.method.as_str())
        .uri(recipe.path.as_str())
        .header(hyper::header::HOST, host);
    for (name, value) in &recipe.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let body = Full::new(Bytes::from(recipe.body()?.into_owned()));
    let request = request.body(body).map_err(|e| e.to_string())?;
    sender.ready().await.map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let said_close = response
        .headers()
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("close"));
    // Read the body to its end so the connection is idle, not mid-answer; no more of it than
    // any reply the checker reads (a target that sends gigabytes is an error, not memory).
    let body = http_body_util::Limited::new(response.into_body(), super::body::MAX_REPLY_BYTES)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, said_close, body.to_vec()))
}

/// A duration in milliseconds, as the evidence prints it.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// How a test service ends its answer to each request.
    #[derive(Clone, Copy)]
    enum Then {
        /// Keeps the connection for the next request.
        Keep,
        /// Says `Connection: close` and closes.
        SayClose,
        /// Closes without saying so.
        Close,
        /// Declares a refusal body of a gigabyte and sends zeros until the client goes away.
        Flood,
    }

    /// A loopback service answering every request `503` with an empty body, then doing `then`.
    /// Returns its URL.
    async fn refusing(then: Then) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 1024];
                    loop {
                        // Each request is a head with no body (a GET): answered at its end.
                        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                        }
                        let end = seen.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                        seen.drain(..end + 4);
                        if matches!(then, Then::Flood) {
                            let head = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1073741824\r\n\r\n";
                            let _ = stream.write_all(head.as_bytes()).await;
                            let zeros = vec![0u8; 64 * 1024];
                            while stream.write_all(&zeros).await.is_ok() {}
                            return;
                        }
                        let close = match then {
                            Then::SayClose => "Connection: close\r\n",
                            Then::Keep | Then::Close | Then::Flood => "",
                        };
                        let answer = format!(
                            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n{close}\r\n"
                        );
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                        if !matches!(then, Then::Keep) {
                            let _ = stream.shutdown().await;
                            return;
                        }
                    }
                });
            }
        });
        url
    }

    /// What discover's probe sees of a service that answers `then`.
    async fn seen(then: Then) -> Result<ConnectionSeen, NotSeen> {
        let url = refusing(then).await;
        let t = Target::new(
            url,
            plimsoll_spec::Contract::embedded().clone(),
            None,
            None,
            1,
        );
        let recipe = Recipe {
            method: "GET".into(),
            path: "/work".into(),
            headers: Default::default(),
            body: None,
            body_file: None,
            body_bytes: None,
            status: 200,
        };
        after_refusal(&t, &recipe, Duration::from_secs(5)).await
    }

    #[tokio::test]
    async fn a_connection_is_seen_kept_or_closed_after_a_refusal_whether_or_not_the_close_is_said()
    {
        let kept = seen(Then::Keep).await.unwrap();
        assert_eq!(
            (kept.kept, kept.refused, kept.said_close),
            (Kept::Open { second: 503 }, 503, false)
        );
        let said = seen(Then::SayClose).await.unwrap();
        assert_eq!((said.kept, said.said_close), (Kept::Closed, true));
        let silent = seen(Then::Close).await.unwrap();
        assert_eq!((silent.kept, silent.said_close), (Kept::Closed, false));
    }

    /// A refusal whose body never ends is read no further than any reply the checker reads:
    /// the probe fails with the reason, in bounded memory, long before the gigabyte.
    #[tokio::test]
    async fn a_refusal_body_past_the_reply_cap_fails_the_probe_not_the_memory() {
        let started = std::time::Instant::now();
        let err = seen(Then::Flood).await.unwrap_err();
        assert!(matches!(err, NotSeen::Failed(_)), "{err}");
        assert!(err.to_string().contains("length limit"), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn an_https_target_is_not_probed() {
        let t = Target::new(
            "https://127.0.0.1:1".into(),
            plimsoll_spec::Contract::embedded().clone(),
            None,
            None,
            1,
        );
        let recipe = Recipe {
            method: "GET".into(),
            path: "/".into(),
            headers: Default::default(),
            body: None,
            body_file: None,
            body_bytes: None,
            status: 200,
        };
        assert_eq!(
            after_refusal(&t, &recipe, Duration::from_secs(1)).await,
            Err(NotSeen::NotPlain)
        );
    }

    #[test]
    fn the_evidence_says_what_the_connection_did_and_what_the_refusal_said() {
        let seen = |kept, said_close| ConnectionSeen {
            kept,
            refused: 503,
            body: Vec::new(),
            said_close,
            after: Duration::from_millis(3),
        };
        assert_eq!(
            seen(Kept::Open { second: 503 }, false).evidence(),
            "kept open: refused 503 without `Connection: close`, then a second request on the same connection was answered 503 after 3 ms"
        );
        assert_eq!(
            seen(Kept::Closed, true).evidence(),
            "closed: refused 503 with `Connection: close`, then the same connection could not carry a second request (3 ms later)"
        );
    }
}
