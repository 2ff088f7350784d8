//! F2: each kind of bad input gets the contract's status with its own code, never a 500.

use std::sync::Arc;
use std::time::Duration;

use image::ImageFormat;
use plimsoll_spec::{ClauseId, Contract, ErrorCode};
use reqwest::header::CONTENT_TYPE;

use crate::checks::ctx::Ctx;
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::{Op, Target};

/// F2's entry in the check registry: the evidence the docs print, and `f2`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::F2,
    "A table of bad inputs generated in code (truncated PNG, corrupt JPEG, GIF, random bytes, a \
     wrong content type, an empty body, an oversize upload, bad parameters, bad design JSON, an \
     unknown export format, a malformed hook header, one with a blank inside a token, one with a \
     byte outside visible ASCII): each gets {status:malformed_image} with \
     its own documented code, never a 500; among the parameters a name given twice, an \
     integer with a fraction, hex, a digit separator, `inf`, `1e400` and a `format` in capitals. \
     Pairs of bad inputs show the order of the checks: a \
     bad hook or parameter with a wrong content type is `invalid_parameter`, a wrong content type \
     with an empty body `unsupported_format`, an oversize body of no image `payload_too_large`, and so \
     is a chunked upload (no `Content-Length`) one byte over `max_upload_bytes`. A head declaring \
     one byte over `max_upload_bytes` with no body after it is {status:upload_timeout} at the \
     upload read timeout (within B1's tolerance): an oversize body is read before its 400, never \
     refused unread from its declared length. A PNG whose \
     `Content-Type` carries a parameter, is in capitals or is missing, whose hook names only a \
     stage of the export endpoint or `queue` (holding nothing) or is spelt with blanks and a tab \
     around its tokens, `+`, leading zeros and an empty directive, or whose integer parameter is \
     spelt `6.0`, `6e0` or ` +6`, must be answered 200. For any contract, each bad request a \
     pool declares (`pools.NAME.bad_requests`) is sent as written and must get its declared \
     status, and its code at its JSON Pointer when one is declared; and where its `[upload]` \
     declares a largest body (`max_body_bytes`), the upload's request grown with trailing \
     spaces to exactly that size must be served with the request's status, and one byte \
     larger must get the `too_large` answer, sent with a `Content-Length` and sent chunked.",
    |t, c| Box::pin(f2(t, c)),
)
.applies_when(applies)
.covers(&[
    "input-order",
    "query-parameters",
    "image-format",
    "hook-header",
    "upload-read",
]);

/// F2 judges the reference surface's bad inputs, which the checker builds (images, designs,
/// hooks), and the bad requests any contract declares.
fn applies(contract: &Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        !super::declared::declared(contract).is_empty() || super::body_size::applies(contract),
        "the contract declares no bad request (`[[pools.NAME.bad_requests]]`), no largest body \
         (`upload.max_body_bytes`) and no reference API (`[api]`, whose bad inputs the checker \
         builds)",
    )
}

/// One bad input: where it goes, what it is, and the code it must get.
struct Case<'a> {
    name: &'static str,
    op: Op,
    content_type: &'a str,
    query: &'static str,
    body: Vec<u8>,
    hook: Option<String>,
    code: ErrorCode,
}

