//! One reply as the checker saw it: when it was sent and answered, its status, headers and
//! body, and the server's claims it carries (Server-Timing).

use super::*;

/// One answered request.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status answered.
    pub status: u16,
    /// Every header, as received.
    pub headers: HeaderMap,
    /// The whole body (past `MAX_REPLY_BYTES` there is no reply, only an error).
    pub body: Vec<u8>,
    /// When it was sent.
    pub sent: Instant,
    /// Send to complete response.
    pub elapsed: Duration,
    /// Server-Timing `queue` and `run` (the contract's `server_timing_metrics`), in ms; None
    /// when the header is missing or lacks either.
    pub timing: Option<(f64, f64)>,
    /// Where it breaks the OpenAPI document or the problem schema.
    pub violations: Vec<String>,
    /// The pool whose endpoint it was sent to (`None`: any other request).
    pub pool: Option<Pool>,
}

impl Reply {
    /// Header `name`'s first value, if it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON, `Null` when it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The `code` member of a problem body.
    pub fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }

    /// The value of `header`, the contract's request id header: the id to name the reply by.
    pub fn request_id(&self, header: &str) -> Option<String> {
        self.header(header).map(str::to_owned)
    }

    /// `200 OK`: the one answer a request that should work may get.
    pub fn ok(&self) -> bool {
        self.status == StatusCode::OK.as_u16()
    }

    /// When the reply was complete.
    pub fn answered(&self) -> Instant {
        self.sent + self.elapsed
    }

    /// Server-Timing `queue` and `run` in ms, or why a pipeline response that needs them
    /// cannot give them (a missing claim is a failure, never a zero).
    pub fn server_timing(&self, header: &str) -> Result<(f64, f64), TimingError> {
        self.timing.ok_or_else(|| match self.header(header) {
            None => TimingError::Missing {
                status: self.status,
                header: header.to_owned(),
            },
            Some(v) => TimingError::Incomplete {
                status: self.status,
                header: header.to_owned(),
                value: v.to_owned(),
            },
        })
    }

    /// The worker start the server claims: sent + Server-Timing `queue`.
    pub fn claimed_start(&self) -> Option<Instant> {
        self.timing
            .map(|(queue, _)| self.sent + Duration::from_secs_f64(queue.max(0.0) / 1000.0))
    }
}

/// Any 2xx: what a relayed request (whose endpoint may answer otherwise) counts as success.
pub fn is_success(status: u16) -> bool {
    StatusCode::from_u16(status).is_ok_and(|s| s.is_success())
}
