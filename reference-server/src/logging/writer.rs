//! The writer behind a server's log: a request's line is formatted on the request's thread and
//! queued; a thread of the server's own writes the queue to the sink, so no request waits for the
//! disk (or for another request's write).
//!
//! The queue is bounded in bytes ([`LogWriter::BUFFER_BYTES`]). When the sink falls that far
//! behind:
//! - an ERROR or WARN line waits for room. F3 promises one line per error, so error lines are
//!   never dropped: the requests that fail are slowed to the sink's pace instead (backpressure);
//! - any other line (access lines of successes, lifecycle notes) is dropped and counted. The
//!   writer says how many in a WARN line of its own as soon as it catches up, and the total is
//!   on the server's last line.
//!
//! Lines reach the sink within about a millisecond: the writer thread wakes for the first line
//! after a quiet spell, and after a small batch it lets the next one gather for
//! [`LogWriter::LINGER`] — under load that is one write and no wake-up per millisecond rather
//! than per line. It flushes after every batch. [`LogWriter::flush`] waits until every line
//! queued so far is written.

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

use super::LogSink;

/// A server's log writer; clones share one queue and one writer thread, which ends (after
/// writing what is queued) when the last clone is dropped.
#[derive(Clone)]
pub struct LogWriter {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = self.handle.shared.lock();
        f.debug_struct("LogWriter")
            .field("queued_bytes", &q.buf.len())
            .field("dropped", &q.dropped)
            .finish()
    }
}

/// Closes the queue when the last [`LogWriter`] goes.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut q = self.shared.lock();
        q.closed = true;
        drop(q);
        self.shared.wake.notify_all();
    }
}

struct Shared {
    queue: Mutex<Queue>,
    capacity: usize,
    /// Wakes the writer thread (lines queued, or closed).
    wake: Condvar,
    /// Room in the queue, or lines written: what error lines and flushes wait for.
    progress: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while the lock is held; recover the data regardless.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Default)]
struct Queue {
    /// The queued lines, end to end.
    buf: Vec<u8>,
    /// How many lines `buf` holds.
    lines: u64,
    /// Lines dropped since the writer last said so.
    unreported: u64,
    /// Lines dropped, ever.
    dropped: u64,
    /// Lines queued and lines written, ever (dropped lines are neither).
    queued: u64,
    written: u64,
    /// The writer thread is waiting for lines (a new line must wake it).
    idle: bool,
    /// Threads waiting on `progress` (error lines waiting for room, flushes).
    waiting: usize,
    /// The last [`LogWriter`] is gone: write what is left, then stop.
    closed: bool,
}

impl LogWriter {
    /// How many bytes of lines may wait for the sink: a few thousand lines, a few MB at most.
    pub const BUFFER_BYTES: usize = 4 << 20;
    /// How long the writer lets lines gather after a batch smaller than [`LogWriter::BATCH_BYTES`].
    pub const LINGER: Duration = Duration::from_millis(1);
    /// A batch at least this big is followed by the next at once.
    pub const BATCH_BYTES: usize = 64 << 10;

    /// A writer for `sink` (a file is opened for appending).
    pub fn open(sink: &LogSink) -> io::Result<LogWriter> {
        let out: Box<dyn Write + Send> = match sink {
            LogSink::Stdout => Box::new(io::stdout()),
            LogSink::File(path) => {
                Box::new(OpenOptions::new().create(true).append(true).open(path)?)
            }
        };
        LogWriter::with_sink(out, LogWriter::BUFFER_BYTES)
    }

