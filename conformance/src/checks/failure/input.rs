//! F2's probes of what a request may carry and still be served (rules `input-order` and
//! `hook-header`), of a size counted while reading (rule `input-order`, step 4), and of a size
//! declared but never sent (rule `upload-read`: an oversize body is read before its 400).
//! The bad inputs themselves, alone and two at once, are F2's table.

use std::time::Duration;

use futures_util::StreamExt;
use hyper::body::Bytes;
use image::ImageFormat;
use plimsoll_spec::{ErrorCode, HookDirective, Pool};
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pieces;
use crate::checks::pool::hook;
use crate::remote::{Op, Target};

/// The chunked upload's pieces.
const CHUNK: u64 = 1 << 20;

/// A good image sent in a way the contract says is served: what it carries, and how.
struct Accepted {
    name: String,
    query: &'static str,
    content_type: Option<String>,
    hook: Option<String>,
}

/// `Content-Type` with a parameter and in capitals (rule `input-order` (3): the media type,
/// case-insensitive, parameters ignored), none at all (accepted), hooks the grammar of rule
/// `hook-header` takes that do nothing or little (a stage of the export endpoint only, `queue`,
/// and a hold spelt with blanks, a tab, `+`, leading zeros and an empty directive), and an
/// integer parameter spelt with a fraction of zero, an exponent, or a blank and a sign (rule
/// `query-parameters`).
fn accepted(t: &Target) -> Vec<Accepted> {
    let png = ImageFormat::Png.to_mime_type();
    let case = |name: &str, content_type: Option<String>, hook| Accepted {
        name: name.to_owned(),
        query: "",
        content_type,
        hook,
    };
    // Rule `query-parameters`: an integer is judged by its value, white space around it dropped.
    let spelt = |query| Accepted {
        query,
        ..case(&format!("`{query}`"), Some(png.to_owned()), None)
    };
    let mut all = vec![
        case("a parameter", Some(format!("{png}; charset=x")), None),
        case("capitals", Some(png.to_ascii_uppercase()), None),
        case("no Content-Type", None, None),
        spelt("?colors=6.0"),
        spelt("?colors=6e0"),
        spelt("?colors=%20%2B6"),
    ];
    let (digitize, export) = (
        t.expected.pool(Pool::Digitize).stages,
        t.expected.pool(Pool::Export).stages,
    );
    if let Some(&stage) = export.iter().find(|s| !digitize.contains(s)) {
        let fail = hook(HookDirective::Fail { stage });
        let name = format!("the hook `{fail}` (an export stage)");
        all.push(case(&name, Some(png.to_owned()), Some(fail)));
    }
    // `hold=queue:MS` holds no request: waiting for a worker is admission's, no stage.
    let queue = hook(HookDirective::Hold {
        stage: plimsoll_spec::Stage::Queue,
        ms: 50,
    });
    all.push(case(
        &format!("the hook `{queue}`"),
        Some(png.to_owned()),
        Some(queue),
    ));
    // Blanks (a space or a tab) around every token, `+` and leading zeros, an empty directive.
    let held = hook(HookDirective::Hold {
        stage: digitize[0],
        ms: 5,
    });
    let spaced = format!(
        " {} ;; ",
        held.replacen('=', "\t= ", 1).replacen(":5", " : +0005", 1)
    );
    all.push(case(
        &format!("the hook {spaced:?} (blanks, `+`, leading zeros)"),
        Some(png.to_owned()),
        Some(spaced),
    ));
    all
}

/// Sends each [`accepted`] request to digitize; each must be answered 200. Returns how many
/// were, and how many were sent.
pub(super) async fn served(t: &Target, c: &mut Ctx) -> (usize, usize) {
    let all = accepted(t);
    let mut right = 0;
    for case in &all {
        let path = format!("{}{}", t.expected.api().digitize.path, case.query);
        let mut request = t.client.post(t.url(&path)).body(t.image.clone());
        if let Some(ct) = &case.content_type {
            request = request.header(CONTENT_TYPE, ct.as_str());
        }
        if let Some(h) = &case.hook {
            // From bytes: a tab is a blank the grammar allows, and `from_str` refuses it.
            match reqwest::header::HeaderValue::from_bytes(h.as_bytes()) {
                Ok(value) => request = request.header(t.hook_header(), value),
                Err(e) => {
                    c.fail(format!("the checker cannot send the hook {h:?}: {e}"));
                    continue;
                }
            }
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
    let api = &t.expected.api().digitize;
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

/// A digitize head declaring one byte over `max_upload_bytes`, and no body byte after it. The
/// declared size alone decides nothing yet (rule `upload-read`): an oversize body is read and
/// discarded within the upload read timeout before `payload_too_large`, so that a client still
/// sending reads the 400 instead of a reset; one that does not end in that time is
/// `upload_timeout`. So the answer is `upload_timeout`, no earlier than the timeout and no later
/// than B1's tolerance after it. A server that refuses the declared length at once, unread,
/// answers `payload_too_large` here, and resets a client still sending. Returns a note for the
/// observation.
pub(super) async fn declared_oversize_unsent(t: &Target, c: &mut Ctx) -> String {
    let api = &t.expected.api().digitize;
    let declared = api.max_upload_bytes + 1;
    let timeout = Duration::from_millis(t.expected.upload().read_timeout_ms);
    let late = t.bound(plimsoll_fault::Bound::TimeoutLate);
    let give_up = timeout + late + Duration::from_secs(2);
    let never = futures_util::stream::once(async move {
        tokio::time::sleep(give_up).await;
        Err::<Bytes, _>(std::io::Error::other("the checker's unsent body gave up"))
    })
    .boxed();
    let request = t
        .client
        .post(t.url(&api.path))
        .header(CONTENT_TYPE, api.content_types[0].as_str())
        .header(CONTENT_LENGTH, declared)
        .body(reqwest::Body::wrap_stream(never))
        .timeout(give_up);
    let label = format!("a head declaring {declared} bytes, no body sent");
    let code = ErrorCode::UploadTimeout;
    let reply = match t.send(request, Op::Digitize).await {
        Ok(reply) => reply,
        Err(e) => {
            c.fail(format!(
                "{label}: no {} {code} within {} ms: {e}",
                t.status(code),
                give_up.as_millis()
            ));
            return "a declared oversize with no body: not answered".into();
        }
    };
    c.reply(t, label.as_str(), &reply);
    let took = reply.elapsed;
    if reply.code() == ErrorCode::PayloadTooLarge.as_str() && took < timeout {
        c.fail(format!(
            "{label}: answered {} payload_too_large after {:.0} ms, from the declared length alone: an oversize body must be read (and discarded) within the {} ms upload read timeout before its 400, so a client still sending reads the answer rather than a reset, and one that sends nothing is {code}",
            reply.status,
            ms(took),
            timeout.as_millis()
        ));
    } else if c.require_error(t, &label, &reply, code) {
        c.require(took >= timeout && took <= timeout + late, || {
            format!(
                "{label}: {code} after {:.0} ms, expected between the {} ms upload read timeout and {} ms after it",
                ms(took),
                timeout.as_millis(),
                late.as_millis()
            )
        });
    }
    format!(
        "a declared oversize with no body: {} after {:.0} ms",
        reply.status,
        ms(took)
    )
}
