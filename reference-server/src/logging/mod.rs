//! Structured logs (F3). Each server owns its own `tracing` dispatcher, applied to every request
//! future, so several servers in one process (tests, the embedded checker) keep separate logs.
//! The line format is a seam ([`LogFormat`]); the contract's is [`JsonLines`]. Lines are formatted
//! on the request's thread and written by the server's own writer thread ([`LogWriter`]), so no
//! request waits for the disk.

mod writer;

use std::fmt::Debug;
use std::path::PathBuf;

use tracing::Dispatch;
use tracing_subscriber::fmt::SubscriberBuilder;

pub use writer::LogWriter;

/// Where the structured log goes.
#[derive(Debug, Clone)]
pub enum LogSink {
    Stdout,
    /// Appended to; the conformance suite reads it with `--server-log`.
    File(PathBuf),
}

/// Builds the dispatcher that formats a server's log lines and hands them to its writer.
pub trait LogFormat: Debug + Send + Sync {
    fn dispatch(&self, writer: LogWriter) -> Dispatch;
}

/// One JSON object per line, event fields at the top level.
#[derive(Debug)]
pub struct JsonLines;

impl LogFormat for JsonLines {
    // clause: F3 — structured JSON lines
    fn dispatch(&self, writer: LogWriter) -> Dispatch {
        Dispatch::new(
            subscriber()
                .json()
                .flatten_event(true)
                .with_writer(writer)
                .finish(),
        )
    }
}

/// The access fields of a request's one log line.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    pub request_id: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub duration_ms: f64,
}

impl Access<'_> {
    /// The line of a request that ended without an error.
    pub fn write(&self) {
        tracing::info!(
            request_id = %self.request_id,
            method = %self.method,
            path = %self.path,
            status = self.status,
            duration_ms = self.duration_ms,
            "request"
        );
    }
}

/// INFO and up, no colours, no target: what every format shares.
pub fn subscriber() -> SubscriberBuilder {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_target(false)
}