    /// A writer for any sink, with `capacity` bytes of queue.
    pub fn with_sink(sink: Box<dyn Write + Send>, capacity: usize) -> io::Result<LogWriter> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            capacity,
            wake: Condvar::new(),
            progress: Condvar::new(),
        });
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("plimsoll-log".into())
            .spawn(move || write_until_closed(&thread, BufWriter::with_capacity(64 << 10, sink)))?;
        Ok(LogWriter {
            handle: Arc::new(Handle { shared }),
        })
    }

    /// Waits (at most `timeout`) until every line queued before the call is written and
    /// flushed; false if the time ran out.
    pub fn flush(&self, timeout: Duration) -> bool {
        let shared = &self.handle.shared;
        let deadline = Instant::now() + timeout;
        let mut q = shared.lock();
        let target = q.queued;
        q.waiting += 1;
        while q.written < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = shared
                .progress
                .wait_timeout(q, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        q.waiting -= 1;
        q.written >= target
    }

    /// Lines dropped so far because the sink fell behind (never ERROR or WARN lines).
    pub fn dropped(&self) -> u64 {
        self.handle.shared.lock().dropped
    }

    /// Queues one formatted line; `keep`: wait for room rather than drop the line.
    pub fn write_line(&self, line: &[u8], keep: bool) {
        let _ = self.line(keep).write(line);
    }

    /// A writer for one line; `keep`: wait for room rather than drop the line.
    fn line(&self, keep: bool) -> LineWriter<'_> {
        LineWriter {
            shared: &self.handle.shared,
            keep,
        }
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        self.line(true)
    }

    /// ERROR and WARN lines are kept whatever the wait; the rest may be dropped.
    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter<'a> {
        self.line(*meta.level() <= Level::WARN)
    }
}

