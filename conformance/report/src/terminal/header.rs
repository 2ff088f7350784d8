//! The lines before the first check: what is checked and by which values, so a reader knows
//! what the verdicts below judge before reading them.

use plimsoll_conformance::verdict::Manifest;
use plimsoll_spec::Adopted;
use serde_json::Value;

use super::is_load;
use super::style::{BOLD, Style, paint};
use super::text::{one_line, wrap};

/// What the run checks, before the first check: the target (or the embedded server, with the
/// values it was scaled to), the contract, and how the checks run.
///
/// ```text
/// Checking the embedded reference server on 127.0.0.1:41733
///   scaled: digitize timeout 2 s, export timeout 1 s, upload read timeout 1 s, digitize queue 2
///   contract 1.0.0 (3f2a9c1b), 5 trials per timing check, strict off
/// ```
pub fn header(manifest: &Manifest, style: Style) -> String {
    let embedded = manifest.mode == "embedded";
    let what = if embedded {
        let address = manifest
            .target
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        format!("the embedded reference server on {address}")
    } else {
        one_line(&manifest.target)
    };
    let mut out = paint(&format!("Checking {what}"), BOLD, style.color);
    out.push('\n');

    let mut values = match (&manifest.claim_unreadable, manifest.adopted.is_empty()) {
        (Some(_), _) => "its claim is unreadable: judged by the contract's own values".to_string(),
        (None, true) => "judged by the contract's own values".to_string(),
        (None, false) => {
            let words: Vec<String> = manifest.adopted.iter().map(adopted_words).collect();
            let lead = if embedded {
                "scaled"
            } else {
                "adopted from its claim"
            };
            format!("{lead}: {}", words.join(", "))
        }
    };
    if !manifest.refused.is_empty() {
        values.push_str(&format!(
            "; {} claimed value(s) refused (see `contract`)",
            manifest.refused.len()
        ));
    }
    let run = if is_load(manifest) {
        format!("seed {}", manifest.seed)
    } else {
        format!(
            "{} trial{} per timing check, strict {}",
            manifest.trials,
            if manifest.trials == 1 { "" } else { "s" },
            if manifest.strict {
                "on (a skip fails)"
            } else {
                "off"
            }
        )
    };
    let hash: String = manifest.contract_hash.chars().take(8).collect();
    let contract = format!(
        "contract {} ({hash}), {run}",
        one_line(&manifest.contract_version)
    );
    let fault = manifest
        .fault
        .as_ref()
        .map(|f| fault_line(f, manifest.seed));
    for line in [Some(values), Some(contract), fault].into_iter().flatten() {
        // `wrap` indents the continuation lines itself.
        out.push_str("  ");
        out.push_str(&wrap(&one_line(&line), 2, 4, style.width).join("\n"));
        out.push('\n');
    }
    out
}

/// The fault a run went through and every bound it lengthened, each with its reason:
/// `through latency:latency=50,jitter=10,stream=both (seed 1); adjusted: refusal latency: 100 ms
/// + 2 × 60 ms (…)`.
fn fault_line(fault: &plimsoll_fault::Adjustments, seed: u64) -> String {
    let spec = fault.fault.as_deref().unwrap_or("no fault");
    let adjusted: Vec<&str> = fault.adjusted.iter().map(|a| a.why.as_str()).collect();
    let adjusted = if let Some(why) = fault.unobservable() {
        format!("every check not applicable: {why}")
    } else if adjusted.is_empty() {
        "no bound adjusted (the fault adds no time a bound can state)".to_owned()
    } else {
        format!("adjusted: {}", adjusted.join("; "))
    };
    format!("through {spec} (seed {seed}); {adjusted}")
}

/// An adopted value in words, from its dotted path and the claimed value: the pool or section
/// it belongs to, then the field. `pools.digitize.deadline_ms` = 2000 reads `digitize timeout
/// 2 s`, `pools.digitize.queue.capacity` = 2 reads `digitize queue 2`,
/// `upload.read_timeout_ms` = 250 reads `upload read timeout 250 ms`,
/// `connections.head_timeout_ms` = 2000 reads `head timeout 2 s`, `…memory_cap_mb` = 512 reads
/// `memory cap 512 MB`, a flag reads `on`/`off`.
pub fn adopted_words(a: &Adopted) -> String {
    let path = &a.difference.path;
    let parts: Vec<&str> = path.split('.').collect();
    let (owner, field) = match parts.as_slice() {
        ["pools", pool, "queue", "capacity"] => (Some(*pool), "queue"),
        ["pools", pool, "deadline_ms"] => (Some(*pool), "timeout_ms"),
        ["pools", pool, .., field] => (Some(*pool), *field),
        ["upload", field] => (Some("upload"), *field),
        [.., field] => (None, *field),
        [] => (None, path.as_str()),
    };
    let theirs = a.difference.theirs.as_ref();
    let (name, value) = if let Some(name) = field.strip_suffix("_ms") {
        let value = match theirs.and_then(Value::as_f64) {
            Some(ms) if ms >= 1000.0 && ms % 100.0 == 0.0 => {
                format!("{} s", trim_zeros(ms / 1000.0))
            }
            Some(ms) => format!("{} ms", trim_zeros(ms)),
            None => plain(theirs),
        };
        (name, value)
    } else if let Some(name) = field.strip_suffix("_mb") {
        (name, format!("{} MB", plain(theirs)))
    } else {
        let value = match theirs {
            Some(Value::Bool(on)) => if *on { "on" } else { "off" }.to_string(),
            other => plain(other),
        };
        (field, value)
    };
    let name = name.replace('_', " ");
    let words = match owner {
        Some(owner) => format!("{owner} {name} {value}"),
        None => format!("{name} {value}"),
    };
    one_line(&words)
}

fn trim_zeros(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

fn plain(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "(absent)".into(),
    }
}
