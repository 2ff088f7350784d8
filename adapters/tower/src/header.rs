//! Reading the hook header: how long it asks to hold, or why the layer cannot honour it. The
//! grammar is `plimsoll_spec::hooks`' (never re-parsed here).

use std::time::Duration;

use http::{HeaderMap, HeaderName};
use plimsoll_spec::StageName;
use plimsoll_spec::hooks::{HookDirective, format_hooks, parse_hooks_as};

use crate::refusal::Refusal;

/// How long the request's hook header asks to hold (`None`: no header, or no directive), or why
/// the layer cannot honour it. Repeated fields are read as one list, joined by `;`, so no
/// directive in a second field passes unread.
pub(crate) fn hold_asked(
    headers: &HeaderMap,
    header: &HeaderName,
) -> Result<Option<Duration>, Refusal> {
    let mut values = headers.get_all(header).iter().peekable();
    if values.peek().is_none() {
        return Ok(None);
    }
    // Bytes outside visible ASCII are kept (lossily) so the grammar refuses them by name.
    let text = values
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect::<Vec<_>>()
        .join(";");
    let directives = parse_hooks_as::<StageName>(&text).map_err(|e| Refusal {
        directive: e.directive.clone(),
        detail: e.to_string(),
    })?;
    let mut ms: u64 = 0;
    for directive in &directives {
        match directive {
            HookDirective::Hold { ms: more, .. } => ms = ms.saturating_add(*more),
            other => {
                let text = format_hooks(std::slice::from_ref(other));
                return Err(Refusal {
                    detail: format!(
                        "`{text}` acts inside a handler, which this layer cannot reach: it \
                         honours only `hold`"
                    ),
                    directive: text,
                });
            }
        }
    }
    Ok((!directives.is_empty()).then(|| Duration::from_millis(ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> HeaderName {
        HeaderName::from_static("x-hook")
    }

    fn asked(values: &[&[u8]]) -> Result<Option<Duration>, Refusal> {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header(), http::HeaderValue::from_bytes(v).unwrap());
        }
        hold_asked(&headers, &header())
    }

    #[test]
    fn holds_add_up_whatever_stage_they_name() {
        assert_eq!(asked(&[]).unwrap(), None);
        assert_eq!(asked(&[b" ; "]).unwrap(), None);
        assert_eq!(
            asked(&[b"hold=queue:100;hold=fill:+0050"]).unwrap(),
            Some(Duration::from_millis(150))
        );
        assert_eq!(
            asked(&[b"hold=decode:10", b"hold=relay:5"]).unwrap(),
            Some(Duration::from_millis(15))
        );
        assert_eq!(
            asked(&[b"hold=search:20;hold=render-2:5"]).unwrap(),
            Some(Duration::from_millis(25))
        );
        assert_eq!(
            asked(&[b"hold=fill:9999999999999999999;hold=fill:9999999999999999999"]).unwrap(),
            Some(Duration::from_millis(u64::MAX))
        );
    }

    #[test]
    fn what_a_layer_cannot_honour_is_refused_naming_the_directive() {
        for (value, directive) in [
            (&b"fail=decode"[..], "fail=decode"),
            (b"hold=fill:10; panic=segment", "panic=segment"),
            (b"alloc=+12", "alloc=12"),
            (b"hold=fill", "hold=fill"),
            (b"hold=No-where:5", "hold=No-where:5"),
            (b"explode=now", "explode=now"),
        ] {
            let refusal = asked(&[value]).unwrap_err();
            assert_eq!(refusal.directive, directive, "{value:?}");
        }
        // A second field is read too: its `fail` is not dropped.
        assert_eq!(
            asked(&[b"hold=fill:1", b"fail=fill"])
                .unwrap_err()
                .directive,
            "fail=fill"
        );
        // Bytes outside visible ASCII are refused by the grammar, not read as no header.
        assert!(asked(&[b"hold=fill:5\xa0"]).is_err());
    }
}
