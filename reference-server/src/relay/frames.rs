//! Response frames: an HTTP response becomes one or more `relay-http-response` frames, each body
//! chunk at most R5's `max_frame_body_bytes`; a malformed envelope becomes one `relay-error`.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use plimsoll_spec::relay::{RELAY_ERROR, RELAY_RESPONSE, RelayResponse};

use base64::Engine;

use plimsoll_spec::relay::TRANSFER_ENCODING;

use super::envelope::BASE64;

/// One response turned into frames as its body arrives (R5: a bridge streams): a frame goes out
/// once more than a frame's worth is held, so a response holds about one frame in memory.
/// `seq` 0, 1, 2, …, headers on the first, `final` on the last.
///
/// Text or base64 is decided when the first frame goes: a body that ends within one frame is
/// text when it is UTF-8; a longer one is text when its content type is textual UTF-8 and base64
/// otherwise (`content-transfer-encoding: base64` on the first frame says so). A textual body
/// that turns out not to be UTF-8 after its first frame cannot change encoding: that is an
/// error ([`Framer::push`]), answered as the body's failure, never a lossy conversion.
pub(crate) struct Framer {
    request_id: String,
    status: u16,
    /// Taken by the first frame.
    headers: BTreeMap<String, String>,
    textual: bool,
    /// Bytes of `body_chunk` a frame may carry.
    max: usize,
    /// Decided with the first frame.
    base64: Option<bool>,
    pending: Vec<u8>,
    seq: u64,
}

impl Framer {
    pub(crate) fn new(
        request_id: &str,
        status: u16,
        headers: &HeaderMap,
        max_chunk_bytes: usize,
    ) -> Framer {
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
        let textual = headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(textual_utf8);
        Framer {
            request_id: request_id.to_owned(),
            status,
            headers: first_headers,
            textual,
            max: max_chunk_bytes.max(4),
            base64: None,
            pending: Vec::new(),
            seq: 0,
        }
    }

    /// Raw body bytes one frame carries: base64 turns 3 bytes into 4, in whole quads.
    fn raw_max(&self) -> usize {
        match self.base64 {
            Some(true) => self.max / 4 * 3,
            _ => self.max,
        }
    }

    /// Takes `bytes` of the body; returns the frames now complete (none of them final).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<Vec<RelayResponse>, NotUtf8> {
        self.pending.extend_from_slice(bytes);
        let mut ready = Vec::new();
        while self.pending.len() > self.raw_max() {
            let base64 = *self.base64.get_or_insert(!self.textual);
            let cut = if base64 {
                self.raw_max()
            } else {
                text_cut(&self.pending, self.max)?
            };
            let chunk: Vec<u8> = self.pending.drain(..cut).collect();
            ready.push(self.frame(&chunk, false));
        }
        Ok(ready)
    }

    /// The body has ended: the frames left, the last one final (an empty body is one empty
    /// final frame).
    pub(crate) fn finish(&mut self) -> Result<Vec<RelayResponse>, NotUtf8> {
        let base64 = *self
            .base64
            .get_or_insert(std::str::from_utf8(&self.pending).is_err());
        if !base64 && std::str::from_utf8(&self.pending).is_err() {
            return Err(NotUtf8 { at: self.seq });
        }
        let mut frames = Vec::new();
        loop {
            let cut = if base64 {
                self.raw_max().min(self.pending.len())
            } else {
                text_cut(&self.pending, self.max.min(self.pending.len()))?
            };
            let chunk: Vec<u8> = self.pending.drain(..cut).collect();
            let last = self.pending.is_empty();
            frames.push(self.frame(&chunk, last));
            if last {
                return Ok(frames);
            }
        }
    }

    /// A `relay-error` frame ending the response early (its body failed), at the next `seq`.
    pub(crate) fn error(&self, status: u16, code: &str, detail: String) -> RelayResponse {
        RelayResponse {
            seq: self.seq,
            ..error(&self.request_id, status, code, detail)
        }
    }

    fn frame(&mut self, chunk: &[u8], last: bool) -> RelayResponse {
        let base64 = self.base64 == Some(true);
        let mut headers = std::mem::take(&mut self.headers);
        if self.seq == 0 && base64 {
            headers.insert(
                TRANSFER_ENCODING.to_owned(),
                plimsoll_spec::relay::BASE64.to_owned(),
            );
        }
        let body_chunk = if base64 {
            BASE64.encode(chunk)
        } else {
            // `text_cut` and `finish` only hand over whole UTF-8.
            String::from_utf8_lossy(chunk).into_owned()
        };
        let frame = RelayResponse {
            kind: RELAY_RESPONSE.to_owned(),
            request_id: self.request_id.clone(),
            seq: self.seq,
            status: self.status,
            headers,
            body_chunk,
            r#final: last,
            code: None,
        };
        self.seq += 1;
        frame
    }
}

/// The frames of a whole body at once (a [`Framer`] fed everything), for the tests.
#[cfg(test)]
fn response(
    request_id: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    max_chunk_bytes: usize,
) -> Result<Vec<RelayResponse>, NotUtf8> {
    let mut framer = Framer::new(request_id, status, headers, max_chunk_bytes);
    let mut frames = framer.push(body)?;
    frames.extend(framer.finish()?);
    Ok(frames)
}

