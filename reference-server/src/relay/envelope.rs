//! Parsing one text message into a request the worker can run against the server's own router.
//! Anything that is not a well-formed `relay-http-request` is [`Malformed`]: the connection
//! answers it with a `relay-error` frame and carries on.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, Uri, header};
use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use plimsoll_spec::relay::{RELAY_REQUEST, RelayRequest, TRANSFER_ENCODING};
use plimsoll_spec::{Contract, HookDirective, Stage};
use serde_json::Value;

use crate::error::ErrorKind;

/// Binary bodies travel as standard base64 (RFC 4648), padded when the server writes them.
/// Reading is lenient, as a relay client may be: padding optional, stray trailing bits tolerated
/// (and ASCII whitespace skipped, see [`decode_body`]).
pub(crate) const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes a base64 body; line breaks and other ASCII whitespace (MIME-style wrapping) are
/// ignored.
pub(crate) fn decode_body(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    let compact: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    BASE64.decode(compact)
}

/// A parsed request envelope.
pub(crate) struct Envelope {
    pub request_id: String,
    pub request: Request<Body>,
    /// The raw value of the contract's hook header, if the envelope carried one.
    pub hook: Option<String>,
}

/// Why a message is not a request envelope.
#[derive(Debug)]
pub(crate) struct Malformed {
    /// The message's `request_id` when it had a string one, else empty.
    pub request_id: String,
    pub detail: String,
}

/// Parses and validates one text message.
pub(crate) fn parse(text: &str, hook_header: &str) -> Result<Envelope, Malformed> {
    let (envelope, blame) = read_envelope(text)?;
    let (method, uri) = request_line(&envelope, &blame)?;
    let headers = Headers::copy(
        Request::builder().method(method).uri(uri),
        &envelope,
        hook_header,
        &blame,
    )?;
    let body = if headers.base64_body {
        decode_body(&envelope.body).map_err(|e| blame.bad(format!("`body` is not base64: {e}")))?
    } else {
        envelope.body.into_bytes()
    };
    let mut request = headers.request;
    if !body.is_empty() {
        request = request.header(header::CONTENT_LENGTH, body.len());
    }
    let request = request
        .body(Body::from(body))
        .map_err(|e| blame.bad(format!("the request cannot be built: {e}")))?;
    Ok(Envelope {
        request_id: envelope.request_id,
        request,
        hook: headers.hook,
    })
}

/// Whom a [`Malformed`] answer goes to: the message's `request_id` when it had a string one, so
/// the client can match the error to its request.
struct Blame {
    request_id: String,
}

impl Blame {
    /// The refusal of this message, with `detail`.
    fn bad(&self, detail: String) -> Malformed {
        Malformed {
            request_id: self.request_id.clone(),
            detail,
        }
    }
}

/// Reads the message as a `relay-http-request` envelope with a non-empty id.
fn read_envelope(text: &str) -> Result<(RelayRequest, Blame), Malformed> {
    let value: Value = serde_json::from_str(text).map_err(|e| Malformed {
        request_id: String::new(),
        detail: format!("the message is not JSON: {e}"),
    })?;
    let blame = Blame {
        request_id: value
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    };
    match value.get("type") {
        Some(Value::String(kind)) if kind == RELAY_REQUEST => {}
        other => {
            return Err(blame.bad(format!(
                "`type` must be `{RELAY_REQUEST}`, got {}",
                other.map_or_else(|| "nothing".to_owned(), Value::to_string)
            )));
        }
    }
    let envelope: RelayRequest = serde_json::from_value(value)
        .map_err(|e| blame.bad(format!("not a relay request envelope: {e}")))?;
    if envelope.request_id.is_empty() {
        return Err(blame.bad("`request_id` must not be empty".to_owned()));
    }
    Ok((envelope, blame))
}

/// The envelope's method and path, which must be an HTTP method and an origin-form path.
fn request_line(envelope: &RelayRequest, blame: &Blame) -> Result<(Method, Uri), Malformed> {
    let method = Method::from_bytes(envelope.method.as_bytes()).map_err(|_| {
        blame.bad(format!(
            "`method` `{}` is not an HTTP method",
            envelope.method
        ))
    })?;
    if !envelope.path.starts_with('/') || envelope.path.starts_with("//") {
        return Err(blame.bad(format!(
            "`path` must be a path and query starting with `/`, got `{}`",
            envelope.path
        )));
    }
    let uri: Uri = envelope.path.parse().map_err(|e| {
        blame.bad(format!(
            "`path` `{}` is not a valid path: {e}",
            envelope.path
        ))
    })?;
    Ok((method, uri))
}

/// The request with the envelope's headers, and what two of them said.
struct Headers {
    request: axum::http::request::Builder,
    /// The body is base64 (`content-transfer-encoding: base64`).
    base64_body: bool,
    /// The raw value of the contract's hook header.
    hook: Option<String>,
}

