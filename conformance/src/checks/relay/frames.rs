//! Reassembling what one socket answered: frames demultiplexed by `request_id`, completion
//! order and times, protocol problems (unknown ids, frames after the final one, unparsable
//! messages), interleavings, and the body of each response. Then the verdicts every relay
//! check shares: everything answered, 2xx, no protocol problem.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use plimsoll_spec::relay::{
    RELAY_ERROR, RELAY_RESPONSE, RelayRequest, RelayResponse, TRANSFER_ENCODING,
};

use crate::checks::ctx::Ctx;
use crate::remote::{Target, is_success};
use crate::verdict::{Lane, LaneOutcome};

/// Problems quoted in a failure message; the rest are counted.
pub const MAX_QUOTED: usize = 6;

/// Why a relayed body could not be put back together.
#[derive(Debug, thiserror::Error)]
pub enum ReassemblyError {
    /// No frame answered the request.
    #[error("no frames")]
    NoFrames,
    /// The first frame says base64, and the chunks together are not.
    #[error("invalid base64: {0}")]
    Base64(base64::DecodeError),
}

/// Everything one socket answered to a set of envelopes.
#[derive(Default)]
pub struct Exchange {
    /// When sending began: nothing of this exchange can have reached the other end before.
    pub began: Option<Instant>,
    /// Ids in send order, with when they were sent.
    pub sent: Vec<(String, Instant)>,
    ids: HashSet<String>,
    /// Each id's frames in arrival order, the final one last; the body is their chunks joined.
    pub frames: HashMap<String, Vec<RelayResponse>>,
    /// When each id's first frame arrived.
    pub started: HashMap<String, Instant>,
    /// When each id's final frame arrived.
    pub done: HashMap<String, Instant>,
    /// Ids in completion order.
    pub order: Vec<String>,
    /// WebSocket text messages received, parsable or not.
    pub messages: usize,
    problems: Vec<String>,
    /// Every protocol problem found, the quoted ones and the rest.
    pub problem_count: usize,
    /// Times a frame of another request arrived while a response was mid-stream.
    pub interleavings: usize,
    last_id: Option<String>,
    /// Why the socket ended before every id was answered (closed or failed), if it did.
    pub closed: Option<String>,
}

impl Exchange {
    /// The problems quoted (at most a few; [`Exchange::problem_count`] counts them all).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Records a protocol problem: counted always, quoted while fewer than [`MAX_QUOTED`] are.
    pub fn problem(&mut self, p: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_QUOTED {
            self.problems.push(p);
        }
    }

    /// Records `requests` as sent at `at`: their ids are the ones a frame may answer.
    pub fn record_sent(&mut self, requests: &[RelayRequest], at: Instant) {
        for r in requests {
            self.ids.insert(r.request_id.clone());
            self.sent.push((r.request_id.clone(), at));
        }
    }

