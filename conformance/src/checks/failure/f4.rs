//! F4: every response carries the request id; every error body repeats it; client ids are kept
//! when well-formed (up to the contract's length) and replaced otherwise. Runs last so it can
//! judge every reply of the run.

use std::sync::Arc;

use image::ImageFormat;
use plimsoll_spec::model::{Recipe, RequestId, RequestIds};
use plimsoll_spec::{ClauseId, Contract};
use reqwest::header::CONTENT_TYPE;

use super::Seen;
use crate::checks::ctx::Ctx;
use crate::checks::registry::{Check, reference_or_declared};
use crate::remote::{Op, Target};

/// F4's entry in the check registry: the evidence the docs print, and `f4`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::F4,
    "Every reply of the whole run is noted as it arrives, so F4 runs after the clause checks: \
     each must carry `{header}` exactly once, as a client library reads it (two lines, or two \
     ids joined by a comma in one, make the reply's request ambiguous), and every error reply's \
     body must repeat the header's id. A well-formed client id comes back unchanged, also one \
     of exactly {client_id_max_len} allowed characters; one of {client_id_max_len} + 1 \
     characters, and a malformed one, are replaced by a well-formed id. The routes are probed \
     too: an unknown path must be {status:not_found} `not_found`, `GET {api.digitize.path}` 405 \
     with an `Allow` header naming POST, a plain `GET {api.relay.path}` \
     {status:upgrade_required} `upgrade_required` with `Upgrade: websocket`, and \
     `GET {api.healthz.path}` 200. For any other service, its `[request_id]` says the header, \
     the ids kept and a request to send them on: the same four ids are sent on that request, \
     each declared bad request once (so an `--only F4` run judges error answers too), and every \
     reply of the run must carry the header exactly once, an error body repeating it at \
     `error_pointer` when one is declared.",
    |t, c| Box::pin(f4(t, c)),
)
.applies_when(applies)
.covers(&["routes"]);

/// F4 judges the reference surface's request id (`clauses.f4`), or any contract's
/// `[request_id]`.
fn applies(contract: &Contract) -> Result<(), String> {
    reference_or_declared(
        contract,
        contract.request_id.is_some(),
        "the contract declares no request id (`[request_id]`) and no reference API (`[api]`)",
    )
}

/// How long the checker waits for one answer of its own: the requests F4 sends are answered at
/// once, so a service that takes longer has hung on one.
const PATIENCE: std::time::Duration = super::declared::PATIENCE;

/// Error replies whose body id disagrees with the header are listed up to this many.
const SHOWN: usize = 5;

/// An id of `len` characters, every one allowed (letters, digits and the extra characters).
fn id_of_len(len: usize, extra: &str) -> String {
    let alphabet: Vec<char> = ('a'..='z')
        .chain('0'..='9')
        .chain(extra.chars())
        .chain('A'..='Z')
        .collect();
    (0..len).map(|i| alphabet[i % alphabet.len()]).collect()
}

async fn f4(t: &Arc<Target>, c: &mut Ctx) {
    if let Some(declared) = t
        .expected
        .request_id
        .clone()
        .filter(|_| !t.expected.is_reference())
    {
        return f4_declared(t, c, &declared).await;
    }
    let header = t.request_id_header().to_owned();
    let f4 = t.expected.clauses().f4.value.clone();
    c.expected = format!(
        "{header} exactly once on every response; every error body repeats it; a well-formed client id (up to {} characters) is kept, a longer or malformed one replaced; unknown path 404, wrong method 405 with Allow, plain GET of the relay path 426",
        f4.client_id_max_len
    );
    let health = Recipe::get(&t.expected.api().healthz.path);
    for case in IdCase::all(&f4) {
        case.send(t, c, &f4, &health).await;
    }
    super::routes::probe(t, c).await;
    // At least one error of F4's own, so an `--only F4` run judges an error body too.
    let request = t
        .client
        .post(t.url(&t.expected.api().digitize.path))
        .header(CONTENT_TYPE, ImageFormat::Png.to_mime_type());
    if let Err(e) = t.send(request, Op::Digitize).await {
        c.fail(format!("error probe: {e}"));
    }

    let seen = t.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    judge_run(c, &header, &seen, true);
}

