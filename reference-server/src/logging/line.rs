//! A request's one log line (F3, F4), formatted straight from its fields. It is on every
//! request's path, refusals included: through `tracing`'s JSON formatter (field visitors,
//! `Debug` strings re-escaped, a thread-local dispatcher) it cost about a ninth of a refusal
//! (`ci/bench-refusals.sh` with `PERF=`, docs/benchmarks.md). `tracing` keeps the server's other
//! lines (lifecycle notes, warnings), which are rare.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::json_text;

/// What a request's line says: its id and status, the error's F3 fields if it failed, and its
/// access fields if it passed through the API (`http::Api`).
#[derive(Debug, Clone, Copy)]
pub struct RequestLine<'a> {
    /// The id the response carries too (F4), which joins the line to the answer a client saw.
    pub request_id: &'a str,
    /// The response's status code.
    pub status: u16,
    /// Present when the request failed: what makes the line an F3 error line.
    pub error: Option<ErrorFields<'a>>,
    /// Present when the request went through the API, so its line is an access line too.
    pub access: Option<Access<'a>>,
}

/// The F3 fields of a failed request.
#[derive(Debug, Clone, Copy)]
pub struct ErrorFields<'a> {
    /// The failed stage, `admission` or `request`.
    pub stage: &'a str,
    /// What went wrong, in words.
    pub error: &'a str,
    /// A backtrace when the contract's `stack` is on, empty otherwise.
    pub stack: &'a str,
    /// The problem's error code, as the response body has it.
    pub code: &'a str,
    /// The pool the request was for, once it reached one.
    pub pool: Option<&'a str>,
}

/// The access fields of a request's line.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    /// The request's method.
    pub method: &'a str,
    /// The request's path, without its query.
    pub path: &'a str,
    /// From the request's arrival to its response, in milliseconds.
    pub duration_ms: f64,
}

impl RequestLine<'_> {
    /// ERROR for a failed request, INFO otherwise.
    pub fn level(&self) -> &'static str {
        if self.error.is_some() {
            "ERROR"
        } else {
            "INFO"
        }
    }

    /// `request failed` for a failed request, `request` otherwise: what a reader filters on.
    pub fn message(&self) -> &'static str {
        if self.error.is_some() {
            "request failed"
        } else {
            "request"
        }
    }

    /// One JSON object and a newline: `timestamp`, `level`, `message`, `request_id`, `status`,
    /// then the F3 fields and the access fields that are present.
    // clause: F3 — one JSON line per error: request_id, stage, error, stack (by LOG_STACK)
    pub fn write_json(&self, now: SystemTime, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"timestamp\":\"");
        write_rfc3339(now, out);
        out.extend_from_slice(b"\",\"level\":\"");
        out.extend_from_slice(self.level().as_bytes());
        out.extend_from_slice(b"\",\"message\":\"");
        out.extend_from_slice(self.message().as_bytes());
        out.push(b'"');
        field_str(out, "request_id", self.request_id);
        field(out, "status", self.status);
        if let Some(e) = &self.error {
            field_str(out, "stage", e.stage);
            field_str(out, "error", e.error);
            field_str(out, "stack", e.stack);
            field_str(out, "code", e.code);
            if let Some(pool) = e.pool {
                field_str(out, "pool", pool);
            }
        }
        if let Some(a) = &self.access {
            field_str(out, "method", a.method);
            field_str(out, "path", a.path);
            field(out, "duration_ms", a.duration_ms);
        }
        out.extend_from_slice(b"}\n");
    }
}

/// `,"name":value`, the number written by serde_json.
fn field(out: &mut Vec<u8>, name: &str, value: impl Serialize) {
    push_name(out, name);
    // Writing into a Vec cannot fail, and these values always serialize.
    let _ = serde_json::to_writer(&mut *out, &value);
}

/// `,"name":"value"`, the string escaped as serde_json would ([`json_text::push_str`]).
fn field_str(out: &mut Vec<u8>, name: &str, value: &str) {
    push_name(out, name);
    json_text::push_str(out, value);
}

