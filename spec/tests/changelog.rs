//! The changelog describes the contract: its newest entry is the contract's version (a bump
//! without an entry fails here), versions strictly decrease, every entry says what to change.

use plimsoll_spec::changelog::CHANGELOG_TOML;
use plimsoll_spec::{Changelog, Contract};

fn parsed(text: &str) -> Changelog {
    toml::from_str(text).expect("the changelog parses")
}

#[test]
fn the_embedded_changelog_describes_the_embedded_contract() {
    let violations = parsed(CHANGELOG_TOML).violations(Contract::embedded());
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn a_version_bump_without_an_entry_fails() {
    let mut bumped = Contract::embedded().clone();
    bumped.contract.version = "9.0.0".into();
    let violations = Changelog::embedded().violations(&bumped);
    assert!(
        violations
            .iter()
            .any(|v| v.contains("add an entry for 9.0.0")),
        "{violations:#?}"
    );
}

#[test]
fn entries_out_of_order_or_without_steps_fail() {
    let text = r#"
[[release]]
version = "1.0.0"
date = "2026-11-30"
summary = "first"
clauses = []
must_change = ["everything"]

[[release]]
version = "1.1.0"
date = "30/11/2026"
summary = "second"
clauses = ["B1"]
must_change = []
"#;
    let mut contract = Contract::embedded().clone();
    contract.contract.version = "1.0.0".into();
    let violations = parsed(text).violations(&contract);
    let all = violations.join("\n");
    assert!(all.contains("1.0.0 must be a newer"), "{all}");
    assert!(all.contains("1.1.0: a summary and at least one"), "{all}");
    assert!(all.contains("is not YYYY-MM-DD"), "{all}");
}

/// Every released contract's text, oldest first: `spec/history/contract-X.toml`, then the
/// embedded one.
fn releases() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("history");
    let mut found: Vec<(Vec<u64>, String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let version = name
                .strip_prefix("contract-")?
                .strip_suffix(".toml")?
                .to_owned();
            let key = version.split('.').map(|n| n.parse().unwrap()).collect();
            Some((
                key,
                version,
                std::fs::read_to_string(dir.join(&name)).unwrap(),
            ))
        })
        .collect();
    found.sort();
    let current = Contract::embedded().contract.version.clone();
    found.push((Vec::new(), current, plimsoll_spec::EMBEDDED_TOML.to_owned()));
    found.into_iter().map(|(_, v, text)| (v, text)).collect()
}

/// Two consecutive releases as tables to compare: a language-1 release before a language-2
/// one is first rewritten by `contract upgrade`, so only what the upgrade does not carry over
/// counts as changed.
fn comparable(before: &str, after: &str) -> (toml::Table, toml::Table) {
    let language_2 = |text: &str| text.contains("\nlanguage = ") || text.starts_with("language = ");
    let before = if language_2(after) && !language_2(before) {
        plimsoll_spec::upgrade::upgrade(before).unwrap()
    } else {
        before.to_owned()
    };
    (
        toml::from_str(&before).unwrap(),
        toml::from_str(after).unwrap(),
    )
}

/// Prose and what only describes (titles, rationale, sources): not what an implementation
/// serves as a value or reads.
const PROSE: [&str; 9] = [
    "title",
    "summary",
    "statement",
    "rationale",
    "verification",
    "source",
    "description",
    "section",
    "doc",
];

/// Every value of `doc` an implementation serves or reads, by path; the entries of an array of
/// tables keyed by their `id`, `code`, `name` or `env`.
fn leaves(doc: &toml::Table) -> std::collections::BTreeMap<Vec<String>, toml::Value> {
    fn walk(
        v: &toml::Value,
        path: &mut Vec<String>,
        out: &mut std::collections::BTreeMap<Vec<String>, toml::Value>,
    ) {
        match v {
            toml::Value::Table(t) => {
                for (k, x) in t.iter().filter(|(k, _)| !PROSE.contains(&k.as_str())) {
                    path.push(k.clone());
                    walk(x, path, out);
                    path.pop();
                }
            }
            toml::Value::Array(items)
                if items.iter().all(toml::Value::is_table) && !items.is_empty() =>
            {
                for (i, x) in items.iter().enumerate() {
                    let key = ["id", "code", "name", "env"]
                        .iter()
                        .find_map(|k| x.get(k).and_then(toml::Value::as_str))
                        .map_or(i.to_string(), str::to_owned);
                    path.push(key);
                    walk(x, path, out);
                    path.pop();
                }
            }
            other => {
                out.insert(path.clone(), other.clone());
            }
        }
    }
    let mut doc = doc.clone();
    doc.remove("sources");
    if let Some(toml::Value::Table(meta)) = doc.get_mut("contract") {
        meta.remove("version");
    }
    let mut out = std::collections::BTreeMap::new();
    walk(&toml::Value::Table(doc), &mut Vec::new(), &mut out);
    out
}

/// Whether `text` names `word` as a word of its own (not inside a longer name).
fn names(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back().is_none_or(|c| !part(c));
        let after = text[at + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !part(c));
        before && after
    })
}

