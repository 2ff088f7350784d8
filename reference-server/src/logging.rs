//! Structured logs (F3). Each server owns its own `tracing` dispatcher, applied to every request
//! future, so several servers in one process (tests, the embedded checker) keep separate logs.
//! The line format is a seam ([`LogFormat`]); the contract's is [`JsonLines`].

use std::fmt::Debug;
use std::fs::OpenOptions;
use std::path::PathBuf;
use std::sync::Mutex;

use tracing::Dispatch;
use tracing_subscriber::fmt::SubscriberBuilder;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// Where the structured log goes.
#[derive(Debug, Clone)]
pub enum LogSink {
    Stdout,
    /// Appended to; the conformance suite reads it with `--server-log`.
    File(PathBuf),
}

/// Builds the dispatcher that writes a server's log lines to its sink.
pub trait LogFormat: Debug + Send + Sync {
    fn dispatch(&self, sink: &LogSink) -> std::io::Result<Dispatch>;
}

/// One JSON object per line, event fields at the top level.
#[derive(Debug)]
pub struct JsonLines;

impl LogFormat for JsonLines {
    // clause: F3 — structured JSON lines
    fn dispatch(&self, sink: &LogSink) -> std::io::Result<Dispatch> {
        Ok(Dispatch::new(
            subscriber()
                .json()
                .flatten_event(true)
                .with_writer(writer(sink)?)
                .finish(),
        ))
    }
}

/// INFO and up, no colours, no target: what every format shares.
pub fn subscriber() -> SubscriberBuilder {
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_target(false)
}

/// The sink as a writer (a file is opened for appending).
pub fn writer(sink: &LogSink) -> std::io::Result<BoxMakeWriter> {
    Ok(match sink {
        LogSink::Stdout => BoxMakeWriter::new(std::io::stdout),
        LogSink::File(path) => {
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            BoxMakeWriter::new(Mutex::new(file))
        }
    })
}
