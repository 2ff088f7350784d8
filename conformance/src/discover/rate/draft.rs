//! The draft `discover --rate-limit` writes (contract language 2): one `[rate_limits.NAME]`
//! for the route with its refusal, and the embedded contract's `[tolerances]`. Each measured
//! value is followed by a comment with its evidence and a confidence; a value the probe could
//! not measure is a placeholder (`"TODO: …"`, so the loader refuses the draft until a person
//! decides it), and what the service cannot show from outside is marked
//! [`CANNOT_MEASURE`] and left to the language's default.

use std::fmt::Write as _;

use plimsoll_spec::draft::PLACEHOLDER;
use plimsoll_spec::model::{LANGUAGE, Route};

use super::{KeySeen, PACE_FACTOR, RateFindings, RatePlan};
use crate::discover::RefusalSeen;
use crate::discover::draft::{CANNOT_MEASURE, inline, pool_name, refusal_rest, status, tolerances};

/// The refusal's key in `[refusals]`.
pub const REFUSAL: &str = "rate_limited";

/// The `[contract]` table every document of the plan starts with.
fn contract_table(out: &mut String, name: &str, title: &str, summary: &str) {
    let _ = writeln!(out, "language = {LANGUAGE}\n");
    out.push_str("[contract]\n");
    let _ = writeln!(out, "name = {}", quoted(name));
    let _ = writeln!(out, "title = {}", quoted(title));
    out.push_str("version = \"0.1.0\"\n");
    let _ = writeln!(out, "summary = {}\n", quoted(summary));
}

/// A TOML string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The document discover's requests are sent under: no pool and no limit, the embedded
/// contract's tolerances.
pub(super) fn probe_document() -> Result<String, toml::ser::Error> {
    let mut out = String::new();
    contract_table(&mut out, "discover-probe", "probe", "probe");
    out.push_str("[pools]\n\n[refusals]\n\n");
    tolerances(&mut out)?;
    Ok(out)
}

/// How sure a measurement within `fraction` of its value is.
fn sureness(fraction: f64) -> &'static str {
    if fraction <= 0.05 {
        "high"
    } else if fraction <= 0.10 {
        "medium"
    } else {
        "low"
    }
}

/// The draft for `f` of `plan`'s route.
pub fn render(plan: &RatePlan, f: &RateFindings) -> Result<String, toml::ser::Error> {
    let name = pool_name(&plan.path);
    let mut out = String::new();
    out.push_str("#:schema spec/schemas/contract.schema.json\n");
    let _ = writeln!(
        out,
        "# A draft written by `plimsoll discover --rate-limit` from what {} {} of {} answered, by the",
        plan.method, plan.path, plan.target
    );
    let _ = writeln!(
        out,
        "# client's clock alone: {} ms of quiet, a burst of {} at once, then probes paced above the rate;\n\
         # {} requests in all (at most {} by the plan), never more than {} at once. Each measured value\n\
         # says what showed it and how sure that is; each place the service cannot show from outside\n\
         # is marked `{CANNOT_MEASURE}`; a value not measured is a `TODO:` placeholder.",
        f.quiet.as_millis(),
        f.burst.sent,
        f.sent,
        plan.most_sent(),
        plan.ceiling
    );
    let summary = match (&f.rate, f.refused()) {
        (Ok(r), true) => format!(
            "About {:.0} a second, {} more at once, the rest refused {}.",
            r.per_second,
            f.burst.admitted - 1,
            f.refusal.status()
        ),
        _ => "A rate limit, partly measured: see each value's note.".into(),
    };
    contract_table(
        &mut out,
        &format!("discovered-{name}"),
        &format!(
            "{} {}, its rate limit as discovered",
            plan.method, plan.path
        ),
        &summary,
    );
    out.push_str("# pools: not probed (--rate-limit); run discover without it to measure a pool\n[pools]\n\n");
    limit(&mut out, plan, f, &name)?;
    refusal(&mut out, f);
    tolerances(&mut out)?;
    Ok(out)
}

/// `[rate_limits.NAME]`.
fn limit(
    out: &mut String,
    plan: &RatePlan,
    f: &RateFindings,
    name: &str,
) -> Result<(), toml::ser::Error> {
    let _ = writeln!(out, "[rate_limits.{name}]");
    let _ = writeln!(
        out,
        "title = {}",
        quoted(&format!("{} {}", plan.method, plan.path))
    );
    let route = Route {
        method: plan.method.clone(),
        path: plan.path.split('?').next().unwrap_or_default().to_owned(),
    };
    let _ = writeln!(out, "routes = [{}]", inline(&route)?);
    rate(out, f);
    burst(out, plan, f);
    burst_mode(out, f);
    let _ = writeln!(out, "refusal = \"{REFUSAL}\"");
    key(out, f);
    let _ = writeln!(
        out,
        "request = {}  # as given (--route, --header, --body)\n",
        inline(&plan.recipe())?
    );
    Ok(())
}