impl Headers {
    /// Copies the envelope's headers onto `request`, except the transfer encoding (the relay's,
    /// not the request's) and a content length (the relay knows the body's).
    fn copy(
        mut request: axum::http::request::Builder,
        envelope: &RelayRequest,
        hook_header: &str,
        blame: &Blame,
    ) -> Result<Self, Malformed> {
        let mut base64_body = false;
        let mut hook = None;
        for (name, raw_value) in &envelope.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| blame.bad(format!("header name `{name}` is not valid")))?;
            let value = HeaderValue::from_str(raw_value)
                .map_err(|_| blame.bad(format!("header `{name}` has an invalid value")))?;
            if name == TRANSFER_ENCODING {
                base64_body = value
                    .as_bytes()
                    .eq_ignore_ascii_case(plimsoll_spec::relay::BASE64.as_bytes());
                if !base64_body {
                    return Err(blame.bad(format!(
                        "`{TRANSFER_ENCODING}` must be `base64` when present"
                    )));
                }
                continue;
            }
            if name == header::CONTENT_LENGTH {
                // The relay knows the body's length; a stale one would only confuse the handler.
                continue;
            }
            if name.as_str().eq_ignore_ascii_case(hook_header) {
                // The envelope's own text, so a byte outside visible ASCII is refused by the
                // hook grammar, as over HTTP, rather than read as an empty header.
                hook = Some(raw_value.clone());
            }
            request = request.header(name, value);
        }
        Ok(Headers {
            request,
            base64_body,
            hook,
        })
    }
}

/// How long the relay worker itself holds the envelope (`hold=relay:MS`), or why the hook header
/// is refused — the same answers the HTTP API gives (`hooks_disabled`, `invalid_parameter`).
pub(crate) fn relay_hold(
    contract: &Contract,
    hooks_enabled: bool,
    hook: Option<&str>,
) -> Result<Duration, ErrorKind> {
    let directives = crate::hooks::authorise(contract, hooks_enabled, hook)?;
    let ms = directives
        .iter()
        .map(|d| match d {
            HookDirective::Hold {
                stage: Stage::Relay,
                ms,
            } => *ms,
            _ => 0,
        })
        .fold(0u64, u64::saturating_add);
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn malformed(text: &str) -> Malformed {
        match parse(text, "x-plimsoll-hook") {
            Ok(_) => panic!("accepted {text}"),
            Err(m) => m,
        }
    }

    #[test]
    fn parses_a_full_envelope() {
        let text = r#"{"type":"relay-http-request","request_id":"a1","method":"POST",
            "path":"/v1/export?format=svg","headers":{"content-type":"application/json",
            "X-Plimsoll-Hook":"hold=relay:5","content-length":"999"},"body":"{}"}"#;
        let e = parse(text, "x-plimsoll-hook").unwrap();
        assert_eq!(e.request_id, "a1");
        assert_eq!(e.request.method(), Method::POST);
        assert_eq!(e.request.uri(), "/v1/export?format=svg");
        assert_eq!(e.request.headers()[header::CONTENT_LENGTH], "2");
        assert_eq!(e.hook.as_deref(), Some("hold=relay:5"));
    }

    #[test]
    fn decodes_a_base64_body() {
        let text = r#"{"type":"relay-http-request","request_id":"b","method":"POST","path":"/",
            "headers":{"content-transfer-encoding":"base64"},"body":"AP8="}"#;
        let e = parse(text, "x-plimsoll-hook").unwrap();
        assert!(!e.request.headers().contains_key(TRANSFER_ENCODING));
        assert_eq!(e.request.headers()[header::CONTENT_LENGTH], "2");
    }

    #[test]
    fn base64_bodies_may_be_unpadded_or_wrapped() {
        assert_eq!(decode_body("Zm9vYg==").unwrap(), b"foob");
        assert_eq!(decode_body("Zm9vYg").unwrap(), b"foob");
        assert_eq!(decode_body("Zm9v\r\nYmFy").unwrap(), b"foobar");
        assert!(decode_body("Zm9v!").is_err());
        assert!(decode_body("Zg==Zg").is_err());
        assert!(decode_body("Z").is_err());
    }

    #[test]
    fn names_what_is_wrong_and_keeps_the_id() {
        assert_eq!(malformed("{oops").request_id, "");
        let m = malformed(r#"{"type":"nope","request_id":"r7"}"#);
        assert_eq!(m.request_id, "r7");
        assert!(m.detail.contains("type"), "{}", m.detail);
        for (text, word) in [
            (
                r#"{"type":"relay-http-request","request_id":"r","path":"/"}"#,
                "method",
            ),
            (
                r#"{"type":"relay-http-request","request_id":"","method":"GET","path":"/"}"#,
                "request_id",
            ),
            (
                r#"{"type":"relay-http-request","request_id":"r","method":"G T","path":"/"}"#,
                "method",
            ),
            (
                r#"{"type":"relay-http-request","request_id":"r","method":"GET","path":"http://x/"}"#,
                "path",
            ),
            (
                r#"{"type":"relay-http-request","request_id":"r","method":"GET","path":"/","headers":{"a b":"c"}}"#,
                "header",
            ),
            (
                r#"{"type":"relay-http-request","request_id":"r","method":"GET","path":"/","headers":{"content-transfer-encoding":"base64"},"body":"!!"}"#,
                "base64",
            ),
        ] {
            let m = malformed(text);
            assert!(m.detail.contains(word), "{text}: {}", m.detail);
        }
    }
}
