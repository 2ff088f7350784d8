//! What the checker keeps of every reply of a run, for the checks that judge them all (F3, F4).

use reqwest::StatusCode;

use super::Reply;

/// What F3 and F4 judge of every reply of the run, noted by [`Target::send`](super::Target::send) as
/// it arrives: F4 that each carries the request id (and an error body the same one), F3 that
/// each error has its log line.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// The status answered: F3 wants a log line for each error.
    pub status: u16,
    /// The request-id header (its first value).
    pub header_id: Option<String>,
    /// How many request ids the reply carried, as a client library may read them: every field
    /// line counts, and so does every member of a comma-joined one (RFC 9110 §5.3: a list in one
    /// line is the same field as one line per member). Exactly one, or which request it answers
    /// is ambiguous on the wire.
    pub header_ids: usize,
    /// An error body's request id, at its pointer (strings only).
    pub body_id: Option<String>,
    /// An error body's `code`.
    pub code: Option<String>,
    /// An error body's `failed_stage`.
    pub failed_stage: Option<String>,
}

/// The request ids `reply`'s `header` lines carry: one per line, and one per member of a
/// comma-joined line (a well-formed id has no comma). An empty line still counts as one.
fn ids_in(reply: &Reply, header: &str) -> usize {
    reply
        .headers
        .get_all(header)
        .iter()
        .map(|v| v.as_bytes().split(|b| *b == b',').count())
        .sum()
}

impl Seen {
    /// What F3 and F4 need of `reply`, whose request id travels in `header` and, in an error
    /// body, at the JSON Pointer `body_id` (the reference's `/request_id`; none: not read).
    pub fn of(reply: &Reply, header: &str, body_id: Option<&str>) -> Seen {
        let mut seen = Seen {
            status: reply.status,
            header_id: reply.request_id(header),
            header_ids: ids_in(reply, header),
            body_id: None,
            code: None,
            failed_stage: None,
        };
        if seen.is_error() {
            let body = reply.json();
            let member = |pointer: &str| body.pointer(pointer)?.as_str().map(str::to_owned);
            seen.body_id = body_id.and_then(member);
            seen.code = member("/code");
            seen.failed_stage = member("/failed_stage");
        }
        seen
    }

    /// A 4xx or 5xx answer.
    pub fn is_error(&self) -> bool {
        StatusCode::from_u16(self.status).is_ok_and(|s| s.is_client_error() || s.is_server_error())
    }

    /// The id to name this reply by in messages.
    pub fn label(&self) -> &str {
        self.header_id
            .as_deref()
            .or(self.body_id.as_deref())
            .unwrap_or("(no id)")
    }
}
