//! Response frames: an HTTP response becomes one or more `relay-http-response` frames, each body
//! chunk at most R5's `max_frame_body_bytes`; a malformed envelope becomes one `relay-error`.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use plimsoll_spec::relay::{RELAY_ERROR, RELAY_RESPONSE, RelayResponse};

use base64::Engine;

use super::envelope::{BASE64, TRANSFER_ENCODING};

/// The frames of one response, in order: `seq` 0, 1, 2, …, headers on the first, `final` on the
/// last. A body that is not UTF-8 is sent as base64 and says so in `content-transfer-encoding`.
pub fn response(
    request_id: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    max_chunk_bytes: usize,
) -> Vec<RelayResponse> {
    let mut first_headers = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        first_headers
            .entry(name.as_str().to_owned())
            .and_modify(|v: &mut String| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let chunks = match std::str::from_utf8(body) {
        Ok(text) => split_text(text, max_chunk_bytes.max(4)),
        Err(_) => {
            first_headers.insert(TRANSFER_ENCODING.to_owned(), "base64".to_owned());
            // Whole quads per chunk: every chunk decodes on its own, and so does their join.
            split_text(&BASE64.encode(body), (max_chunk_bytes / 4 * 4).max(4))
        }
    };
    let last = chunks.len() - 1;
    chunks
        .into_iter()
        .enumerate()
        .map(|(seq, body_chunk)| RelayResponse {
            kind: RELAY_RESPONSE.to_owned(),
            request_id: request_id.to_owned(),
            seq: seq as u64,
            status,
            headers: if seq == 0 {
                std::mem::take(&mut first_headers)
            } else {
                BTreeMap::new()
            },
            body_chunk,
            r#final: seq == last,
            code: None,
        })
        .collect()
}

/// The one frame answering a message that is not a request envelope.
pub fn error(request_id: &str, status: u16, code: &str, detail: String) -> RelayResponse {
    RelayResponse {
        kind: RELAY_ERROR.to_owned(),
        request_id: request_id.to_owned(),
        seq: 0,
        status,
        headers: BTreeMap::new(),
        body_chunk: detail,
        r#final: true,
        code: Some(code.to_owned()),
    }
}

/// Splits at char boundaries into pieces of at most `max` bytes (`max` ≥ 4); always at least one
/// piece, so an empty body is one empty final frame.
fn split_text(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(text.len() / max + 1);
    let mut rest = text;
    while rest.len() > max {
        let mut end = max;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (head, tail) = rest.split_at(end);
        out.push(head.to_owned());
        rest = tail;
    }
    out.push(rest.to_owned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("text/plain"));
        h.append("vary", HeaderValue::from_static("a"));
        h.append("vary", HeaderValue::from_static("b"));
        h
    }

    #[test]
    fn a_short_body_is_one_final_frame_with_headers() {
        let frames = response("r", 200, &headers(), b"ok\n", 16);
        assert_eq!(frames.len(), 1);
        let f = &frames[0];
        assert_eq!((f.seq, f.r#final, f.body_chunk.as_str()), (0, true, "ok\n"));
        assert_eq!(f.headers["vary"], "a, b");
        assert_eq!(response("r", 204, &HeaderMap::new(), b"", 16).len(), 1);
    }

    #[test]
    fn a_long_body_is_split_at_char_boundaries_with_gapless_seq() {
        let body = "é".repeat(20); // 40 bytes of 2-byte chars
        let frames = response("r", 200, &headers(), body.as_bytes(), 7);
        assert!(frames.iter().all(|f| f.body_chunk.len() <= 7));
        assert_eq!(
            frames
                .iter()
                .map(|f| f.body_chunk.as_str())
                .collect::<String>(),
            body
        );
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.seq, i as u64);
            assert_eq!(f.r#final, i == frames.len() - 1);
            assert_eq!(f.headers.is_empty(), i > 0);
        }
    }

    #[test]
    fn a_binary_body_is_base64_in_whole_quads() {
        let body: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let frames = response("r", 200, &HeaderMap::new(), &body, 30);
        assert_eq!(frames[0].headers[TRANSFER_ENCODING], "base64");
        assert!(frames.iter().all(|f| f.body_chunk.len() <= 28));
        let joined: String = frames.iter().map(|f| f.body_chunk.as_str()).collect();
        assert_eq!(BASE64.decode(&joined).unwrap(), body);
        assert_eq!(BASE64.decode(&frames[0].body_chunk).unwrap(), body[..21]);
    }
}