/// F4 for a service of its own: the ids sent on its declared request, its declared bad
/// requests sent once each for error answers of F4's own, then every reply of the run judged.
async fn f4_declared(t: &Arc<Target>, c: &mut Ctx, declared: &RequestIds) {
    let rule = declared.rule();
    let header = &rule.header;
    let bodies = match &declared.error_pointer {
        Some(pointer) => format!("every error body repeats it at `{pointer}`"),
        None => "error bodies not judged (no `error_pointer`)".to_owned(),
    };
    c.expected = format!(
        "{header} exactly once on every response; {bodies}; a well-formed client id (up to {} characters) is kept, a longer or malformed one replaced",
        rule.client_id_max_len
    );
    for case in IdCase::all(&rule) {
        case.send(t, c, &rule, &declared.request).await;
    }
    let bad = super::declared::declared(&t.expected);
    for (pool, bad) in bad.into_iter().take(ERROR_PROBES) {
        if let Err(e) = t.send_recipe(&bad.request, PATIENCE).await {
            c.fail(format!("error probe ({pool}: {}): {e}", bad.what));
        }
    }
    let seen = t.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    judge_run(c, header, &seen, declared.error_pointer.is_some());
}

/// Declared bad requests F4 sends of its own, at most: a few error answers are enough to judge
/// the header on them, the rest of the run's are judged as they were seen.
const ERROR_PROBES: usize = 4;

/// A short id a client might choose (`plimsoll-f4.check:1`), of the characters `f4` allows.
fn short(f4: &RequestId) -> String {
    let allowed = |c: &char| c.is_ascii_alphanumeric() || f4.client_id_extra_chars.contains(*c);
    "plimsoll-f4.check:1"
        .chars()
        .filter(allowed)
        .take(f4.client_id_max_len)
        .collect()
}

/// A client id F4 sends, and whether the server must keep it (else replace it with a
/// well-formed one): the clause's rule is tested at its edges.
struct IdCase {
    what: &'static str,
    id: String,
    keep: bool,
}

impl IdCase {
    /// A short id and one of the longest kept length (kept); one a character too long and a
    /// malformed one (replaced).
    fn all(f4: &RequestId) -> [IdCase; 4] {
        let longest = id_of_len(f4.client_id_max_len, &f4.client_id_extra_chars);
        let too_long = id_of_len(f4.client_id_max_len + 1, &f4.client_id_extra_chars);
        let case = |what, id, keep| IdCase { what, id, keep };
        [
            case("a short well-formed id", short(f4), true),
            case("an id of the longest kept length", longest, true),
            case("an id one character too long", too_long, false),
            case("a malformed id", "not a valid id!".to_owned(), false),
        ]
    }

    /// Sends the id on `request` (the reference's health request, or the contract's own) and
    /// requires it kept, or replaced by a new well-formed id.
    async fn send(self, t: &Target, c: &mut Ctx, f4: &RequestId, request: &Recipe) {
        let IdCase { what, id, keep } = self;
        let header = &f4.header;
        let mut request = request.clone();
        request.headers.insert(header.clone(), id.clone());
        match t.send_recipe(&request, PATIENCE).await {
            Ok(reply) => {
                let answered = reply.header(header).unwrap_or_default().to_owned();
                if keep {
                    c.require(answered == id, || {
                        format!(
                            "{what} (`{id}`, {} characters) came back as `{answered}`",
                            id.len()
                        )
                    });
                } else {
                    c.require(
                        !answered.is_empty() && answered != id && f4.accepts(&answered),
                        || {
                            format!(
                                "{what} ({} characters) answered with `{answered}`, not a new well-formed id",
                                id.len()
                            )
                        },
                    );
                }
            }
            Err(e) => c.fail(format!("{what}: {e}")),
        }
    }
}