/// `rate_per_second`, with the paced probe's evidence, or a placeholder saying why not.
fn rate(out: &mut String, f: &RateFindings) {
    let _ = match &f.rate {
        Ok(r) => writeln!(
            out,
            "rate_per_second = {}  # {} tokens came back over {:.0} ms under {} probes {} ms apart ({PACE_FACTOR}× a first estimate of {:.1}/s from {}): {:.2}/s, within {:.0} %; confidence {}",
            r.per_second.round().max(1.0) as u32,
            r.refills,
            r.over.as_secs_f64() * 1000.0,
            r.probes,
            r.gap.as_millis(),
            r.first.0,
            r.first.1,
            r.per_second,
            100.0 * r.uncertainty(),
            sureness(r.uncertainty())
        ),
        Err(why) => writeln!(
            out,
            "rate_per_second = {}",
            quoted(&format!(
                "{PLACEHOLDER} the sustained rate, requests a second: {why}"
            ))
        ),
    };
}

/// `burst`, from the burst's admitted, or a placeholder when the ceiling admitted them all.
fn burst(out: &mut String, plan: &RatePlan, f: &RateFindings) {
    let b = &f.burst;
    if !f.refused() {
        let _ = writeln!(
            out,
            "burst = {}",
            quoted(&format!(
                "{PLACEHOLDER} at least {}: all {} sent at once were admitted; raise --ceiling",
                b.sent.saturating_sub(1),
                b.sent
            ))
        );
        return;
    }
    let refill = f.refill();
    let (sure, note) = match refill {
        Some(r) if r > f.quiet => (
            "low",
            format!(
                "; at the rate the bucket takes {} ms to refill, longer than the quiet: raise --quiet-ms above it",
                r.as_millis()
            ),
        ),
        Some(_) => (
            "high",
            " (the bucket refills well within the quiet)".to_owned(),
        ),
        None => ("medium", String::new()),
    };
    let _ = writeln!(
        out,
        "burst = {}  # {} of {} sent at once (over {:.1} ms) after {} ms of quiet were admitted: the bucket, burst + 1{note}; confidence {sure}",
        b.admitted - 1,
        b.admitted,
        b.sent,
        b.sending.as_secs_f64() * 1000.0,
        plan.quiet.as_millis()
    );
}

/// `burst_mode`, from how the burst's admitted answers spread beside the rate.
fn burst_mode(out: &mut String, f: &RateFindings) {
    let spread = f.burst.spread.as_millis();
    let _ = match (f.mode, &f.rate) {
        (None, _) => writeln!(
            out,
            "# burst_mode: one request admitted at once, so `delay` and `nodelay` are the same; the default (`delay`) is left"
        ),
        (Some(mode), Ok(r)) => {
            let due = (f.burst.admitted - 1) as f64 * 1000.0 / r.per_second;
            let sure = if due >= 4.0 * f.slack_ms as f64 {
                "high"
            } else {
                "low (the delays are close to T4's slack)"
            };
            writeln!(
                out,
                "burst_mode = \"{}\"  # the {} admitted answered over {spread} ms; `delay` spaces them over {due:.0} ms at the rate; confidence {sure}",
                mode.as_str(),
                f.burst.admitted
            )
        }
        (Some(mode), Err(_)) => writeln!(
            out,
            "burst_mode = \"{}\"  # the {} admitted answered over {spread} ms (the rate unknown); confidence low",
            mode.as_str(),
            f.burst.admitted
        ),
    };
}

/// `key`: the named header when another value had a bucket of its own; else the default
/// (everyone's), marked, since one client cannot tell everyone's from each address's.
fn key(out: &mut String, f: &RateFindings) {
    let words = "whether everyone shares the bucket or each client address has its own";
    let _ = match &f.key {
        KeySeen::ByHeader(header) => writeln!(
            out,
            "key = {{ header = {} }}  # in two trials, another {header} was admitted right after the first's was refused (its bucket spent); confidence medium",
            quoted(header)
        ),
        KeySeen::NotProbed => writeln!(
            out,
            "# key: not probed (name a header that may key it with --key-header); {words}: {CANNOT_MEASURE} from one client: everyone's (the default) left"
        ),
        KeySeen::Shared(header) => writeln!(
            out,
            "# key: not {header}: another value was refused too while the first's bucket was spent; {words}: {CANNOT_MEASURE} from one client: everyone's (the default) left"
        ),
        KeySeen::Unclear(header, why) => writeln!(
            out,
            "# key: {header} not told: {why}; everyone's (the default) left, {CANNOT_MEASURE} from one client"
        ),
    };
}