/// `,"name":`.
fn push_name(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// `2026-08-04T10:11:12.123456Z` (UTC, microseconds).
pub fn write_rfc3339(t: SystemTime, out: &mut Vec<u8>) {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    // Lines come by the thousand per second: the date and time to the second are written once
    // per second on each thread and copied after.
    LAST_SECOND.with_borrow_mut(|(second, text)| {
        if *second != Some(secs) {
            text.clear();
            write_to_the_second(secs, text);
            *second = Some(secs);
        }
        out.extend_from_slice(text);
    });
    push_padded(out, u64::from(since.subsec_micros()), 6);
    out.push(b'Z');
}

thread_local! {
    /// The second `write_rfc3339` wrote last on this thread, and its text up to the fraction.
    static LAST_SECOND: RefCell<(Option<u64>, Vec<u8>)> = const { RefCell::new((None, Vec::new())) };
}

/// `2026-08-04T10:11:12.` for `secs` seconds since the epoch.
fn write_to_the_second(secs: u64, out: &mut Vec<u8>) {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    // Digit by digit: `write!` through `core::fmt` was most of this line's formatting cost.
    for (n, width, then) in [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (rest / 3_600, 2, b':'),
        (rest / 60 % 60, 2, b':'),
        (rest % 60, 2, b'.'),
    ] {
        push_padded(out, n, width);
        out.push(then);
    }
}

/// `n` in decimal, zero-padded to `width` digits (more if it needs them).
pub fn push_padded(out: &mut Vec<u8>, n: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    let mut rest = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let start = i.min(digits.len() - width.min(digits.len()));
    out.extend_from_slice(&digits[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(line: &RequestLine<'_>) -> serde_json::Value {
        let mut out = Vec::new();
        line.write_json(
            UNIX_EPOCH + Duration::from_micros(1_764_547_200_000_123),
            &mut out,
        );
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn timestamps_in_one_second_and_the_next_are_written_whole() {
        let at = |micros| {
            let mut out = Vec::new();
            write_rfc3339(UNIX_EPOCH + Duration::from_micros(micros), &mut out);
            String::from_utf8(out).unwrap()
        };
        // The same second twice (the second from the cache), the next, a day later, and back.
        for (micros, text) in [
            (1_764_547_199_999_999, "2025-11-30T23:59:59.999999Z"),
            (1_764_547_199_000_001, "2025-11-30T23:59:59.000001Z"),
            (1_764_547_200_000_123, "2025-12-01T00:00:00.000123Z"),
            (1_764_633_600_500_000, "2025-12-02T00:00:00.500000Z"),
            (1_709_208_000_000_000, "2024-02-29T12:00:00.000000Z"),
            (1_764_547_199_999_999, "2025-11-30T23:59:59.999999Z"),
        ] {
            assert_eq!(at(micros), text);
        }
    }

    #[test]
    fn numbers_are_zero_padded_to_their_width_and_never_cut() {
        let padded = |n, width| {
            let mut out = Vec::new();
            push_padded(&mut out, n, width);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(padded(7, 2), "07");
        assert_eq!(padded(0, 6), "000000");
        assert_eq!(padded(123_456, 6), "123456");
        assert_eq!(padded(12_345, 2), "12345");
        assert_eq!(padded(u64::MAX, 4), u64::MAX.to_string());
    }

    #[test]
    fn an_error_line_has_the_f3_fields_and_the_access_fields_escaped() {
        let line = RequestLine {
            request_id: "req-\"1\"",
            status: 503,
            error: Some(ErrorFields {
                stage: "admission",
                error: "pool full\nline two",
                stack: "",
                code: "overloaded",
                pool: Some("digitize"),
            }),
            access: Some(Access {
                method: "POST",
                path: "/v1/digitize",
                duration_ms: 0.25,
            }),
        };
        assert_eq!(
            parse(&line),
            serde_json::json!({
                "timestamp": "2025-12-01T00:00:00.000123Z", "level": "ERROR",
                "message": "request failed", "request_id": "req-\"1\"", "status": 503,
                "stage": "admission", "error": "pool full\nline two", "stack": "",
                "code": "overloaded", "pool": "digitize", "method": "POST",
                "path": "/v1/digitize", "duration_ms": 0.25,
            })
        );
    }

    #[test]
    fn an_access_line_has_no_error_fields_and_an_unrouted_error_no_access_fields() {
        let ok = RequestLine {
            request_id: "a",
            status: 200,
            error: None,
            access: Some(Access {
                method: "GET",
                path: "/healthz",
                duration_ms: 1.0,
            }),
        };
        let v = parse(&ok);
        assert_eq!(
            (&v["level"], &v["message"]),
            (&"INFO".into(), &"request".into())
        );
        assert!(v.get("stage").is_none() && v.get("error").is_none());
        let unrouted = RequestLine {
            request_id: "b",
            status: 400,
            error: Some(ErrorFields {
                stage: "request",
                error: "bad hook",
                stack: "",
                code: "invalid_parameter",
                pool: None,
            }),
            access: None,
        };
        let v = parse(&unrouted);
        assert!(v.get("method").is_none() && v.get("pool").is_none());
        assert_eq!(v["stage"], "request");
    }
}
