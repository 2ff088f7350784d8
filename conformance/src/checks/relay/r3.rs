//! R3: responses are matched by request id whatever order they complete in.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use plimsoll_fault::rng::SplitMix64;
use plimsoll_spec::ClauseId;
use plimsoll_spec::relay::RelayRequest;

use super::client::{SLACK_MS, held, nonce, round};
use super::frames::header;
use crate::checks::ctx::{Ctx, ms};
use crate::checks::registry::Check;
use crate::remote::Target;

/// Holds are multiples of this, shuffled.
const STEP_MS: u64 = 60;
/// Requests in the schedule.
const COUNT: usize = 8;

/// R3's entry in the check registry: the evidence the docs print, and `r3`, which gathers it.
pub const CHECK: Check = Check::clause(
    ClauseId::R3,
    "Requests with a shuffled schedule of holds, each carrying a client-chosen trace id: every \
     response is matched by `{match_by}` to a request that was sent, each exactly once, echoes \
     that request's trace id (at the checker's upstream: carries the header naming the request \
     it answers), and never arrives before its hold could have ended (which would make it \
     another request's answer). First, on a socket of their own, messages that are no request \
     envelope (not JSON, no `type`, another `type`, a `path` without a leading `/`) and a good \
     envelope after them: each bad one gets exactly one `relay-error` (its `request_id`, empty \
     when it had none, `seq` 0, `final`, {status:invalid_parameter} `invalid_parameter`), and \
     the good one is answered on the same socket.",
    |t, c| Box::pin(r3(t, c)),
)
.covers(&["relay-inner-request", "relay-error"]);

/// Fisher–Yates with the crate's one generator.
fn shuffle<T>(rng: &mut SplitMix64, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// How many pairs completed in the opposite order to the one they were sent in.
fn inversions(order: &[usize]) -> usize {
    order
        .iter()
        .enumerate()
        .map(|(i, a)| order[i + 1..].iter().filter(|b| *b < a).count())
        .sum()
}

/// The requests of `holds`, with the header that names each answer's request and the value each
/// must carry in it, as the target's local handler names them (the checker's upstream names its
/// request itself; the target's own API echoes a client-chosen request id).
fn schedule(
    t: &Target,
    tag: u64,
    holds: &[u64],
) -> (Vec<RelayRequest>, String, HashMap<String, String>) {
    let mut id_header = String::new();
    let mut echo = HashMap::new();
    let requests = holds
        .iter()
        .enumerate()
        .map(|(i, &hold)| {
            let id = format!("r3-{tag:x}-{i}");
            let mut r = held(t, id.clone(), hold);
            let (header, name) = t
                .local
                .name_answer(t, &mut r, &id, &format!("r3{tag:x}x{i}"));
            id_header = header;
            if let Some(name) = name {
                echo.insert(id, name);
            }
            r
        })
        .collect();
    (requests, id_header, echo)
}

async fn r3(t: &Arc<Target>, c: &mut Ctx) {
    c.expected = format!(
        "{COUNT} requests with a shuffled hold schedule (0–{} ms): every response matched by `{}` to a request that was sent, each exactly once",
        STEP_MS * (COUNT as u64 - 1),
        t.expected.clauses().r3.value.match_by
    );
    super::refusals::malformed(t, c).await;
    let tag = nonce();
    let mut holds: Vec<u64> = (0..COUNT as u64).map(|i| i * STEP_MS).collect();
    shuffle(&mut SplitMix64::new(tag), &mut holds);
    if holds.windows(2).all(|w| w[0] <= w[1]) {
        holds.reverse();
    }
    let (requests, id_header, echo) = schedule(t, tag, &holds);
    let limit = Duration::from_millis(STEP_MS * COUNT as u64 * 2) + Duration::from_secs(1);
    let Some((ex, _)) = round(t, c, &requests, limit, false, "shuffled").await else {
        return;
    };
    c.evidence
        .push(format!("hold schedule in send order (ms): {holds:?}"));
    let mut echoed = 0;
    let mut early = Vec::new();
    for (r, &hold) in requests.iter().zip(&holds) {
        let id = &r.request_id;
        let Some(first) = ex.first(id) else { continue };
        if let (Some(want), Some(got)) = (echo.get(id), header(&first.headers, &id_header)) {
            if got == want {
                echoed += 1;
            } else {
                let owner = echo
                    .iter()
                    .find(|(_, v)| v.as_str() == got)
                    .map(|(k, _)| k.as_str())
                    .unwrap_or("no request");
                c.fail(format!("the response carrying request_id `{id}` is the response of {owner} ({id_header}: {got})"));
            }
        }
        if let Some(latency) = ex.latency(id)
            && ms(latency) + SLACK_MS < hold as f64
        {
            early.push(format!("{id} (held {hold} ms) after {:.0} ms", ms(latency)));
        }
    }
    if !early.is_empty() {
        c.fail(format!("responses arrived before their request's hold could end, so they answer another request: {}", early.join(", ")));
    }
    let position = ex.send_positions();
    let order: Vec<usize> = ex
        .order
        .iter()
        .filter_map(|id| position.get(id.as_str()).copied())
        .collect();
    c.evidence
        .push(format!("completion order (send positions): {order:?}"));
    c.observed = format!(
        "{}/{COUNT} responses, each id once ({} frames); {} pairs completed out of send order; {echoed}/{} echoed their {id_header}",
        ex.done.len(),
        ex.messages,
        inversions(&order),
        echo.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_permutations() {
        let mut v: Vec<u64> = (0..8).collect();
        shuffle(&mut SplitMix64::new(12345), &mut v);
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn inversions_count_pairs_out_of_order() {
        assert_eq!(inversions(&[0, 1, 2]), 0);
        assert_eq!(inversions(&[2, 1, 0]), 3);
        assert_eq!(inversions(&[1, 0, 2]), 1);
    }
}
