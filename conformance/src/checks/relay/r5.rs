//! R5: frame atomicity: concurrent multi-frame responses interleave whole frames only, and
//! each reassembles to exactly what plain HTTP answers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::ClauseId;

use super::client::{nonce, round};
use super::frames::Exchange;
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::Target;
use crate::remote::local::{Known, STREAM_CHUNKS, STREAM_GAP};
use crate::remote::upstream::Visit;

/// R5's entry in the check registry: the evidence the docs print, and `r5`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::R5,
    "Several responses longer than {max_frame_body_bytes} bytes at once (the contract document \
     and exports of a large design, fetched over plain HTTP first): every message parses as a \
     whole frame, per request `seq` runs from 0 without gaps with `final` on the last, headers \
     come on the first frame only, no chunk exceeds the limit, at least one response is split, \
     and each reassembled body equals the plain HTTP one. At the checker's upstream the bodies \
     come in chunks 300 ms apart, and each response's first frame must arrive \
     before the upstream has sent its last chunk: a bridge streams, it does not buffer.",
    |t, c| Box::pin(r5(t, c)),
)
.covers(&["relay-inner-request", "relay-frames"]);

/// Judges one response's frames; returns (frames, largest chunk).
fn judge_frames(c: &mut Ctx, ex: &Exchange, id: &str, kind: &Known, max: usize) -> (usize, usize) {
    let Some(frames) = ex.frames.get(id) else {
        return (0, 0);
    };
    let name = &kind.name;
    let mut largest = 0;
    for (i, f) in frames.iter().enumerate() {
        largest = largest.max(f.body_chunk.len());
        let problem = if f.seq != i as u64 {
            Some(format!("frame {i} has seq {} (gap or reorder)", f.seq))
        } else if f.r#final != (i + 1 == frames.len()) {
            Some(format!(
                "final is {} on frame {i} of {}",
                f.r#final,
                frames.len()
            ))
        } else if i > 0 && !f.headers.is_empty() {
            Some(format!(
                "headers on frame {i} (documented: first frame only)"
            ))
        } else if f.body_chunk.len() > max {
            Some(format!(
                "frame {i} carries {} bytes, over {max}",
                f.body_chunk.len()
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            c.fail(format!("{name}: {p}"));
            break;
        }
    }
    let expected = &kind.body;
    match ex.body(id) {
        Ok(body) if body == *expected => {}
        Ok(body) if name.starts_with("contract") && same_json(&body, expected) => {}
        Ok(body) => c.fail(format!(
            "{name}: reassembled body ({} bytes) differs from plain HTTP ({} bytes)",
            body.len(),
            expected.len()
        )),
        Err(e) => c.fail(format!("{name}: body does not decode: {e}")),
    }
    c.evidence.push(format!(
        "{name}: {} frame(s), {} bytes over HTTP",
        frames.len(),
        expected.len()
    ));
    (frames.len(), largest)
}

async fn r5(t: &Arc<Target>, c: &mut Ctx) {
    let max = t.expected.clauses().r5.value.max_frame_body_bytes as usize;
    c.expected = format!(
        "concurrent responses over {max} bytes: every message parses as a frame, seq gapless from 0 with final last, chunks <= {max} bytes, bodies identical to plain HTTP"
    );
    let tag = nonce();
    let (kinds, notes) = t.local.large_bodies(t, tag, max).await;
    c.evidence.extend(notes);
    if kinds.is_empty() {
        return c.fail(
            "no large response to relay: GET contract and every export failed over plain HTTP",
        );
    }
    // Binary bodies travel as base64: 4 bytes for every 3.
    let as_sent = |b: &[u8]| {
        if std::str::from_utf8(b).is_ok() {
            b.len()
        } else {
            b.len().div_ceil(3) * 4
        }
    };
    if kinds.iter().all(|k| as_sent(&k.body) <= max) {
        return c.skip(format!(
            "no response body over {max} bytes could be produced to relay"
        ));
    }
    let mut requests = Vec::new();
    let mut want: HashMap<String, Known> = HashMap::new();
    for kind in kinds {
        requests.push(kind.request.clone());
        want.insert(kind.request.request_id.clone(), kind);
    }
    let limit = Duration::from_secs(3);
    let Some((ex, _)) = round(t, c, &requests, limit, false, "large").await else {
        return;
    };
    let (mut frames_total, mut largest, mut multi) = (0, 0, 0);
    for r in &requests {
        let id = &r.request_id;
        let (frames, chunk) = judge_frames(c, &ex, id, &want[id], max);
        frames_total += frames;
        largest = largest.max(chunk);
        multi += usize::from(frames > 1);
    }
    c.require(multi > 0, || {
        format!("no response was split: none of the bodies exceeded {max} bytes as sent")
    });
    if let Some(visits) = t.local.visits_since(ex.began.unwrap_or_else(Instant::now)) {
        streams(c, &ex, &visits);
    }
    c.observed = format!(
        "{} concurrent responses in {frames_total} frames ({multi} multi-frame), {} messages, {} interleavings; largest chunk {largest} bytes (limit {max}); {} protocol problem(s)",
        requests.len(),
        ex.messages,
        ex.interleavings,
        ex.problem_count
    );
}

/// At the checker's upstream: each response's first frame arrived before the upstream sent its
/// last chunk (the bridge forwards the body as it comes instead of buffering it whole).
fn streams(c: &mut Ctx, ex: &Exchange, visits: &[Visit]) {
    let mut buffered = Vec::new();
    for (id, _) in &ex.sent {
        let last = visits
            .iter()
            .find(|v| v.id == *id)
            .and_then(|v| v.last_chunk);
        let (Some(first), Some(last)) = (ex.started.get(id), last) else {
            continue;
        };
        if *first >= last {
            buffered.push(format!(
                "{id}: first frame {:.0} ms after the upstream's last chunk",
                ms(first.saturating_duration_since(last))
            ));
        }
    }
    c.evidence.push(format!(
        "streaming: {} of {} responses had their first frame out before the upstream's last chunk ({STREAM_CHUNKS} chunks, {} ms apart)",
        ex.sent.len() - buffered.len(),
        ex.sent.len(),
        STREAM_GAP.as_millis()
    ));
    if !buffered.is_empty() {
        c.fail(format!(
            "the bridge buffered whole responses instead of streaming them: {}",
            buffered.join("; ")
        ));
    }
}

/// The same JSON document (the contract may be serialized with another key order).
fn same_json(a: &[u8], b: &[u8]) -> bool {
    match (
        serde_json::from_slice::<serde_json::Value>(a),
        serde_json::from_slice::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
