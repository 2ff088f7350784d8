//! The IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers-09)
//! of one answer, read as RFC 9651 structured-field lists (`sfv`), and judged against the
//! declared bucket: the named policy's quota `q` is `burst + 1`, and the remaining quota `r` is
//! within the bucket, 0 on a refusal.

use plimsoll_spec::model::RateLimit;
use sfv::{BareItem, List, ListEntry, Parser};

use crate::remote::Reply;

/// What one answer's fields say of the policy `policy`, or why they cannot be read.
fn params(reply: &Reply, field: &str, policy: &str) -> Result<Vec<(String, i64)>, String> {
    let raw = reply
        .header(field)
        .ok_or_else(|| format!("no {field} field"))?;
    let list: List = Parser::new(raw)
        .parse()
        .map_err(|e| format!("{field} `{raw}` is not a structured-field list: {e}"))?;
    list.iter()
        .find_map(|entry| match entry {
            ListEntry::Item(item)
                if item
                    .bare_item
                    .as_string()
                    .is_some_and(|s| s.as_str() == policy) =>
            {
                Some(
                    item.params
                        .iter()
                        .filter_map(|(k, v)| match v {
                            BareItem::Integer(n) => Some((k.as_str().to_owned(), i64::from(*n))),
                            _ => None,
                        })
                        .collect(),
                )
            }
            _ => None,
        })
        .ok_or_else(|| format!("{field} `{raw}` names no policy \"{policy}\""))
}

/// The integer parameter `key` of `params`.
fn param(params: &[(String, i64)], key: &str) -> Option<i64> {
    params.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

/// Judges one answer's fields against `limit`'s bucket; `refused` says whether the limit
/// refused it. Returns what is wrong, if anything.
pub(super) fn judge(
    limit: &RateLimit,
    policy: &str,
    reply: &Reply,
    refused: bool,
) -> Option<String> {
    let bucket = i64::from(limit.bucket());
    let checked = || -> Result<(), String> {
        let declared = params(reply, "RateLimit-Policy", policy)?;
        match param(&declared, "q") {
            Some(q) if q == bucket => {}
            Some(q) => return Err(format!("RateLimit-Policy's q={q}, the bucket is {bucket}")),
            None => return Err("RateLimit-Policy has no quota q".into()),
        }
        let now = params(reply, "RateLimit", policy)?;
        match (param(&now, "r"), refused) {
            (Some(0), true) => Ok(()),
            (Some(r), true) => Err(format!("RateLimit's r={r} on a refusal, not 0")),
            (Some(r), false) if (0..bucket).contains(&r) => Ok(()),
            (Some(r), false) => Err(format!(
                "RateLimit's r={r} on an admitted answer, outside 0..{bucket}"
            )),
            (None, _) => Err("RateLimit has no remaining quota r".into()),
        }
    };
    checked().err()
}