/// The longest prefix of `bytes`, at most `max`, that ends on a character boundary; an error
/// when the bytes are not UTF-8 (a character cut at `max` is not an error).
fn text_cut(bytes: &[u8], max: usize) -> Result<usize, NotUtf8> {
    match std::str::from_utf8(&bytes[..max]) {
        Ok(_) => Ok(max),
        Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => Ok(e.valid_up_to()),
        Err(e) => Err(NotUtf8 {
            at: e.valid_up_to() as u64,
        }),
    }
}

/// A body of a textual content type that is not UTF-8: it cannot go out as text frames, and
/// once its first frame went as text it cannot change encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the body of a textual content type is not UTF-8 (near byte {at} of a frame)")]
pub(crate) struct NotUtf8 {
    /// About where in the frame the bytes stop being UTF-8.
    pub(crate) at: u64,
}

/// Whether a content type is text the frames can carry as it is: `text/*`, JSON, XML or
/// JavaScript, in UTF-8 (or with no charset named).
fn textual_utf8(content_type: &str) -> bool {
    let mut parts = content_type.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let utf8 = parts.all(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        !k.trim().eq_ignore_ascii_case("charset")
            || v.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
    });
    let textual = essence.starts_with("text/")
        || matches!(
            essence.as_str(),
            "application/json" | "application/xml" | "application/javascript"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml");
    textual && utf8
}

/// The one frame answering a message that is not a request envelope.
pub(crate) fn error(request_id: &str, status: u16, code: &str, detail: String) -> RelayResponse {
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
        let frames = response("r", 200, &headers(), b"ok\n", 16).unwrap();
        assert_eq!(frames.len(), 1);
        let f = &frames[0];
        assert_eq!((f.seq, f.r#final, f.body_chunk.as_str()), (0, true, "ok\n"));
        assert_eq!(f.headers["vary"], "a, b");
        assert_eq!(
            response("r", 204, &HeaderMap::new(), b"", 16)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_long_body_is_split_at_char_boundaries_with_gapless_seq() {
        let body = "é".repeat(20); // 40 bytes of 2-byte chars
        let frames = response("r", 200, &headers(), body.as_bytes(), 7).unwrap();
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
        let frames = response("r", 200, &HeaderMap::new(), &body, 30).unwrap();
        assert_eq!(frames[0].headers[TRANSFER_ENCODING], "base64");
        assert!(frames.iter().all(|f| f.body_chunk.len() <= 28));
        let joined: String = frames.iter().map(|f| f.body_chunk.as_str()).collect();
        assert_eq!(BASE64.decode(&joined).unwrap(), body);
        assert_eq!(BASE64.decode(&frames[0].body_chunk).unwrap(), body[..21]);
    }

    #[test]
    fn a_streamed_body_goes_out_frame_by_frame_as_it_arrives() {
        let mut framer = Framer::new("r", 200, &headers(), 8);
        // Nothing goes before more than a frame's worth is held (the end may still come).
        assert!(framer.push(b"abcd").unwrap().is_empty());
        assert!(framer.push(b"efgh").unwrap().is_empty());
        let first = framer.push(b"i").unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].seq, first[0].r#final), (0, false));
        assert_eq!(first[0].body_chunk, "abcdefgh");
        assert_eq!(first[0].headers["content-type"], "text/plain");
        let rest = framer.finish().unwrap();
        assert_eq!(rest.len(), 1);
        assert_eq!(
            (rest[0].seq, rest[0].r#final, rest[0].body_chunk.as_str()),
            (1, true, "i")
        );
        assert!(rest[0].headers.is_empty());
    }

    #[test]
    fn a_long_binary_stream_is_base64_from_its_first_frame() {
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            HeaderValue::from_static("application/octet-stream"),
        );
        let body: Vec<u8> = (0..=255u8).cycle().take(100).collect();
        let mut framer = Framer::new("r", 200, &h, 16);
        let mut frames = framer.push(&body[..50]).unwrap();
        frames.extend(framer.push(&body[50..]).unwrap());
        frames.extend(framer.finish().unwrap());
        assert_eq!(frames[0].headers[TRANSFER_ENCODING], "base64");
        assert!(frames.iter().all(|f| f.body_chunk.len() <= 16));
        let joined: String = frames.iter().map(|f| f.body_chunk.as_str()).collect();
        assert_eq!(BASE64.decode(&joined).unwrap(), body);
    }

    #[test]
    fn a_textual_stream_that_is_not_utf8_is_an_error_not_a_lossy_frame() {
        let mut framer = Framer::new("r", 200, &headers(), 8);
        assert!(framer.push(b"abcdefghij").is_ok());
        let e = framer.push(&[0xff; 10]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the body of a textual content type is not UTF-8 (near byte 2 of a frame)"
        );
    }

    #[test]
    fn textual_content_types() {
        assert!(textual_utf8("application/problem+json"));
        assert!(textual_utf8("text/plain; charset=utf-8"));
        assert!(textual_utf8("image/svg+xml"));
        assert!(!textual_utf8("text/plain; charset=latin1"));
        assert!(!textual_utf8("application/octet-stream"));
    }
}