fn cases(t: &Target) -> Vec<Case<'_>> {
    let png = t.image.clone();
    let png_type = ImageFormat::Png.to_mime_type();
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::RgbImage::from_pixel(48, 32, image::Rgb([200, 10, 10]))
        .write_to(&mut jpeg, ImageFormat::Jpeg)
        .expect("encoding a JPEG in memory");
    let jpeg = jpeg.into_inner();
    let mut corrupt_jpeg = jpeg[..jpeg.len() / 2].to_vec();
    corrupt_jpeg.extend(std::iter::repeat_n(0u8, 64));
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let oversize = vec![0u8; t.expected.api().digitize.max_upload_bytes as usize + 1];
    // A good hold, in the contract's own names, to spoil one way at a time.
    let held = crate::checks::pool::hold_first(t, 5);
    let d = |name, content_type, query, body, code| Case {
        name,
        op: Op::Digitize,
        content_type,
        query,
        body,
        hook: None,
        code,
    };
    let design_type = t.expected.api().export.content_types[0].as_str();
    let e = |name, query, body: &[u8], code| Case {
        name,
        op: Op::Export,
        content_type: design_type,
        query,
        body: body.to_vec(),
        hook: None,
        code,
    };
    vec![
        d("truncated PNG", png_type, "", png[..png.len() / 2].to_vec(), ErrorCode::MalformedImage),
        d("corrupt JPEG", ImageFormat::Jpeg.to_mime_type(), "", corrupt_jpeg, ErrorCode::MalformedImage),
        d("GIF", png_type, "", b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;".to_vec(), ErrorCode::UnsupportedFormat),
        d("random bytes", png_type, "", random, ErrorCode::UnsupportedFormat),
        d("text/plain body", "text/plain", "", png.clone(), ErrorCode::UnsupportedFormat),
        d("empty body", png_type, "", Vec::new(), ErrorCode::EmptyBody),
        d("oversize upload", png_type, "", oversize, ErrorCode::PayloadTooLarge),
        d("density_mm out of range", png_type, "?density_mm=99", png.clone(), ErrorCode::InvalidParameter),
        d("colors not a number", png_type, "?colors=many", png.clone(), ErrorCode::InvalidParameter),
        d("width_mm negative", png_type, "?width_mm=-5", png.clone(), ErrorCode::InvalidParameter),
        d("unknown parameter", png_type, "?dpi=300", png.clone(), ErrorCode::InvalidParameter),
        // Rule `query-parameters`: one value per name, and a finite decimal number only.
        d("a parameter given twice", png_type, "?colors=6&colors=6", png.clone(), ErrorCode::InvalidParameter),
        d("colors with a fraction", png_type, "?colors=6.5", png.clone(), ErrorCode::InvalidParameter),
        d("colors in hex", png_type, "?colors=0x10", png.clone(), ErrorCode::InvalidParameter),
        d("colors with a digit separator", png_type, "?colors=1_0", png.clone(), ErrorCode::InvalidParameter),
        d("width_mm infinite", png_type, "?width_mm=inf", png.clone(), ErrorCode::InvalidParameter),
        d("width_mm past any finite number", png_type, "?width_mm=1e400", png.clone(), ErrorCode::InvalidParameter),
        e("design not JSON", "", b"{stitches: oops", ErrorCode::MalformedDesign),
        e("design of the wrong shape", "", br#"{"format":"plimsoll-design/1","stitches":"none"}"#, ErrorCode::MalformedDesign),
        e("unknown export format", "?format=pes", b"{}", ErrorCode::InvalidParameter),
        e("export format in capitals", "?format=DST", b"{}", ErrorCode::InvalidParameter),
        // Not the hook grammar on purpose: the server must refuse it as a parameter.
        Case { name: "malformed hook header", hook: Some("explode=now".into()), ..d("", png_type, "", png.clone(), ErrorCode::InvalidParameter) },
        // Rule `hook-header`: any byte outside visible ASCII is refused, a blank inside a token too.
        Case { name: "a hook with a byte outside visible ASCII", hook: Some(format!("{held}\u{e9}")), ..d("", png_type, "", png.clone(), ErrorCode::InvalidParameter) },
        Case { name: "a hook with a blank inside a token", hook: Some(format!("{} {}", &held[..2], &held[2..])), ..d("", png_type, "", png.clone(), ErrorCode::InvalidParameter) },
        // Two at once: the first failure in rule `input-order`'s order decides.
        d("unknown parameter and text/plain", "text/plain", "?dpi=300", png.clone(), ErrorCode::InvalidParameter),
        Case { name: "malformed hook header and text/plain", hook: Some("explode=now".into()), ..d("", "text/plain", "", png.clone(), ErrorCode::InvalidParameter) },
        d("text/plain and an empty body", "text/plain", "", Vec::new(), ErrorCode::UnsupportedFormat),
        e("unknown export format and an empty body", "?format=pes", b"", ErrorCode::InvalidParameter),
    ]
}

/// F2: the reference surface's bad inputs when the contract declares it, then the bad
/// requests the contract declares.
async fn f2(t: &Arc<Target>, c: &mut Ctx) {
    if t.expected.is_reference() {
        reference_inputs(t, c).await;
    }
    if !super::declared::declared(&t.expected).is_empty() {
        let part = super::declared::judge(t, c).await;
        c.add_part(part);
    }
    if super::body_size::applies(&t.expected) {
        let part = super::body_size::judge(t, c).await;
        c.add_part(part);
    }
}

/// The bad inputs the checker builds for the reference surface, and the acceptable variations
/// it must serve.
async fn reference_inputs(t: &Arc<Target>, c: &mut Ctx) {
    let all = cases(t);
    c.expected = format!(
        "{} with the documented code for each of {} bad inputs; never 500",
        t.status(ErrorCode::MalformedImage),
        all.len()
    );
    let mut right = 0;
    let mut judged = 0;
    for case in &all {
        if !carried(t, c, case.name, case.body.len() as u64) {
            continue;
        }
        judged += 1;
        let path = match case.op {
            Op::Export => &t.expected.api().export.path,
            _ => &t.expected.api().digitize.path,
        };
        let mut request = t
            .client
            .post(t.url(&format!("{path}{}", case.query)))
            .header(CONTENT_TYPE, case.content_type)
            .body(case.body.clone());
        if let Some(h) = &case.hook {
            // From bytes: a refused hook may carry bytes `from_str` would not send.
            match reqwest::header::HeaderValue::from_bytes(h.as_bytes()) {
                Ok(value) => request = request.header(t.hook_header(), value),
                Err(e) => {
                    c.fail(format!(
                        "{}: the checker cannot send the hook: {e}",
                        case.name
                    ));
                    continue;
                }
            }
        }
        match t.send(request, case.op).await {
            Ok(reply) => {
                c.reply(t, case.name, &reply);
                right += usize::from(c.require_error(t, case.name, &reply, case.code));
            }
            Err(e) => c.fail(format!("{}: {e}", case.name)),
        }
    }
    let counted = if carried(
        t,
        c,
        "the chunked oversize upload",
        t.expected.api().digitize.max_upload_bytes + 1,
    ) {
        let counted = super::input::counted_oversize(t, c).await;
        if counted { "refused" } else { "not refused" }
    } else {
        "not sent"
    };
    let declared = super::input::declared_oversize_unsent(t, c).await;
    let (served, good) = super::input::served(t, c).await;
    c.observed = format!(
        "{right} of {judged} bad inputs answered with their code; a chunked oversize upload {counted}; {declared}; {served} of {good} acceptable variations served"
    );
}

/// Whether the fault the run goes through can carry `len` bytes of the case `name` within the
/// upload read timeout. When it cannot (a large body at a low bandwidth), the case is not
/// applicable under the fault, said so: a server may read a body before judging it (the input
/// order puts the upload timeout and the size in one step), and one that does rightly answers
/// `upload_timeout` first.
fn carried(t: &Target, c: &mut Ctx, name: &str, len: u64) -> bool {
    let read_timeout = Duration::from_millis(t.expected.upload().read_timeout_ms);
    let Some(why) = t
        .adjustments
        .cannot_carry(len, plimsoll_fault::Stream::Upstream, read_timeout)
    else {
        return true;
    };
    c.fault_removes(
        t,
        Some(name),
        format!(
            "its {why}, past the {} ms upload read timeout: a server that reads the body first rightly answers {} first",
            read_timeout.as_millis(),
            ErrorCode::UploadTimeout
        ),
    );
    false
}
