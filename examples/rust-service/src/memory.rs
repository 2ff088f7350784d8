//! `POST /reports`' memory cap, before the request takes a worker: a report's memory is
//! estimated from the range its body asks for ([`MB_PER_DAY`] for each day: `last week` is 7
//! days, `last N days` N), and one that would need more than the cap is refused `422` with the
//! JSON body `{"code":"report_too_large"}` — the same range is refused the same way every time,
//! so the answer carries no retry hint.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

/// What a day of a report holds in memory while it is built.
pub(crate) const MB_PER_DAY: u64 = 2;

/// The cap a report's estimate is held to; none: every report is run (a broken configuration).
#[derive(Clone, Copy)]
pub(crate) struct MemoryCap(pub(crate) Option<u64>);

/// Refuses a report whose estimate exceeds the cap, before its pool's admission; passes the
/// rest on with their bodies.
pub(crate) async fn estimate(
    State(MemoryCap(cap)): State<MemoryCap>,
    request: Request,
    next: Next,
) -> Response {
    let Some(cap) = cap else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    // Read whole, within its bounds, by `body::read` before this layer.
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return (StatusCode::BAD_REQUEST, "a report's body broke off\n").into_response();
    };
    let needed = days(&bytes).saturating_mul(MB_PER_DAY);
    if needed > cap {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"code\":\"report_too_large\"}",
        )
            .into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// A report's body, as far as its memory goes.
#[derive(serde::Deserialize)]
struct Report {
    range: Option<String>,
}

/// The days a report's body asks for: `"last week"` is 7, `"last N days"` N; anything else
/// (no range, another word, a body that is no report) is one day.
fn days(body: &[u8]) -> u64 {
    let range = serde_json::from_slice::<Report>(body)
        .ok()
        .and_then(|r| r.range)
        .unwrap_or_default();
    let words: Vec<&str> = range.split_whitespace().collect();
    match words.as_slice() {
        ["last", "week"] => 7,
        ["last", n, "days"] => n.parse().unwrap_or(1),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_read_in_days() {
        assert_eq!(days(br#"{"range":"last week"}"#), 7);
        assert_eq!(days(br#"{"range": "last 1000 days"}"#), 1000);
        assert_eq!(days(br#"{"range":"last 99999999999999999999 days"}"#), 1);
        assert_eq!(days(b"{}"), 1);
        assert_eq!(days(b"\xff\xfe"), 1);
    }
}
