//! Structured logs (F3). A request's one line is formatted from its fields ([`RequestLine`]);
//! the server's other lines go through its own `tracing` dispatcher, applied to every request
//! future, so several servers in one process (tests, the embedded checker) keep separate logs.
//! The format is a seam ([`LogFormat`]); the contract's is [`JsonLines`]. Lines are formatted on
//! the request's thread and written by the server's own writer thread ([`LogWriter`]), so no
//! request waits for the disk.

mod line;
mod writer;

use std::cell::RefCell;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use tracing::Dispatch;
use tracing_subscriber::fmt::SubscriberBuilder;

pub use line::{Access, ErrorFields, RequestLine, push_padded, write_rfc3339};
pub use writer::LogWriter;

/// Where the structured log goes.
#[derive(Debug, Clone)]
pub enum LogSink {
    /// The process's standard output, where a container's log collector reads it (the default).
    Stdout,
    /// Appended to; the conformance suite reads it with `--server-log`.
    File(PathBuf),
}

/// How a server's lines look.
pub trait LogFormat: Debug + Send + Sync {
    /// The dispatcher that formats the server's other lines and hands them to its writer.
    fn dispatch(&self, writer: LogWriter) -> Dispatch;
    /// Appends a request's one line, newline included, to `out`.
    fn request_line(&self, line: &RequestLine<'_>, now: SystemTime, out: &mut Vec<u8>);
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

    fn request_line(&self, line: &RequestLine<'_>, now: SystemTime, out: &mut Vec<u8>) {
        line.write_json(now, out);
    }
}

/// Where requests' lines go: the server's format and its writer.
#[derive(Debug, Clone)]
pub struct RequestLog {
    format: Arc<dyn LogFormat>,
    writer: LogWriter,
}

impl RequestLog {
    /// Lines in `format`, to `writer`: the writer of the server's other lines too, so one sink
    /// holds them all.
    pub fn new(format: Arc<dyn LogFormat>, writer: LogWriter) -> RequestLog {
        RequestLog { format, writer }
    }

    /// Formats `line` and queues it: an error's line waits for room in the queue, an access
    /// line may be dropped (and counted) when the sink falls behind.
    pub fn write(&self, line: &RequestLine<'_>) {
        thread_local! {
            /// Each thread formats its lines in one buffer, reused: no allocation per line.
            static LINE: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(512));
        }
        LINE.with_borrow_mut(|out| {
            out.clear();
            self.format.request_line(line, SystemTime::now(), out);
            self.writer.write_line(out, line.error.is_some());
            // A line with a long backtrace (LOG_STACK=1) does not keep its buffer's size.
            out.shrink_to(64 * 1024);
        });
    }
}

/// INFO and up, no colours, no target: what every format shares.
pub fn subscriber() -> SubscriberBuilder {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_target(false)
}