/// Queues the one formatted line `tracing` writes per event.
pub struct LineWriter<'a> {
    shared: &'a Shared,
    keep: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        let shared = self.shared;
        let mut q = shared.lock();
        // A line longer than the whole queue still goes, alone.
        let full = |q: &Queue| !q.buf.is_empty() && q.buf.len() + line.len() > shared.capacity;
        if full(&q) {
            if !self.keep {
                q.unreported += 1;
                q.dropped += 1;
                return Ok(line.len());
            }
            q.waiting += 1;
            while full(&q) && !q.closed {
                q = shared.progress.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.waiting -= 1;
        }
        q.buf.extend_from_slice(line);
        q.lines += 1;
        q.queued += 1;
        if std::mem::take(&mut q.idle) {
            drop(q);
            shared.wake.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The writer thread: takes everything queued, writes and flushes it, and again, until the last
/// [`LogWriter`] is gone and the queue is empty. A failing sink loses lines, never the server.
fn write_until_closed(shared: &Shared, mut out: impl Write) {
    // Two buffers take turns: one fills while the other is written.
    let mut spare = Vec::new();
    loop {
        let (mut batch, lines, dropped, closed, waiting) = {
            let mut q = shared.lock();
            while q.buf.is_empty() && q.unreported == 0 && !q.closed {
                q.idle = true;
                q = shared.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.idle = false;
            (
                std::mem::replace(&mut q.buf, spare),
                std::mem::take(&mut q.lines),
                std::mem::take(&mut q.unreported),
                q.closed,
                q.waiting,
            )
        };
        if waiting > 0 {
            // Room for whoever waits to queue an error line.
            shared.progress.notify_all();
        }
        let _ = out.write_all(&batch);
        if dropped > 0 {
            let _ = out.write_all(dropped_note(dropped, SystemTime::now()).as_bytes());
        }
        let _ = out.flush();
        let waiting = {
            let mut q = shared.lock();
            q.written += lines;
            q.waiting
        };
        if waiting > 0 {
            shared.progress.notify_all();
        }
        if closed && lines == 0 && dropped == 0 {
            return;
        }
        let small = batch.len() < LogWriter::BATCH_BYTES;
        // A burst's buffer is not kept: the queue's memory returns to a batch's size.
        batch.clear();
        batch.shrink_to(LogWriter::BATCH_BYTES * 2);
        spare = batch;
        if small && !closed {
            std::thread::sleep(LogWriter::LINGER);
        }
    }
}

/// The writer's own line about lines it dropped, in the JSON shape of the server's other lines.
fn dropped_note(dropped: u64, now: SystemTime) -> String {
    format!(
        "{{\"timestamp\":\"{}\",\"level\":\"WARN\",\"message\":\"log lines dropped: the log sink fell behind (error lines are never dropped)\",\"dropped_lines\":{dropped}}}\n",
        rfc3339(now)
    )
}

/// `2026-08-04T10:11:12.123456Z` (UTC, microseconds).
fn rfc3339(t: SystemTime) -> String {
    let mut out = Vec::with_capacity(27);
    super::write_rfc3339(t, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// A sink the test can stall: every write waits for the lock the test may hold.
    #[derive(Clone, Default)]
    struct Stallable(Arc<Mutex<Vec<u8>>>);

    impl Write for Stallable {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Stallable {
        fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    fn pending(w: &LogWriter) -> u64 {
        w.handle.shared.lock().lines
    }

    #[test]
    fn lines_are_written_in_order_promptly_and_flush_waits_for_them() {
        let sink = Stallable::default();
        let w = LogWriter::with_sink(Box::new(sink.clone()), 1 << 20).unwrap();
        w.line(false).write_all(b"first\n").unwrap();
        // Without a flush: the writer thread wakes for the line at once.
        let started = Instant::now();
        while sink.lines().is_empty() {
            assert!(started.elapsed() < Duration::from_secs(2), "not written");
            std::thread::sleep(Duration::from_millis(1));
        }
        for i in 0..1000 {
            w.line(i % 2 == 0)
                .write_all(format!("{i}\n").as_bytes())
                .unwrap();
        }
        assert!(w.flush(Duration::from_secs(5)));
        let expected: Vec<String> = std::iter::once("first".to_owned())
            .chain((0..1000).map(|i| i.to_string()))
            .collect();
        assert_eq!(sink.lines(), expected);
        assert_eq!(w.dropped(), 0);
    }

    #[test]
    fn when_the_sink_falls_behind_other_lines_drop_and_error_lines_wait() {
        let sink = Stallable::default();
        // Room for one line at a time.
        let w = LogWriter::with_sink(Box::new(sink.clone()), 1).unwrap();
        let stalled = sink.0.lock().unwrap();
        w.line(false).write_all(b"a\n").unwrap();
        // The writer took "a" and is stuck writing it.
        while pending(&w) > 0 {
            std::thread::yield_now();
        }
        w.line(false).write_all(b"b\n").unwrap();
        w.line(false).write_all(b"c\n").unwrap();
        w.line(false).write_all(b"d\n").unwrap();
        assert_eq!(w.dropped(), 2, "c and d: the queue holds b");
        let error = std::thread::spawn({
            let w = w.clone();
            move || w.line(true).write_all(b"error\n").unwrap()
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!error.is_finished(), "an error line waits for room");
        drop(stalled);
        error.join().unwrap();
        assert!(w.flush(Duration::from_secs(5)));
        let lines = sink.lines();
        assert_eq!(&lines[..2], ["a", "b"]);
        assert!(lines.contains(&"error".to_owned()), "{lines:?}");
        let note: serde_json::Value =
            serde_json::from_str(lines.iter().find(|l| l.contains("dropped_lines")).unwrap())
                .unwrap();
        assert_eq!(
            (note["level"].as_str(), note["dropped_lines"].as_u64()),
            (Some("WARN"), Some(2))
        );
        assert_eq!(lines.len(), 4, "{lines:?}");
    }

    #[test]
    fn error_and_warn_events_are_kept_info_events_may_drop() {
        use crate::logging::{JsonLines, LogFormat};
        let sink = Stallable::default();
        let w = LogWriter::with_sink(Box::new(sink.clone()), 1).unwrap();
        let dispatch = JsonLines.dispatch(w.clone());
        let stalled = sink.0.lock().unwrap();
        tracing::dispatcher::with_default(&dispatch, || tracing::info!("a"));
        while pending(&w) > 0 {
            std::thread::yield_now();
        }
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::info!("b");
            tracing::info!("dropped");
        });
        assert_eq!(w.dropped(), 1);
        let kept = std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                tracing::warn!("w");
                tracing::error!("e");
            });
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!kept.is_finished(), "a warning waits for room");
        drop(stalled);
        kept.join().unwrap();
        assert!(w.flush(Duration::from_secs(5)));
        let messages: Vec<String> = sink
            .lines()
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["message"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .filter(|m| !m.starts_with("log lines dropped"))
            .collect();
        assert_eq!(messages, ["a", "b", "w", "e"]);
    }

    #[test]
    fn the_last_clone_dropped_ends_the_thread_after_writing_what_is_queued() {
        let sink = Stallable::default();
        let w = LogWriter::with_sink(Box::new(sink.clone()), 1 << 20).unwrap();
        let shared = w.handle.shared.clone();
        let stalled = sink.0.lock().unwrap();
        for i in 0..10 {
            w.clone()
                .line(true)
                .write_all(format!("{i}\n").as_bytes())
                .unwrap();
        }
        drop(w);
        drop(stalled);
        let started = Instant::now();
        // The thread holds the last other reference to `shared`.
        while Arc::strong_count(&shared) > 1 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the writer thread did not end"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sink.lines().len(), 10);
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20.123456Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000000Z");
    }
}
