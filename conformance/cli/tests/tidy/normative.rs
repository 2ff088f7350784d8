//! One home per fact: what an implementation must do is said in the contract's clauses and
//! implementation rules (`spec/contract.toml`, rendered into `docs/concurrency.md`), and every
//! guide links there rather than stating a normative fact of its own. A guide's sentence that
//! says what something must, shall, is required to, has to or needs to do either links a heading
//! of `docs/concurrency.md` (a clause, or the topic an implementation rule renders under) or is
//! rephrased as what it is: what the checker does, or what an operator may choose.

use std::collections::BTreeSet;

/// The words that make a sentence normative (matched as whole words, outside code spans, in
/// any letter case).
const NORMATIVE: &[&str] = &[
    "must",
    "shall",
    "is required to",
    "are required to",
    "has to",
    "have to",
    "needs to",
    "need to",
];

/// The anchors GitHub gives the headings of `markdown` (outside code fences): lowercase, letters,
/// digits, `-` and `_` kept, a space made `-`, anything else dropped.
pub fn heading_anchors(markdown: &str) -> BTreeSet<String> {
    prose_lines(markdown)
        .into_iter()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| {
            heading
                .trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|ch| match ch {
                    ' ' => Some('-'),
                    '-' | '_' => Some(ch),
                    _ if ch.is_alphanumeric() => Some(ch),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// The sentences of `markdown` that are normative and link no heading of `docs/concurrency.md`
/// (whose anchors are `rule_anchors`). Code blocks and generated sections (between
/// `<!-- NAME:begin -->` and `<!-- NAME:end -->`, written from the checks' own declarations) are
/// not prose of the guide and are skipped.
pub fn unlinked_normative_sentences(
    markdown: &str,
    rule_anchors: &BTreeSet<String>,
) -> Vec<String> {
    units(&prose_lines(markdown))
        .iter()
        .flat_map(|unit| sentences(unit))
        .filter(|sentence| is_normative(sentence) && !links_a_rule(sentence, rule_anchors))
        .map(|sentence| sentence.trim().to_owned())
        .collect()
}

/// The lines of `markdown` with code fences and generated sections blanked out.
fn prose_lines(markdown: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut generated: Option<String> = None;
    for line in markdown.lines() {
        if let Some(end) = &generated {
            if line.starts_with(end.as_str()) {
                generated = None;
            }
            out.push("");
            continue;
        }
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push("");
            continue;
        }
        if let Some(name) = line
            .strip_prefix("<!-- ")
            .and_then(|rest| rest.strip_suffix(":begin -->"))
        {
            generated = Some(format!("<!-- {name}:end -->"));
        }
        out.push(if fenced || generated.is_some() {
            ""
        } else {
            line
        });
    }
    out
}

/// Paragraphs, list items and table rows, each joined into one line.
fn units(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in lines {
        let trimmed = line.trim();
        let starts_item = trimmed.starts_with("- ")
            || trimmed.starts_with("* ")
            || trimmed.starts_with('|')
            || trimmed.starts_with('#')
            || trimmed
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if (trimmed.is_empty() || starts_item) && !current.is_empty() {
            out.push(current.join(" "));
            current.clear();
        }
        if !trimmed.is_empty() {
            current.push(trimmed);
        }
    }
    if !current.is_empty() {
        out.push(current.join(" "));
    }
    out
}

/// `unit` cut into sentences: at `.`, `!` or `?` followed by a blank and a capital (or `*`, `` ` ``,
/// `[`, `(`), and at a table's cell border; never inside a code span.
fn sentences(unit: &str) -> Vec<String> {
    let chars: Vec<char> = unit.chars().collect();
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_code = false;
    for (i, &ch) in chars.iter().enumerate() {
        current.push(ch);
        if ch == '`' {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let next_starts = chars.get(i + 1) == Some(&' ')
            && chars
                .get(i + 2)
                .is_some_and(|c| c.is_uppercase() || "*`[(".contains(*c));
        if ch == '|' || (matches!(ch, '.' | '!' | '?') && next_starts) {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

/// Whether `sentence`, code spans left out, holds one of the normative words.
fn is_normative(sentence: &str) -> bool {
    let prose: String = sentence
        .split('`')
        .step_by(2)
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    NORMATIVE.iter().any(|word| {
        prose.match_indices(word).any(|(at, _)| {
            let before = prose[..at].chars().next_back();
            let after = prose[at + word.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
    })
}

/// Whether `sentence` holds a Markdown link to a heading of `docs/concurrency.md`
/// (`[…](concurrency.md#anchor)`, `docs/concurrency.md#…` or `../docs/concurrency.md#…`).
fn links_a_rule(sentence: &str, rule_anchors: &BTreeSet<String>) -> bool {
    sentence.split("](").skip(1).any(|rest| {
        let target = rest.split(')').next().unwrap_or_default();
        target.split_once('#').is_some_and(|(file, anchor)| {
            (file == "concurrency.md" || file.ends_with("/concurrency.md"))
                && rule_anchors.contains(anchor)
        })
    })
}
