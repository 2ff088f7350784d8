//! B1 for any service: its `[upload]`'s read timeout. One body of the upload's request stops
//! after a prefix and sends nothing more: it must be ended as declared (the `read_timeout_answer`,
//! or its connection closed unanswered when none is declared) no earlier than the read timeout
//! and no later than the tolerance after it, on the checker's clock; then the request, sent
//! whole, must be served. A service without a read timeout, or with a longer one, ends it late
//! or never and fails; so does one that answers what the contract does not say.

use std::sync::Arc;
use std::time::{Duration, Instant};

use plimsoll_spec::Contract;

use crate::checks::ctx::{Ctx, ms};
use crate::checks::pool::served_again;
use crate::checks::upload::{self, Framing, Uploads};
use crate::remote::{Op, Target};

/// The length the stalled body declares when the contract declares no largest body.
const DECLARED: u64 = 64 << 10;

/// Whether the contract declares another service's uploads.
pub(super) fn applies(contract: &Contract) -> bool {
    upload::declared(contract).is_some()
}

/// Stalls one body and judges how it ends. Returns what was expected and what was observed,
/// in words.
pub(super) async fn judge(t: &Arc<Target>, c: &mut Ctx) -> (String, String) {
    let Some(uploads) = upload::declared(&t.expected) else {
        return Default::default();
    };
    let timeout = Duration::from_millis(uploads.upload.read_timeout_ms);
    let late = t.bound(plimsoll_fault::Bound::TimeoutLate);
    let ending = match uploads.stalled {
        Some(answer) => format!("answered {}", t.expected.refusal_words(answer)),
        None => "its connection closed unanswered".to_owned(),
    };
    let expected = format!(
        "a body stalled after a prefix {ending} within {} ms of the {} ms read timeout; the \
         request served after",
        late.as_millis(),
        timeout.as_millis()
    );
    let seen = stalled(t, c, &uploads, (timeout, late)).await;
    let label = "the upload's request after the stalled body";
    let again = served_again(t, c, label, uploads.request, Duration::from_secs(10)).await;
    (
        expected,
        format!("stalled body {seen}; served after: {again}"),
    )
}

/// Sends half of a body (the request's own at least) and waits: judges the end it meets.
async fn stalled(
    t: &Target,
    c: &mut Ctx,
    uploads: &Uploads<'_>,
    (timeout, late): (Duration, Duration),
) -> String {
    let body = uploads.request.body().map_or(0, |b| b.len() as u64);
    let len = uploads
        .upload
        .max_body_bytes
        .unwrap_or(DECLARED.max(2 * body + 2));
    let prefix = (len / 2).max(body).min(len - 1);
    let give_up = timeout + late + Duration::from_secs(2);
    let label = format!("a body declaring {len} bytes, stalled after {prefix}");
    let request = match uploads.sized(
        t,
        (len, Framing::Declared),
        Some((prefix, give_up)),
        give_up,
    ) {
        Ok(request) => request,
        Err(e) => {
            c.fail(format!("{label}: {e}"));
            return "not sent".into();
        }
    };
    let sent = Instant::now();
    let answer = t.send(request, Op::Other).await;
    let took = sent.elapsed();
    c.trials_ms.push(ms(took));
    let on_time = |c: &mut Ctx| {
        let what = format!("the {} ms read timeout", timeout.as_millis());
        c.require_on_time(&label, took, (timeout, &what), late);
    };
    match (answer, uploads.stalled) {
        (Ok(reply), Some(declared)) => {
            c.reply(t, &label, &reply);
            match t.refusal_mismatch(&reply, declared) {
                None => on_time(c),
                Some(why) => c.fail(format!("{label}: {why}")),
            }
            format!("answered {} after {:.0} ms", reply.status, ms(took))
        }
        (Ok(reply), None) => {
            c.reply(t, &label, &reply);
            c.fail(format!(
                "{label}: answered {} after {:.0} ms; the contract declares the connection closed unanswered",
                reply.status,
                ms(took)
            ));
            format!("answered {} after {:.0} ms", reply.status, ms(took))
        }
        (Err(_), _) if took >= give_up => {
            c.fail(format!(
                "{label}: not ended within {} ms (the checker gave up)",
                give_up.as_millis()
            ));
            "never ended".into()
        }
        (Err(e), Some(_)) => {
            c.fail(format!(
                "{label}: closed unanswered after {:.0} ms ({e}); the contract declares an answer",
                ms(took)
            ));
            format!("closed unanswered after {:.0} ms", ms(took))
        }
        (Err(_), None) => {
            on_time(c);
            format!("closed unanswered after {:.0} ms", ms(took))
        }
    }
}
