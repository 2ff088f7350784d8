//! R5: frame atomicity: concurrent multi-frame responses interleave whole frames only, and
//! each reassembles to exactly what plain HTTP answers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::relay::RelayRequest;
use plimsoll_spec::{ClauseId, Design, Extents, Stitch, StitchCommand, Thread};
use reqwest::header::CONTENT_TYPE;

use super::client::{nonce, relay_workers, request, round, with_hold};
use super::frames::Exchange;
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::Target;
use crate::remote::upstream::{Ask, Visit};

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

/// A response to relay, named, with the body plain HTTP gave for it.
struct Kind {
    name: String,
    request: RelayRequest,
    body: Vec<u8>,
}

/// The chunks of a streamed upstream body (each one frame's worth) and the gap between them: a
/// bridge that waits for the whole body sends its first frame only after the last gap.
const STREAM_CHUNKS: usize = 4;
const STREAM_GAP: Duration = Duration::from_millis(300);

/// Bodies the checker's upstream streams, one frame's worth per chunk, as many at once as the
/// relay runs (at most 4).
fn streamed_responses(t: &Target, tag: u64, max: usize) -> Vec<Kind> {
    let n = relay_workers(t).clamp(1, 4);
    (0..n)
        .map(|i| {
            let id = format!("r5-{tag:x}-stream{i}");
            let ask = Ask::new(id.clone()).streamed(STREAM_CHUNKS, max, STREAM_GAP);
            Kind {
                name: format!("stream{i}"),
                request: request(id, "GET", &ask.path()),
                body: ask.body(),
            }
        })
        .collect()
}

/// Requests whose plain-HTTP bodies are large: the contract document twice, and a large
/// design's exports (as many formats as the export pool takes at once, at most 3).
async fn large_responses(t: &Target, c: &mut Ctx, max: usize) -> Vec<Kind> {
    let api = &t.expected.api;
    // About 3 bytes a stitch in the binary formats, more in SVG: every export needs several frames.
    let design = serde_json::to_string(&zigzag((max / 2 + 1000).min(200_000))).unwrap_or_default();
    let mut kinds = Vec::new();
    match t.client.get(t.url(&api.contract.path)).send().await {
        Ok(r) if r.status().is_success() => {
            let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
            for i in 0..2 {
                kinds.push(Kind {
                    name: format!("contract-{i}"),
                    request: request(String::new(), "GET", &api.contract.path),
                    body: body.clone(),
                });
            }
        }
        other => c.evidence.push(format!(
            "GET {} over HTTP failed ({other:?}); not relayed",
            api.contract.path
        )),
    }
    let exports = (t.expected.clauses.t1.value.export_workers as usize
        + t.expected.clauses.t2.value.export_queue_capacity as usize)
        .min(3);
    let content_type = &api.export.content_types[0];
    for format in api.export.formats.iter().take(exports) {
        let path = format!("{}?format={}", api.export.path, format.as_str());
        let direct = t
            .client
            .post(t.url(&path))
            .header(CONTENT_TYPE, content_type)
            .body(design.clone())
            .send()
            .await;
        match direct {
            Ok(r) if r.status().is_success() => {
                let body = r.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
                let mut relayed = request(String::new(), &api.export.method, &path);
                relayed
                    .headers
                    .insert(CONTENT_TYPE.as_str().to_owned(), content_type.clone());
                relayed.body = design.clone();
                kinds.push(Kind {
                    name: format.as_str().to_owned(),
                    request: relayed,
                    body,
                });
            }
            other => c.evidence.push(format!(
                "{} {path} over HTTP failed ({:?}); not relayed",
                api.export.method,
                other.map(|r| r.status())
            )),
        }
    }
    kinds
}

/// Judges one response's frames; returns (frames, largest chunk).
fn judge_frames(c: &mut Ctx, ex: &Exchange, id: &str, kind: &Kind, max: usize) -> (usize, usize) {
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
    let max = t.expected.clauses.r5.value.max_frame_body_bytes as usize;
    c.expected = format!(
        "concurrent responses over {max} bytes: every message parses as a frame, seq gapless from 0 with final last, chunks <= {max} bytes, bodies identical to plain HTTP"
    );
    let tag = nonce();
    let kinds = match &t.upstream {
        Some(_) => streamed_responses(t, tag, max),
        None => large_responses(t, c, max).await,
    };
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
    let mut want: HashMap<String, Kind> = HashMap::new();
    for mut kind in kinds {
        if t.upstream.is_none() {
            kind.request.request_id = format!("r5-{tag:x}-{}", kind.name);
            // The same short hold for all: their streams start together.
            kind.request = with_hold(t, kind.request, 100);
        }
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
    if let Some(upstream) = &t.upstream {
        let began = ex.began.unwrap_or_else(Instant::now);
        streams(c, &ex, &upstream.visits_since(began));
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

/// A valid design of `stitches` stitch commands (one thread, a zigzag inside 100 x 100 mm), so
/// its exports are large enough to need several frames.
fn zigzag(stitches: usize) -> Design {
    let mut program: Vec<Stitch> = (0..stitches)
        .map(|i| Stitch {
            x: (i % 1000) as i32,
            y: if i % 2 == 0 {
                0
            } else {
                40 + ((i / 1000) % 50) as i32
            },
            cmd: StitchCommand::Stitch,
        })
        .collect();
    program.push(Stitch {
        x: 0,
        y: 0,
        cmd: StitchCommand::End,
    });
    Design {
        format: plimsoll_spec::design::DESIGN_FORMAT.to_owned(),
        width_mm: 100.0,
        height_mm: 100.0,
        threads: vec![Thread {
            color: "#204080".to_owned(),
        }],
        extents: Extents {
            min_x: 0,
            min_y: 0,
            max_x: 1000,
            max_y: 1000,
        },
        stitch_count: stitches as u64,
        stitches: program,
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
