//! `X-Request-Id` on every answer: a client's own id when it is 1 to 64 ASCII letters, digits,
//! `.`, `_` or `-`, else one of the service's. Outermost, so refusals, bad queries and unknown
//! routes carry it too, and an error answer's line in the error log is written here, by its id.
//! A lying variant keeps whatever a client sends, or leaves the id off its error answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderName, HeaderValue};

use crate::error_log::ErrorLog;

/// The header, both ways.
pub const HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client id kept.
const MAX_LEN: usize = 64;

/// How the service treats request ids: as its contract says, or as a lying variant does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestIds {
    /// A well-formed client id is kept, any other replaced; every answer carries one.
    #[default]
    Checked,
    /// A client's id is kept whatever it is (too long, or with spaces).
    KeepsAnything,
    /// Answers of 400 and above carry no id.
    MissingOnErrors,
}

/// The ids the service hands out: a process-wide counter from a start of the clock's, so two
/// runs of the service do not repeat each other's first ids.
#[derive(Clone)]
pub(crate) struct Ids {
    next: Arc<AtomicU64>,
    kind: RequestIds,
    /// Where an error answer's line goes, with its id, if the service keeps an error log.
    log: Option<ErrorLog>,
}

impl Ids {
    pub(crate) fn new(kind: RequestIds, log: Option<ErrorLog>) -> Ids {
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Ids {
            next: Arc::new(AtomicU64::new(start)),
            kind,
            log,
        }
    }

    /// The id an answer carries: the client's when kept, else a new one.
    fn choose(&self, sent: Option<&HeaderValue>) -> HeaderValue {
        let kept = sent.filter(|v| self.kind == RequestIds::KeepsAnything || well_formed(v));
        kept.cloned().unwrap_or_else(|| {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            HeaderValue::from_str(&format!("svc-{n:x}")).expect("hex is a header value")
        })
    }
}

/// 1 to [`MAX_LEN`] letters, digits, `.`, `_` or `-`.
fn well_formed(id: &HeaderValue) -> bool {
    let id = id.as_bytes();
    (1..=MAX_LEN).contains(&id.len())
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
}

/// Stamps the answer to `request` with its id, and logs it by that id when it is an error.
pub(crate) async fn stamp(State(ids): State<Ids>, request: Request, next: Next) -> Response {
    let id = ids.choose(request.headers().get(&HEADER));
    let mut response = next.run(request).await;
    if let (Some(log), Ok(text)) = (&ids.log, id.to_str()) {
        log.write(text, response.status()).await;
    }
    let error = response.status().is_client_error() || response.status().is_server_error();
    if !(error && ids.kind == RequestIds::MissingOnErrors) {
        response.headers_mut().insert(HEADER, id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_is_kept_only_when_well_formed() {
        let ids = Ids::new(RequestIds::Checked, None);
        let kept = HeaderValue::from_static("abc.DEF_1-2");
        assert_eq!(ids.choose(Some(&kept)), kept);
        let long = HeaderValue::from_str(&"a".repeat(MAX_LEN + 1)).unwrap();
        let spaced = HeaderValue::from_static("not an id");
        for sent in [Some(&long), Some(&spaced), None] {
            let chosen = ids.choose(sent);
            assert!(well_formed(&chosen) && Some(&chosen) != sent, "{chosen:?}");
        }
        assert_ne!(ids.choose(None), ids.choose(None));
        let lazy = Ids::new(RequestIds::KeepsAnything, None);
        assert_eq!(lazy.choose(Some(&spaced)), spaced);
    }
}
