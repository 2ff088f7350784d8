//! F2 for any service: the largest body its `[upload]` declares (`max_body_bytes`) and what a
//! larger one gets (`too_large`). Three bodies grown from the upload's request: one of exactly
//! the largest size must be served with the request's status (a service refusing every body
//! fails here), and one a byte larger must get the declared answer both with a
//! `Content-Length` and chunked (a limit read from the declared length alone lets the chunked
//! one through; a larger limit lets both through).

use std::sync::Arc;
use std::time::Duration;

use plimsoll_spec::Contract;

use crate::checks::ctx::Ctx;
use crate::checks::upload::{self, Framing, Uploads};
use crate::remote::Target;

/// Whether the contract declares another service's largest body.
pub(super) fn applies(contract: &Contract) -> bool {
    upload::declared(contract).is_some_and(|u| u.too_large.is_some())
}

/// The three bodies and their answers. Returns what was expected and what was observed, in
/// words.
pub(super) async fn judge(t: &Arc<Target>, c: &mut Ctx) -> (String, String) {
    let Some(uploads) = upload::declared(&t.expected) else {
        return Default::default();
    };
    let Some((max, answer)) = uploads.too_large else {
        return Default::default();
    };
    let refused = t.expected.refusal_words(answer);
    let route = format!("`{} {}`", uploads.request.method, uploads.request.path);
    let expected = format!(
        "{route}: a body of {max} bytes served {}; one of {} bytes answered {refused}, with a \
         Content-Length and chunked",
        uploads.request.status,
        max + 1
    );
    let mut seen = Vec::new();
    for (len, framing) in [
        (max, Framing::Declared),
        (max + 1, Framing::Declared),
        (max + 1, Framing::Chunked),
    ] {
        seen.push(one(t, c, &uploads, (len, framing), max).await);
    }
    (expected, format!("{route}: {}", seen.join(", ")))
}

/// Sends one body of `len` bytes and judges its answer: served at the largest size, the
/// declared answer over it. Returns the answer in words.
async fn one(
    t: &Target,
    c: &mut Ctx,
    uploads: &Uploads<'_>,
    (len, framing): (u64, Framing),
    max: u64,
) -> String {
    let framed = match framing {
        Framing::Declared => "with its Content-Length",
        Framing::Chunked => "chunked",
    };
    let label = format!("a body of {len} bytes, {framed}");
    // Loopback moves a gigabyte in seconds; a service that neither reads nor answers is given up.
    let limit = Duration::from_secs(10 + len / (64 << 20));
    let request = match uploads.sized(t, (len, framing), None, limit) {
        Ok(request) => request,
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            return format!("{len} {framed}: not sent");
        }
    };
    let reply = match t.send(request, crate::remote::Op::Other).await {
        Ok(reply) => reply,
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            return format!("{len} {framed}: no answer");
        }
    };
    c.reply(t, &label, &reply);
    let refused = (uploads.too_large).map(|(_, answer)| t.refusal_mismatch(&reply, answer));
    if len > max {
        if let Some(Some(why)) = refused {
            c.fail(format!("{label}, over the {max}-byte largest body: {why}"));
        }
    } else {
        c.require(reply.status == uploads.request.status, || {
            format!(
                "{label}, the largest body declared: answered {}, not {}",
                reply.status, uploads.request.status
            )
        });
    }
    format!("{len} {framed} {}", reply.status)
}