    /// One WebSocket text message.
    pub fn message(&mut self, text: &str, at: Instant) {
        self.messages += 1;
        let frame: RelayResponse = match serde_json::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                let shown: String = text.chars().take(60).collect();
                self.problem(format!(
                    "message {} is not a relay frame ({e}): `{shown}…`",
                    self.messages
                ));
                return;
            }
        };
        let id = frame.request_id.clone();
        if frame.kind == RELAY_ERROR {
            self.problem(format!(
                "{RELAY_ERROR} for `{id}`: code {:?}, {}",
                frame.code.as_deref().unwrap_or(""),
                frame.body_chunk
            ));
            if self.ids.contains(&id) && !self.done.contains_key(&id) {
                self.done.insert(id.clone(), at);
                self.order.push(id.clone());
                self.frames.entry(id).or_default().push(frame);
            }
            return;
        }
        if frame.kind != RELAY_RESPONSE {
            self.problem(format!(
                "frame of type `{}` (expected `{RELAY_RESPONSE}`)",
                frame.kind
            ));
            return;
        }
        if !self.ids.contains(&id) {
            self.problem(format!(
                "a response for request_id `{id}`, which was never sent"
            ));
            return;
        }
        if self.done.contains_key(&id) {
            self.problem(format!(
                "frame seq {} for `{id}` after its final frame (answered twice?)",
                frame.seq
            ));
            return;
        }
        if let Some(last) = &self.last_id
            && *last != id
            && !self.done.contains_key(last)
        {
            self.interleavings += 1;
        }
        self.last_id = Some(id.clone());
        self.started.entry(id.clone()).or_insert(at);
        if frame.r#final {
            self.done.insert(id.clone(), at);
            self.order.push(id.clone());
        }
        self.frames.entry(id).or_default().push(frame);
    }

    /// Whether every sent id has its final frame.
    pub fn complete(&self) -> bool {
        self.done.len() >= self.ids.len()
    }

    /// The sent ids still without a final frame, in send order.
    pub fn missing(&self) -> Vec<&str> {
        self.sent
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !self.done.contains_key(*id))
            .collect()
    }

    /// Each sent id's position in send order.
    pub fn send_positions(&self) -> HashMap<&str, usize> {
        self.sent
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (id.as_str(), i))
            .collect()
    }

    fn sent_at(&self, id: &str) -> Option<Instant> {
        self.sent.iter().find(|(i, _)| i == id).map(|(_, at)| *at)
    }

    /// Send to final frame.
    pub fn latency(&self, id: &str) -> Option<Duration> {
        Some(
            self.done
                .get(id)?
                .saturating_duration_since(self.sent_at(id)?),
        )
    }

    /// The latest answer among `requests` (send to final frame), if any was answered.
    pub fn slowest(&self, requests: &[RelayRequest]) -> Option<Duration> {
        requests
            .iter()
            .filter_map(|r| self.latency(&r.request_id))
            .max()
    }

    /// The first frame for `id`: the one that carries the status and headers.
    pub fn first(&self, id: &str) -> Option<&RelayResponse> {
        self.frames.get(id).and_then(|f| f.first())
    }

    /// The status `id` was answered with, from its first frame.
    pub fn status(&self, id: &str) -> Option<u16> {
        self.first(id).map(|f| f.status)
    }

    /// The reassembled body (base64 decoded when the first frame says so).
    pub fn body(&self, id: &str) -> Result<Vec<u8>, ReassemblyError> {
        let frames = self.frames.get(id).ok_or(ReassemblyError::NoFrames)?;
        let joined: String = frames.iter().map(|f| f.body_chunk.as_str()).collect();
        let base64 = frames
            .first()
            .and_then(|f| header(&f.headers, TRANSFER_ENCODING))
            .is_some_and(|v| v.eq_ignore_ascii_case(plimsoll_spec::relay::BASE64));
        if base64 {
            BASE64.decode(joined).map_err(ReassemblyError::Base64)
        } else {
            Ok(joined.into_bytes())
        }
    }

    /// The target refused the hook header: the relay checks cannot hold work.
    fn hooks_refused(&self, t: &Target) -> bool {
        let code = t.expected.hooks().disabled_code;
        self.frames.keys().any(|id| {
            self.status(id) == Some(t.status(code))
                && self
                    .body(id)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .is_some_and(|v| v["code"] == code.as_str())
        })
    }

    /// Puts every sent id on the timeline, labelled `label #i`.
    pub fn lanes(&self, c: &mut Ctx, label: &str) {
        let now = Instant::now();
        for (i, (id, sent)) in self.sent.iter().enumerate() {
            let status = self.status(id);
            let outcome = match (self.done.get(id), status) {
                (None, _) => LaneOutcome::TimedOut,
                (Some(_), Some(s)) if is_success(s) => LaneOutcome::Ok,
                _ => LaneOutcome::Failed,
            };
            c.lanes.push(Lane {
                label: format!("{label} #{i}"),
                request_id: Some(id.clone()),
                start_ms: c.ms(*sent),
                run_start_ms: None,
                end_ms: c.ms(self.done.get(id).copied().unwrap_or(now)),
                outcome,
                status,
                pool: Some(plimsoll_spec::Pool::Relay.as_str().to_owned()),
            });
        }
    }

    /// Records the protocol problems, missing answers and non-2xx statuses as failures. False
    /// (with a skip recorded) when the target refuses hooks: the check cannot go on.
    pub fn judge(&self, t: &Target, c: &mut Ctx, limit: Duration) -> bool {
        if self.hooks_refused(t) {
            c.skip(format!(
                "the target refuses {} in relayed requests (start it with {}=1): relay holds are needed",
                t.hook_header(),
                t.expected.hooks().env
            ));
            return false;
        }
        if self.problem_count > 0 {
            c.fail(format!(
                "{} protocol problem(s): {}{}",
                self.problem_count,
                self.problems.join("; "),
                if self.problem_count > self.problems.len() {
                    "; …"
                } else {
                    ""
                }
            ));
        }
        let missing = self.missing();
        if !missing.is_empty() {
            let shown: Vec<&str> = missing.iter().copied().take(MAX_QUOTED).collect();
            c.fail(unanswered(
                (missing.len(), self.sent.len()),
                limit,
                self.closed.as_deref(),
                &shown,
            ));
        }
        let bad: Vec<String> = self
            .sent
            .iter()
            .filter_map(|(id, _)| match self.status(id) {
                Some(s) if !is_success(s) => Some(format!("{id}: {s}")),
                _ => None,
            })
            .take(MAX_QUOTED)
            .collect();
        if !bad.is_empty() {
            c.fail(format!("relayed requests failed: {}", bad.join(", ")));
        }
        true
    }
}

