//! `Server-Timing: queue;dur=…, run;dur=…` on every served answer of a pool: how long the
//! request waited for a worker and how long it ran with one, in milliseconds. T1 cross-checks
//! them against what the client saw; a lying variant leaves them off, or reports no wait.

use std::time::Duration;

use axum::response::Response;
use http::HeaderValue;

/// How served answers report their time: as the contract says, or as a lying variant does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerTiming {
    /// The time waited and the time run, as measured.
    #[default]
    Measured,
    /// No Server-Timing at all.
    Off,
    /// No wait, whatever the request waited.
    QueueZero,
}

impl ServerTiming {
    /// Adds the header to a served `response` that waited `queue` and ran `run`.
    pub(crate) fn stamp(self, response: &mut Response, queue: Duration, run: Duration) {
        let queue = match self {
            ServerTiming::Off => return,
            ServerTiming::QueueZero => Duration::ZERO,
            ServerTiming::Measured => queue,
        };
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let value = format!("queue;dur={:.1}, run;dur={:.1}", ms(queue), ms(run));
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert("server-timing", value);
        }
    }
}
