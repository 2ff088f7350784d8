//! `GET /search`'s input validation, before the request takes a worker: a query `q`, when
//! given, is given once and is 1 to [`MAX_QUERY_BYTES`] bytes as sent; any other is refused
//! `400` with the JSON body `{"code":"…"}` naming [`crate::Config::invalid_query_code`]. A
//! search with no `q` at all lists everything.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

/// The longest query served, in bytes as sent (percent-escapes counted as written).
pub(crate) const MAX_QUERY_BYTES: usize = 64;

/// What the validation does: refuse a bad query with its code, or (a broken configuration)
/// serve it.
#[derive(Clone)]
pub(crate) struct Validation {
    /// Whether a bad query is refused at all.
    pub(crate) enabled: bool,
    /// The code its refusal names.
    pub(crate) code: &'static str,
}

/// Refuses a search whose query is bad, before its pool's admission; passes the rest on.
pub(crate) async fn validate(
    State(validation): State<Validation>,
    request: Request,
    next: Next,
) -> Response {
    if validation.enabled && !query_ok(request.uri().query().unwrap_or_default()) {
        let body = format!("{{\"code\":\"{}\"}}", validation.code);
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    next.run(request).await
}

/// Whether a query string's `q` is absent, or given once with 1 to [`MAX_QUERY_BYTES`] bytes.
fn query_ok(query: &str) -> bool {
    let mut values = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("q").map(|rest| (pair, rest)))
        .filter(|(_, rest)| rest.is_empty() || rest.starts_with('='))
        .map(|(_, rest)| rest.strip_prefix('=').unwrap_or_default());
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(q), None) => (1..=MAX_QUERY_BYTES).contains(&q.len()),
        (Some(_), Some(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_given_once_with_one_to_sixty_four_bytes() {
        for ok in [
            "",
            "q=a",
            "q=stitches&page=2",
            "qq=x",
            format!("q={}", "x".repeat(64)).as_str(),
        ] {
            assert!(query_ok(ok), "{ok:?}");
        }
        for bad in [
            "q=",
            "q",
            "q=a&q=b",
            "page=2&q=",
            format!("q={}", "x".repeat(65)).as_str(),
        ] {
            assert!(!query_ok(bad), "{bad:?}");
        }
    }
}