/// Judges every reply of the run: each carried the header exactly once, and each error body
/// repeated its id (when `bodies`: the contract says where it does).
fn judge_run(c: &mut Ctx, header: &str, seen: &[Seen], bodies: bool) {
    let missing = seen.iter().filter(|s| s.header_id.is_none()).count();
    c.require(missing == 0, || {
        format!(
            "{missing} of {} responses of this run had no {header}",
            seen.len()
        )
    });
    let repeated: Vec<_> = seen.iter().filter(|s| s.header_ids > 1).collect();
    if let Some(first) = repeated.first() {
        c.fail(format!(
            "{} of {} responses carried more than one {header} (two lines or a comma-joined list; first: {} {} with {} ids): a client library sees the first, the last or both joined, so which request a reply answers is ambiguous",
            repeated.len(),
            seen.len(),
            first.status,
            first.code.as_deref().unwrap_or("(no code)"),
            first.header_ids
        ));
    }
    let errors = seen
        .iter()
        .filter(|s| s.is_error() && s.status != METHOD_NOT_ALLOWED)
        .count();
    let mismatched = if bodies { mismatched(seen) } else { Vec::new() };
    if !mismatched.is_empty() {
        c.fail(format!(
            "{} of {} error replies do not repeat the header's id in the body; first: {}",
            mismatched.len(),
            errors,
            mismatched[0]
        ));
        c.evidence.extend(mismatched.iter().take(SHOWN).cloned());
    }
    let repeated = if bodies {
        format!(
            "{} of {errors} error bodies repeated it",
            errors - mismatched.len()
        )
    } else {
        format!("{errors} error bodies not judged")
    };
    c.observed = format!(
        "{} of {} responses carried {header}; {repeated}",
        seen.len() - missing,
        seen.len()
    );
}

/// 405 is no contract error: its body is free (rule `routes`), so it need not repeat the id.
const METHOD_NOT_ALLOWED: u16 = 405;

/// The error replies whose body does not repeat the header's id (or has none), in words.
fn mismatched(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .filter(|s| s.is_error() && s.status != METHOD_NOT_ALLOWED)
        .filter(|s| s.body_id.as_deref().is_none_or(str::is_empty) || s.body_id != s.header_id)
        .map(|s| {
            let show = |v: &Option<String>| {
                v.as_deref()
                    .map_or("(none)".to_owned(), |v| format!("`{v}`"))
            };
            format!(
                "{} {}: body request_id {}, header {}",
                s.status,
                s.code.as_deref().unwrap_or("(no code)"),
                show(&s.body_id),
                show(&s.header_id),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(status: u16, header: Option<&str>, body: Option<&str>) -> Seen {
        Seen {
            status,
            header_id: header.map(str::to_owned),
            header_ids: usize::from(header.is_some()),
            body_id: body.map(str::to_owned),
            code: Some("overloaded".into()),
            failed_stage: None,
        }
    }

    #[test]
    fn every_error_body_must_repeat_the_header_id() {
        let run = [
            seen(200, Some("a"), None),
            seen(503, Some("b"), Some("b")),
            seen(503, Some("c"), Some("other")),
            seen(504, Some("d"), None),
            seen(400, None, Some("e")),
            seen(400, Some(""), Some("")),
        ];
        let bad = mismatched(&run);
        assert_eq!(bad.len(), 4, "{bad:?}");
        assert_eq!(
            bad[0],
            "503 overloaded: body request_id `other`, header `c`"
        );
        assert_eq!(bad[1], "504 overloaded: body request_id (none), header `d`");
    }

    #[test]
    fn the_short_id_is_well_formed_under_any_rule() {
        let reference = &plimsoll_spec::Contract::embedded().clauses().f4.value;
        assert_eq!(short(reference), "plimsoll-f4.check:1");
        let strict = RequestId {
            header: "X-Request-Id".into(),
            client_id_max_len: 8,
            client_id_extra_chars: "_".into(),
        };
        assert_eq!(short(&strict), "plimsoll");
        assert!(strict.accepts(&short(&strict)));
    }

    #[test]
    fn ids_of_a_length_use_only_allowed_characters() {
        let f4 = &plimsoll_spec::Contract::embedded().clauses().f4.value;
        let longest = id_of_len(f4.client_id_max_len, &f4.client_id_extra_chars);
        assert_eq!(longest.len(), f4.client_id_max_len);
        assert!(f4.accepts(&longest));
        let too_long = id_of_len(f4.client_id_max_len + 1, &f4.client_id_extra_chars);
        assert!(!f4.accepts(&too_long));
        assert!(too_long.chars().all(|ch| f4.accepts(&ch.to_string())));
    }
}
