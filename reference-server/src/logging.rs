//! Structured logs (F3). Each server owns its own `tracing` dispatcher, applied to every request
//! future, so several servers in one process (tests, the embedded checker) keep separate logs.

use std::fs::OpenOptions;
use std::sync::Mutex;

use tracing::Dispatch;

use crate::config::LogSink;

/// Builds the dispatcher for a sink: JSON lines with event fields at the top level.
pub fn dispatch(sink: &LogSink, plain_text: bool) -> std::io::Result<Dispatch> {
    let builder = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_target(false);
    let dispatch = match (sink, plain_text) {
        (LogSink::Stdout, false) => Dispatch::new(
            builder
                .json()
                .flatten_event(true)
                .with_writer(std::io::stdout)
                .finish(),
        ),
        (LogSink::Stdout, true) => Dispatch::new(builder.with_writer(std::io::stdout).finish()),
        (LogSink::File(path), plain) => {
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            let writer = Mutex::new(file);
            if plain {
                Dispatch::new(builder.with_writer(writer).finish())
            } else {
                Dispatch::new(
                    builder
                        .json()
                        .flatten_event(true)
                        .with_writer(writer)
                        .finish(),
                )
            }
        }
    };
    Ok(dispatch)
}
