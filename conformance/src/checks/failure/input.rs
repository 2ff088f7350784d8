//! F2's probes of what a request may carry and still be served (rules `input-order` and
//! `hook-header`), and of a size counted while reading (rule `input-order`, step 4).
//! The bad inputs themselves, alone and two at once, are F2's table.

use hyper::body::Bytes;
use image::ImageFormat;
use plimsoll_spec::{ErrorCode, HookDirective};
use reqwest::header::CONTENT_TYPE;

use crate::checks::ctx::Ctx;
use crate::checks::pieces;
use crate::checks::pool::hook;
use crate::remote::{Op, Target};

/// The chunked upload's pieces.
const CHUNK: u64 = 1 << 20;

/// A good image sent in a way the contract says is served: what it carries, and how.
struct Accepted {
    name: String,
    content_type: Option<String>,
    hook: Option<String>,
}

/// `Content-Type` with a parameter and in capitals (rule `input-order` (3): the media type,
/// case-insensitive, parameters ignored), none at all (accepted), and a hook naming a stage of
/// the export endpoint only (rule `hook-header`: it does nothing on digitize).
fn accepted(t: &Target) -> Vec<Accepted> {
    let png = ImageFormat::Png.to_mime_type();
    let case = |name: &str, content_type: Option<String>, hook| Accepted {
        name: name.to_owned(),
        content_type,
        hook,
    };
    let mut all = vec![
        case("a parameter", Some(format!("{png}; charset=x")), None),
        case("capitals", Some(png.to_ascii_uppercase()), None),
        case("no Content-Type", None, None),
    ];
    let stages = &t.expected.stages;
    if let Some(&stage) = stages.export.iter().find(|s| !stages.digitize.contains(s)) {
        let fail = hook(HookDirective::Fail { stage });
        let name = format!("the hook `{fail}` (an export stage)");
        all.push(case(&name, Some(png.to_owned()), Some(fail)));
    }
    all
}

/// Sends each [`accepted`] request to digitize; each must be answered 200. Returns how many
/// were, and how many were sent.
pub(super) async fn served(t: &Target, c: &mut Ctx) -> (usize, usize) {
    let all = accepted(t);
    let mut right = 0;
    for case in &all {
        let mut request = t
            .client
            .post(t.url(&t.expected.api.digitize.path))
            .body(t.image.clone());
        if let Some(ct) = &case.content_type {
            request = request.header(CONTENT_TYPE, ct.as_str());
        }
        if let Some(h) = &case.hook {
            request = request.header(t.hook_header(), h.as_str());
        }
        let label = format!("a PNG with {}", case.name);
        match t.send(request, Op::Digitize).await {
            Ok(reply) => {
                c.reply(t, label.as_str(), &reply);
                right += usize::from(c.require(reply.ok(), || {
                    format!(
                        "{label}: expected 200, got {} {}",
                        reply.status,
                        reply.code()
                    )
                }));
            }
            Err(e) => c.fail(format!("{label}: {e}")),
        }
    }
    (right, all.len())
}

/// A chunked digitize upload (no `Content-Length`) one byte over `max_upload_bytes`: it must be
/// `payload_too_large`, the size counted while reading (rule `input-order` (4)), not only
/// judged from a declared length. Returns whether it was.
pub(super) async fn counted_oversize(t: &Target, c: &mut Ctx) -> bool {
    let api = &t.expected.api.digitize;
    let total = api.max_upload_bytes + 1;
    let pieces: Vec<Result<Bytes, std::io::Error>> = pieces(total, CHUNK)
        .into_iter()
        .map(|n| Ok(Bytes::from(vec![0u8; n as usize])))
        .collect();
    let request = t
        .client
        .post(t.url(&api.path))
        .header(CONTENT_TYPE, api.content_types[0].as_str())
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            pieces,
        )));
    let label = format!("a chunked upload of {total} bytes (no Content-Length)");
    match t.send(request, Op::Digitize).await {
        Ok(reply) => {
            c.reply(t, label.as_str(), &reply);
            c.require_error(t, &label, &reply, ErrorCode::PayloadTooLarge)
        }
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            false
        }
    }
}
