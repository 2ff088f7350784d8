//! JSON strings written by hand where every refusal writes them (its log line, the request id in
//! its problem body).
//!
//! serde_json escapes a string byte by byte through a table, which was a seventh of a refusal's
//! instructions (callgrind, docs/benchmarks.md). Almost every string on that path needs no
//! escape at all, so one pass that the compiler vectorizes (no early exit) asks whether any byte
//! needs one; only a string that does goes through serde_json. The output is serde_json's in
//! every case (a test compares them).

/// `s` as a JSON string, quotes included, appended to `out`.
pub(crate) fn push_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        // Writing into a Vec cannot fail, and a `str` always serializes.
        let _ = serde_json::to_writer(&mut *out, s);
        return;
    }
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Whether any byte is one JSON escapes: a control character, `"` or `\` (serde_json writes
/// everything else as it is, `DEL` and non-ASCII included).
fn needs_escape(bytes: &[u8]) -> bool {
    // A byte-wide fold with no early exit, so that it compiles to vector compares.
    let hits = bytes.iter().fold(0u8, |hits, &b| {
        hits | u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\')
    });
    hits != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serde(s: &str) -> Vec<u8> {
        serde_json::to_vec(s).unwrap()
    }

    #[test]
    fn writes_what_serde_json_writes() {
        let mut cases: Vec<String> = [
            "",
            "plain",
            "all 4 digitize workers are busy and 16 requests are queued; retry after 3 s",
            "quote \" inside",
            "back\\slash",
            "tab\tnew\nline\rcr",
            "\u{0}\u{1f} and \u{7f}",
            "naïve – 字 🧵",
            "\"",
            "\\",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every byte value that a `str` can hold alone, at the start, middle and end of a run
        // longer than a vector register.
        cases.extend((0u8..0x80).map(|b| {
            let c = char::from(b);
            format!("{c}{}{c}{}{c}", "x".repeat(40), "y".repeat(40))
        }));
        for s in cases {
            let mut out = b"prefix".to_vec();
            push_str(&mut out, &s);
            assert_eq!(out[6..], serde(&s), "for {s:?}");
        }
    }

    #[test]
    fn finds_the_one_byte_that_needs_an_escape() {
        let long = "a".repeat(100);
        assert!(!needs_escape(long.as_bytes()));
        for at in [0, 31, 32, 63, 99] {
            let mut bytes = long.clone().into_bytes();
            for b in [b'"', b'\\', b'\n', 0] {
                bytes[at] = b;
                assert!(needs_escape(&bytes), "{b} at {at}");
            }
        }
    }
}