/// The changed values of `before` → `after` that no step of `steps` names: by the entry they
/// belong to (`clauses.B4`, `B4`, a rule's or an error's id, a pool), by their own field name,
/// or, for an entry added or removed whole, by its table (`[[implementation]]`).
fn unnamed(before: &toml::Table, after: &toml::Table, steps: &str) -> Vec<String> {
    let (a, b) = (leaves(before), leaves(after));
    let entries = |m: &std::collections::BTreeMap<Vec<String>, toml::Value>| {
        m.keys()
            .map(|p| p.iter().take(2).cloned().collect::<Vec<_>>())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let (ea, eb) = (entries(&a), entries(&b));
    let paths: std::collections::BTreeSet<&Vec<String>> = a.keys().chain(b.keys()).collect();
    paths
        .into_iter()
        .filter(|p| a.get(*p) != b.get(*p))
        .filter(|p| {
            let entry: Vec<String> = p.iter().take(2).cloned().collect();
            let whole = ea.contains(&entry) != eb.contains(&entry);
            let table = &p[0];
            // The entry (`clauses.B4`), then every name below the table that is not one of the
            // language's own containers (`value`, `overrides`): a clause or rule id, a metric,
            // an error code, a field.
            const GENERIC: [&str; 7] = [
                "value",
                "overrides",
                "env",
                "field",
                "help",
                "rule",
                "params",
            ];
            let mut words = vec![entry.join(".")];
            words.extend(
                p.iter()
                    .skip(1)
                    .filter(|w| !GENERIC.contains(&w.as_str()) && w.parse::<usize>().is_err())
                    .filter(|w| w.len() >= 2)
                    .cloned(),
            );
            let named = words.iter().any(|w| names(steps, w))
                || (whole
                    && [format!("[[{table}]]"), format!("[{table}]")]
                        .iter()
                        .any(|w| steps.contains(w.as_str())));
            !named
        })
        .map(|p| p.join("."))
        .collect()
}

/// The changelog is an upgrade path: between every two releases, each value an implementation
/// serves or reads that changed is named by a step of the newer release's "What you must
/// change" (its clause, rule, code, table or field), and every step names where it comes from
/// (a rule or a clause). Every release is in `spec/history/`, so this runs from a tarball.
#[test]
fn every_change_between_releases_has_a_step_naming_it() {
    let changelog = Changelog::embedded();
    let releases = releases();
    assert!(
        releases.len() >= 9,
        "every release is kept: {}",
        releases.len()
    );
    let mut missing = Vec::new();
    for pair in releases.windows(2) {
        let ((_, before), (version, after)) = (&pair[0], &pair[1]);
        let (before, after) = comparable(before, after);
        let release = changelog
            .release
            .iter()
            .find(|r| &r.version == version)
            .unwrap_or_else(|| panic!("{version} has no changelog entry"));
        let steps = release.must_change.join("\n");
        for path in unnamed(&before, &after, &steps) {
            missing.push(format!("{version}: `{path}` changed and no step names it"));
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

/// The comparison can fail: a value changed with no step naming it is found, and a step naming
/// it satisfies it.
#[test]
fn a_change_without_a_step_is_found() {
    let before: toml::Table = toml::from_str(plimsoll_spec::EMBEDDED_TOML).unwrap();
    let planted = plimsoll_spec::EMBEDDED_TOML.replacen(
        "max_frame_body_bytes = 16384",
        "max_frame_body_bytes = 8192",
        1,
    );
    let after: toml::Table = toml::from_str(&planted).unwrap();
    assert_eq!(
        unnamed(&before, &after, "Serve the new document."),
        ["clauses.R5.value.max_frame_body_bytes"]
    );
    assert!(unnamed(&before, &after, "Split bodies at 8 KB (`clauses.R5`).").is_empty());
}

/// Every step says where it comes from, so an implementer can read the rule behind it: a rule
/// (`` `retry-after-estimator` ``), a clause (`T3`, `clauses.T3`) or a table of the contract
/// (`` `[pools]` ``, `` `language` ``). The first release's one step is the whole contract.
#[test]
fn every_step_names_the_rule_or_clause_it_comes_from() {
    let mut rules = std::collections::BTreeSet::new();
    for (_, text) in releases() {
        let doc: toml::Table = toml::from_str(&text).unwrap();
        for rule in doc
            .get("implementation")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
        {
            rules.insert(rule["id"].as_str().unwrap().to_owned());
        }
    }
    let clauses: Vec<&str> = plimsoll_spec::ClauseId::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    let mut bare = Vec::new();
    for release in Changelog::embedded()
        .release
        .iter()
        .filter(|r| r.version != "1.0.0")
    {
        for step in &release.must_change {
            let cites = rules.iter().any(|r| step.contains(&format!("`{r}`")))
                || clauses.iter().any(|c| names(step, c))
                || step.contains("`[")
                || step.contains("`language`");
            if !cites {
                bare.push(format!("{}: {step}", release.version));
            }
        }
    }
    assert!(
        bare.is_empty(),
        "steps that name no rule or clause: {bare:#?}"
    );
}