/// A header of a frame, by case-insensitive name.
pub fn header<'a>(headers: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Requests the relay left unanswered within `limit`: `missing` of `sent`, the socket's close
/// reason if it closed, a few of their ids. One never answered is the relay's fault whichever
/// check sent it (R3: one answer per request), so the message names R3 beside this check's
/// bound.
fn unanswered(
    (missing, sent): (usize, usize),
    limit: Duration,
    closed: Option<&str>,
    shown: &[&str],
) -> String {
    format!(
        "{missing} of {sent} requests not answered within {} ms{}: {} (an envelope the bridge never answers breaks R3's one answer per request_id, whichever check sent it; one answered late, this check's bound)",
        limit.as_millis(),
        closed.map(|r| format!(" ({r})")).unwrap_or_default(),
        shown.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unanswered_envelope_names_r3_beside_the_bound() {
        let m = unanswered((1, 5), Duration::from_millis(3000), None, &["r5-3"]);
        assert!(
            m.starts_with("1 of 5 requests not answered within 3000 ms: r5-3 ("),
            "{m}"
        );
        assert!(m.contains("breaks R3's one answer per request_id"), "{m}");
    }

    fn frame(id: &str, seq: u64, fin: bool, headers: &[(&str, &str)], chunk: &str) -> String {
        serde_json::to_string(&RelayResponse {
            kind: RELAY_RESPONSE.into(),
            request_id: id.into(),
            seq,
            status: 200,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body_chunk: chunk.into(),
            r#final: fin,
            code: None,
        })
        .unwrap()
    }

    fn sent(ids: &[&str]) -> Exchange {
        let mut ex = Exchange::default();
        let requests: Vec<_> = ids
            .iter()
            .map(|id| RelayRequest {
                kind: plimsoll_spec::relay::RELAY_REQUEST.into(),
                request_id: id.to_string(),
                method: "GET".into(),
                path: "/".into(),
                headers: BTreeMap::new(),
                body: String::new(),
            })
            .collect();
        ex.record_sent(&requests, Instant::now());
        ex
    }

    #[test]
    fn the_exchange_flags_unknown_duplicate_and_broken_frames() {
        let mut ex = sent(&["a", "b"]);
        let now = Instant::now();
        ex.message(&frame("a", 0, false, &[], "x"), now);
        ex.message(&frame("b", 0, true, &[], "x"), now);
        ex.message(&frame("a", 1, true, &[], "x"), now);
        assert!(ex.complete());
        assert_eq!(ex.interleavings, 1);
        assert_eq!(ex.problem_count, 0);
        ex.message(&frame("a", 2, true, &[], "x"), now);
        ex.message(&frame("zzz", 0, true, &[], "x"), now);
        ex.message("{\"type\":\"relay-http-resp", now);
        assert_eq!(ex.problem_count, 3, "{:?}", ex.problems);
        assert_eq!(ex.order, ["b", "a"]);
        assert_eq!(ex.body("a").unwrap(), b"xx");
    }

    #[test]
    fn a_base64_body_is_decoded_across_frames_and_garbage_refused() {
        // "foobar" as the server sends it: whole quads per frame, padded at the end.
        let mut ex = sent(&["bin", "bad"]);
        let now = Instant::now();
        let b64 = [(TRANSFER_ENCODING, "base64")];
        ex.message(&frame("bin", 0, false, &b64, "Zm9v"), now);
        ex.message(&frame("bin", 1, true, &[], "YmE="), now);
        assert_eq!(ex.body("bin").unwrap(), b"fooba");
        ex.message(&frame("bad", 0, true, &b64, "Zm9v!"), now);
        assert!(ex.body("bad").is_err());
    }
}