/// `[refusals.rate_limited]`: the status, the hint, the connection, each with its evidence.
fn refusal(out: &mut String, f: &RateFindings) {
    let r = &f.refusal;
    let _ = writeln!(out, "[refusals.{REFUSAL}]");
    if r.statuses.is_empty() {
        let _ = writeln!(
            out,
            "status = {}",
            quoted(&format!(
                "{PLACEHOLDER} the status a request past the burst gets: none was refused"
            ))
        );
        out.push('\n');
        return;
    }
    status(out, r, ("T4", f.refusal_latency_ms));
    hint(out, r);
    refusal_rest(out, r, f.connection.as_ref());
}

/// The hint: a constant `Retry-After` when every refusal gave the same seconds, else none,
/// with what was seen.
fn hint(out: &mut String, r: &RefusalSeen) {
    let seen = r.hint();
    let _ = match r.constant_delay() {
        _ if seen == "absent" => {
            writeln!(out, "# hint: no Retry-After on any refusal: none declared")
        }
        Some(seconds) => writeln!(
            out,
            "hint = {{ header = \"Retry-After\", seconds = {seconds} }}  # Retry-After {seen}, on {} refusals; confidence high",
            r.retry_after.len()
        ),
        None => writeln!(
            out,
            "# hint: Retry-After {seen}: not constant, none declared; how it is estimated: {CANNOT_MEASURE}"
        ),
    };
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use plimsoll_spec::model::BurstMode;

    use super::*;
    use crate::discover::rate::{BurstSeen, RateSeen};

    fn plan() -> RatePlan {
        RatePlan {
            target: "http://127.0.0.1:1".into(),
            method: "GET".into(),
            path: "/api".into(),
            body: None,
            headers: Default::default(),
            key_header: Some("X-Api-Key".into()),
            ceiling: 8,
            quiet: Duration::from_secs(2),
        }
    }

    fn findings(rate: Result<RateSeen, String>, key: KeySeen) -> RateFindings {
        let refusal = RefusalSeen {
            statuses: vec![429, 429],
            bodies: vec![crate::discover::BodyShape::Empty; 2],
            retry_after: vec![Some("1".into()), Some("1".into())],
            latencies_ms: vec![1.0, 2.0],
            ..RefusalSeen::default()
        };
        RateFindings {
            quiet: Duration::from_secs(2),
            burst: BurstSeen {
                sent: 8,
                admitted: 3,
                sending: Duration::from_millis(1),
                spread: Duration::from_millis(2),
            },
            mode: Some(BurstMode::Nodelay),
            rate,
            refusal,
            key,
            connection: None,
            sent: 60,
            refusal_latency_ms: 100,
            slack_ms: 40,
        }
    }

    #[test]
    fn a_measured_limit_is_a_contract_with_its_values() {
        let rate = RateSeen {
            per_second: 4.96,
            first: (5.1, "test"),
            gap: Duration::from_millis(50),
            probes: 44,
            refills: 6,
            over: Duration::from_millis(1008),
        };
        let text = render(
            &plan(),
            &findings(Ok(rate), KeySeen::ByHeader("X-Api-Key".into())),
        )
        .unwrap();
        let c = plimsoll_spec::Contract::from_toml(&text, "draft")
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let l = &c.rate_limits["api"];
        assert_eq!(
            (l.rate_per_second, l.burst, l.burst_mode),
            (5, 2, BurstMode::Nodelay),
            "{text}"
        );
        assert_eq!(
            l.key,
            plimsoll_spec::model::LimitKey::Header("X-Api-Key".into())
        );
        assert_eq!(c.refusal_status(&c.refusals[&l.refusal]), Some(429));
        assert!(text.contains("within 5 %; confidence high"), "{text}");
    }

    #[test]
    fn a_rate_not_measured_is_a_placeholder_and_an_unknown_key_is_marked() {
        let text = render(
            &plan(),
            &findings(Err("not measured: why".into()), KeySeen::NotProbed),
        )
        .unwrap();
        let left = plimsoll_spec::draft::placeholders(&text).unwrap();
        assert_eq!(left.len(), 1, "{text}");
        assert!(text.contains("# key: not probed"), "{text}");
        assert!(text.contains(CANNOT_MEASURE), "{text}");
        assert!(plimsoll_spec::Contract::from_toml(&text, "draft").is_err());
    }
}
