//! F4: every response carries the request id; error bodies repeat it; client ids are kept when
//! well-formed. Runs last so it can judge every reply of the run.

use std::sync::Arc;

use image::ImageFormat;
use plimsoll_spec::ClauseId;
use reqwest::header::CONTENT_TYPE;

use crate::checks::ctx::Ctx;
use crate::checks::registry::Check;
use crate::target::{Op, Target};

pub const CHECK: Check = Check::clause(
    ClauseId::F4,
    "Every reply of the whole run is noted as it arrives, so F4 runs after the clause checks: \
     each must carry `{header}`. An error body repeats the header's id, a well-formed client id \
     comes back unchanged, and a malformed one is replaced by a well-formed id.",
    |t, c| Box::pin(f4(t, c)),
);

async fn f4(t: &Arc<Target>, c: &mut Ctx) {
    let header = t.request_id_header().to_owned();
    c.expected = format!(
        "{header} on every response; error bodies repeat it; a well-formed client id is kept, a malformed one replaced"
    );
    let f4 = &t.expected.clauses.f4.value;
    let good = "plimsoll-f4.check:1";
    let bad = "not a valid id!";
    for (id, keep) in [(good, true), (bad, false)] {
        let request = t
            .client
            .get(t.url(&t.expected.api.healthz.path))
            .header(header.as_str(), id);
        match t.send(request, Op::Other).await {
            Ok(reply) => {
                let answered = reply.header(&header).unwrap_or_default().to_owned();
                if keep {
                    c.require(answered == id, || {
                        format!("client id `{id}` came back as `{answered}`")
                    });
                } else {
                    c.require(
                        !answered.is_empty() && answered != id && f4.accepts(&answered),
                        || format!("malformed client id answered with `{answered}`"),
                    );
                }
            }
            Err(e) => c.fail(format!("{id}: {e}")),
        }
    }
    // An error body repeats the header.
    let request = t
        .client
        .post(t.url(&t.expected.api.digitize.path))
        .header(CONTENT_TYPE, ImageFormat::Png.to_mime_type());
    match t.send(request, Op::Digitize).await {
        Ok(reply) => {
            let body_id = reply.json()["request_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let header_id = reply.header(&header).unwrap_or_default().to_owned();
            c.require(!body_id.is_empty() && body_id == header_id, || {
                format!("error body request_id `{body_id}` differs from the header `{header_id}`")
            });
        }
        Err(e) => c.fail(format!("error probe: {e}")),
    }
    let seen = t.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let missing = seen.iter().filter(|(_, has)| !has).count();
    c.require(missing == 0, || {
        format!(
            "{missing} of {} responses of this run had no {header}",
            seen.len()
        )
    });
    c.observed = format!(
        "{} of {} responses carried {header}",
        seen.len() - missing,
        seen.len()
    );
}
