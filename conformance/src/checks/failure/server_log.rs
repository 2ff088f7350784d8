//! The implementation's log as F3 reads it, with bounds: each poll reads on from where the last
//! one stopped (waiting for a line costs the new bytes, not the whole file again), at most
//! [`MAX_BYTES`] in all and [`MAX_LINE`] a line, and only the error lines of the run's error
//! replies are kept (by request id). A target that writes gigabytes of log costs the checker a
//! bounded read, never its memory, and the verdict says where reading stopped.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;

use plimsoll_spec::model::LogLineFormat;
use serde_json::Value;

/// The most of the log the checker reads: far above a run's lines (a full run of the reference
/// server logs a few megabytes).
pub const MAX_BYTES: u64 = 256 << 20;
/// The longest line the checker parses; a longer one is no log line (counted as not JSON).
pub const MAX_LINE: usize = 1 << 20;

/// The log as read so far.
#[derive(Debug)]
pub struct ServerLog {
    path: PathBuf,
    format: LogLineFormat,
    /// The clause's fields: a line with the request id and another of them is an error line
    /// (an access line carries the id alone).
    fields: Vec<String>,
    /// The request ids of the run's error replies: the only lines kept.
    wanted: HashSet<String>,
    /// Bytes consumed: whole lines only, so a line being written is read whole next time.
    offset: u64,
    /// Lines read, blank ones included (a bad line is named by its number).
    lines: usize,
    /// Lines that are JSON objects.
    pub json: usize,
    /// Lines that are not, and the number of the first.
    pub bad: usize,
    /// The number of the first line that is not a JSON object.
    pub first_bad: Option<usize>,
    /// The kept error lines by request id.
    pub by_id: HashMap<String, Vec<Value>>,
    /// Whether reading stopped at [`MAX_BYTES`] with more in the file.
    pub capped: bool,
}

impl ServerLog {
    /// A log at `path` of lines in `format`, keeping the error lines (carrying one of `fields`
    /// besides the id) of the requests `wanted`.
    pub fn new(
        path: PathBuf,
        format: LogLineFormat,
        fields: &[String],
        wanted: HashSet<String>,
    ) -> ServerLog {
        ServerLog {
            path,
            format,
            fields: fields.to_vec(),
            wanted,
            offset: 0,
            lines: 0,
            json: 0,
            bad: 0,
            first_bad: None,
            by_id: HashMap::new(),
            capped: false,
        }
    }

    /// Reads the lines written since the last poll; on the `last` poll, an unterminated last
    /// line too.
    pub fn poll(&mut self, last: bool) -> io::Result<()> {
        let mut file = File::open(&self.path)?;
        let size = file.metadata()?.len();
        let budget = MAX_BYTES.saturating_sub(self.offset);
        self.capped = size > MAX_BYTES;
        if budget == 0 {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut reader = BufReader::new(file.take(budget));
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut reader)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)?;
            if n == 0 {
                return Ok(());
            }
            let ended = line.last() == Some(&b'\n');
            let overlong = !ended && line.len() > MAX_LINE;
            if !ended && !overlong && !last {
                // Still being written: read whole at the next poll.
                return Ok(());
            }
            let mut consumed = n as u64;
            if overlong {
                consumed += skip_line(&mut reader)?;
                self.not_json();
            } else {
                self.take(&line);
            }
            self.offset += consumed;
        }
    }

    /// One whole line: counted, and kept when it is an error line of a wanted request.
    fn take(&mut self, raw: &[u8]) {
        let text = String::from_utf8_lossy(raw);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            self.lines += 1;
            return;
        }
        let Some(members) = self.format.parse(text) else {
            self.not_json();
            return;
        };
        self.lines += 1;
        self.json += 1;
        let Some(id) = members.get("request_id").and_then(Value::as_str) else {
            return;
        };
        let error_line = self
            .fields
            .iter()
            .any(|f| f != "request_id" && members.contains_key(f.as_str()));
        if error_line && self.wanted.contains(id) {
            let id = id.to_owned();
            self.by_id
                .entry(id)
                .or_default()
                .push(Value::Object(members));
        }
    }

    /// A line that is no JSON object.
    fn not_json(&mut self) {
        self.lines += 1;
        self.bad += 1;
        self.first_bad.get_or_insert(self.lines);
    }
}

/// Skips the rest of an overlong line, to its newline: the bytes skipped.
fn skip_line(reader: &mut impl BufRead) -> io::Result<u64> {
    let mut skipped = 0;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(skipped);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(skipped + i as u64 + 1);
            }
            None => {
                let n = buf.len();
                reader.consume(n);
                skipped += n as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn log(file: &tempfile::NamedTempFile, wanted: &[&str]) -> ServerLog {
        let fields: Vec<String> = ["request_id", "error"].map(String::from).to_vec();
        ServerLog::new(
            file.path().to_owned(),
            LogLineFormat::Json,
            &fields,
            wanted.iter().map(|s| (*s).to_owned()).collect(),
        )
    }

    #[test]
    fn only_the_wanted_error_lines_are_kept_and_a_line_being_written_waits() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        write!(
            file,
            "{{\"request_id\":\"a\",\"error\":\"x\"}}\n{{\"request_id\":\"a\"}}\n\
             {{\"request_id\":\"b\",\"error\":\"x\"}}\nnot json\n{{\"request_id\":\"a\","
        )
        .unwrap();
        let mut seen = log(&file, &["a"]);
        seen.poll(false).unwrap();
        assert_eq!(seen.by_id["a"].len(), 1);
        assert!(!seen.by_id.contains_key("b"));
        assert_eq!((seen.json, seen.bad, seen.first_bad), (3, 1, Some(4)));
        // The unterminated line is finished by the next write, and read once.
        writeln!(file, "\"error\":\"y\"}}").unwrap();
        seen.poll(false).unwrap();
        seen.poll(false).unwrap();
        assert_eq!(seen.by_id["a"].len(), 2);
        assert_eq!(seen.json, 4);
    }

    #[test]
    fn an_overlong_line_is_skipped_as_not_json_and_the_next_is_read() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&vec![b'x'; MAX_LINE * 3]).unwrap();
        writeln!(file, "\n{{\"request_id\":\"a\",\"error\":\"x\"}}").unwrap();
        let mut seen = log(&file, &["a"]);
        seen.poll(true).unwrap();
        assert_eq!((seen.bad, seen.first_bad, seen.json), (1, Some(1), 1));
        assert_eq!(seen.by_id["a"].len(), 1);
    }
}
