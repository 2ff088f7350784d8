//! F2: each kind of bad input gets 400 with its own code, never a 500.

use std::sync::Arc;

use plimsoll_spec::ErrorCode;

use super::Ctx;
use crate::target::{Op, Target};

/// (name, endpoint, content type, query, body, hook, expected code), generated in code.
struct Case {
    name: &'static str,
    op: Op,
    content_type: &'static str,
    query: &'static str,
    body: Vec<u8>,
    hook: Option<&'static str>,
    code: ErrorCode,
}

fn cases(t: &Target) -> Vec<Case> {
    let png = t.image.clone();
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::RgbImage::from_pixel(48, 32, image::Rgb([200, 10, 10]))
        .write_to(&mut jpeg, image::ImageFormat::Jpeg)
        .expect("encoding a JPEG in memory");
    let jpeg = jpeg.into_inner();
    let mut corrupt_jpeg = jpeg[..jpeg.len() / 2].to_vec();
    corrupt_jpeg.extend(std::iter::repeat_n(0u8, 64));
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let oversize = vec![0u8; t.expected.api.digitize.max_upload_bytes as usize + 1];
    let d = |name, content_type, query, body, code| Case {
        name,
        op: Op::Digitize,
        content_type,
        query,
        body,
        hook: None,
        code,
    };
    let e = |name, query, body: &[u8], code| Case {
        name,
        op: Op::Export,
        content_type: "application/json",
        query,
        body: body.to_vec(),
        hook: None,
        code,
    };
    vec![
        d("truncated PNG", "image/png", "", png[..png.len() / 2].to_vec(), ErrorCode::MalformedImage),
        d("corrupt JPEG", "image/jpeg", "", corrupt_jpeg, ErrorCode::MalformedImage),
        d("GIF", "image/png", "", b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;".to_vec(), ErrorCode::UnsupportedFormat),
        d("random bytes", "image/png", "", random, ErrorCode::UnsupportedFormat),
        d("text/plain body", "text/plain", "", png.clone(), ErrorCode::UnsupportedFormat),
        d("empty body", "image/png", "", Vec::new(), ErrorCode::EmptyBody),
        d("oversize upload", "image/png", "", oversize, ErrorCode::PayloadTooLarge),
        d("density_mm out of range", "image/png", "?density_mm=99", png.clone(), ErrorCode::InvalidParameter),
        d("colors not a number", "image/png", "?colors=many", png.clone(), ErrorCode::InvalidParameter),
        d("width_mm negative", "image/png", "?width_mm=-5", png.clone(), ErrorCode::InvalidParameter),
        d("unknown parameter", "image/png", "?dpi=300", png.clone(), ErrorCode::InvalidParameter),
        e("design not JSON", "", b"{stitches: oops", ErrorCode::MalformedDesign),
        e("design of the wrong shape", "", br#"{"format":"plimsoll-design/1","stitches":"none"}"#, ErrorCode::MalformedDesign),
        e("unknown export format", "?format=pes", b"{}", ErrorCode::InvalidParameter),
        Case { name: "malformed hook header", hook: Some("explode=now"), ..d("", "image/png", "", png.clone(), ErrorCode::InvalidParameter) },
    ]
}

pub async fn f2(t: &Arc<Target>, c: &mut Ctx) {
    let all = cases(t);
    c.expected = format!(
        "400 with the documented code for each of {} bad inputs; never 500",
        all.len()
    );
    let mut right = 0;
    for case in &all {
        let path = match case.op {
            Op::Export => &t.expected.api.export.path,
            _ => &t.expected.api.digitize.path,
        };
        let mut request = t
            .client
            .post(t.url(&format!("{path}{}", case.query)))
            .header("content-type", case.content_type)
            .body(case.body.clone());
        if let Some(h) = case.hook {
            request = request.header(t.hook_header(), h);
        }
        match t.send(request, case.op).await {
            Ok(reply) => {
                c.reply(case.name, &reply, t.request_id_header());
                let ok = reply.status == 400 && reply.code() == case.code.as_str();
                right += usize::from(ok);
                c.require(ok, || {
                    format!(
                        "{}: expected 400 {}, got {} {}",
                        case.name,
                        case.code,
                        reply.status,
                        reply.code()
                    )
                });
            }
            Err(e) => c.fail(format!("{}: {e}", case.name)),
        }
    }
    c.observed = format!(
        "{right} of {} bad inputs answered 400 with their code",
        all.len()
    );
}
