//! Why the target, seen from outside, gave no answer the checker can use: a request with no
//! reply, a `/metrics` series that cannot be read, a wait that ran out, a reply without its
//! timing claim. The messages are what the checks print.

use super::*;
use body::BodyError;

/// Why a request to the target has no reply.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The request was not sent, or no answer came (refused, reset, timed out, not HTTP); the
    /// message has the causes.
    #[error("request failed: {}", body::with_causes(.0))]
    Send(reqwest::Error),
    /// The answer came, but its body was not read whole.
    #[error(transparent)]
    Body(#[from] BodyError),
    /// An export needs a design, and the plain digitize that makes one was not answered 200.
    #[error("a plain digitize (for a design to export) answered {status} {code}")]
    NoDesign {
        /// The status of the digitize.
        status: u16,
        /// The `code` of its problem body (empty when it has none).
        code: String,
    },
    /// The relay pool is reached over a WebSocket, not by an HTTP request.
    #[error("the relay pool takes WebSocket envelopes, not HTTP requests")]
    RelayPool,
    /// A recipe of the contract that cannot be sent as written.
    #[error("the contract's recipe cannot be sent: {0}")]
    Recipe(String),
    /// The request holds by a dependency the checker cannot play.
    #[error(transparent)]
    Dependency(#[from] super::dependency::DependencyError),
}

/// Why a `/metrics` series could not be read. A series the contract documents but the
/// exposition lacks is one of these ([`MetricError::Missing`]), never 0.
#[derive(Debug, thiserror::Error)]
pub enum MetricError {
    /// `GET /metrics` was not answered, or its body not read.
    #[error("GET {path}: {source}")]
    Get {
        /// The metrics path (or the URL, when the caller gave one).
        path: String,
        /// Why the request failed.
        source: reqwest::Error,
    },
    /// `GET /metrics` was answered with something other than success.
    #[error("GET {path} answered {status}")]
    Status {
        /// The metrics path.
        path: String,
        /// The status answered.
        status: StatusCode,
    },
    /// The exposition's body was not read whole.
    #[error("GET {path}: {source}")]
    Body {
        /// The metrics path.
        path: String,
        /// Why the body was not read.
        source: BodyError,
    },
    /// The exposition has no sample of the series.
    #[error("{path} has no {series}")]
    Missing {
        /// The metrics path.
        path: String,
        /// The series, as Prometheus writes it.
        series: String,
    },
}

/// Why a wait for the target to settle ended without it settling.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The gauge waited on could not be read.
    #[error(transparent)]
    Metric(#[from] MetricError),
    /// The gauge did not reach the value waited for within the limit.
    #[error("{series} still {last} after {} ms", .limit.as_millis())]
    Gauge {
        /// The series, as Prometheus writes it.
        series: String,
        /// Its last value read.
        last: f64,
        /// How long the wait lasted.
        limit: Duration,
    },
    /// Requests were still running at the upstream the checker plays when the limit passed.
    #[error("{in_flight} request(s) still in flight at the upstream after {} ms", .limit.as_millis())]
    InFlight {
        /// The requests in flight at the end.
        in_flight: usize,
        /// How long the wait lasted.
        limit: Duration,
    },
}

/// Why a reply that needs its Server-Timing `queue` and `run` claims cannot give them (a
/// missing claim is a failure, never a zero).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The reply has no Server-Timing header.
    #[error("a {status} reply without {header}")]
    Missing {
        /// The reply's status.
        status: u16,
        /// The contract's Server-Timing header.
        header: String,
    },
    /// The header is there, but lacks `queue` or `run` (or its value is not a duration).
    #[error("a {status} reply whose {header} `{value}` lacks queue or run")]
    Incomplete {
        /// The reply's status.
        status: u16,
        /// The contract's Server-Timing header.
        header: String,
        /// The header's value, as received.
        value: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_messages_name_the_series_and_the_limit() {
        let limit = Duration::from_millis(1500);
        let gauge = WaitError::Gauge {
            series: series(MetricName::WorkersBusy, Pool::Relay),
            last: 2.0,
            limit,
        };
        assert_eq!(
            gauge.to_string(),
            r#"plimsoll_workers_busy{pool="relay"} still 2 after 1500 ms"#
        );
        let in_flight = WaitError::InFlight {
            in_flight: 3,
            limit,
        };
        assert_eq!(
            in_flight.to_string(),
            "3 request(s) still in flight at the upstream after 1500 ms"
        );
        let missing = MetricError::Missing {
            path: "/metrics".into(),
            series: "plimsoll_temp_files".into(),
        };
        assert_eq!(missing.to_string(), "/metrics has no plimsoll_temp_files");
        assert_eq!(
            WaitError::from(missing).to_string(),
            "/metrics has no plimsoll_temp_files"
        );
        let status = MetricError::Status {
            path: "/metrics".into(),
            status: StatusCode::NOT_FOUND,
        };
        assert_eq!(status.to_string(), "GET /metrics answered 404 Not Found");
        let too_large = RequestError::from(BodyError::TooLarge { cap: 16 << 20 });
        assert_eq!(
            too_large.to_string(),
            "the body passed 16 MB, more than any reply of the contract holds; the checker stopped reading it"
        );
    }

    #[test]
    fn a_missing_timing_claim_says_what_the_reply_had() {
        let missing = TimingError::Missing {
            status: 200,
            header: "Server-Timing".into(),
        };
        assert_eq!(missing.to_string(), "a 200 reply without Server-Timing");
        let incomplete = TimingError::Incomplete {
            status: 504,
            header: "Server-Timing".into(),
            value: "queue;dur=1".into(),
        };
        assert_eq!(
            incomplete.to_string(),
            "a 504 reply whose Server-Timing `queue;dur=1` lacks queue or run"
        );
    }
}
