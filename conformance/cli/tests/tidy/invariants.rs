//! ARCHITECTURE.md's numbered invariants and the tests that hold them: every rule names at least
//! one test as `` `file.rs::test` ``, and every test named exists (its file, and a `fn` of that
//! name in it), so no rule of the document stands on a test that is not there.

use std::path::Path;

/// One numbered rule of the section: its number, its first words, the tests it names.
#[derive(Debug, PartialEq, Eq)]
pub struct Invariant {
    pub number: usize,
    pub title: String,
    pub tests: Vec<String>,
}

/// The numbered rules of `## Architecture invariants` in `text` (each runs from its number to the
/// next number or the section's end).
pub fn invariants(text: &str) -> Vec<Invariant> {
    let section = text
        .split("\n## Architecture invariants")
        .nth(1)
        .map(|rest| rest.split("\n## ").next().unwrap_or(rest))
        .unwrap_or_default();
    let mut out: Vec<Invariant> = Vec::new();
    for line in section.lines() {
        let trimmed = line.trim_start();
        let numbered = trimmed.split_once(". ").filter(|(n, _)| {
            !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) && line == trimmed
        });
        if let Some((number, rest)) = numbered {
            out.push(Invariant {
                number: number.parse().unwrap_or(0),
                title: rest.chars().take(60).collect(),
                tests: Vec::new(),
            });
        }
        if let Some(current) = out.last_mut() {
            current.tests.extend(named_tests(line));
        }
    }
    out
}

/// The `` `file.rs::test` `` references of a line.
fn named_tests(line: &str) -> Vec<String> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| {
            quoted
                .split_once(".rs::")
                .is_some_and(|(file, name)| !file.contains(' ') && !name.is_empty())
        })
        .map(str::to_owned)
        .collect()
}

/// Why the test `reference` (`file.rs::a::b`) is not there under `root`, if it is not: its file
/// is missing, or the file has no `fn b`.
pub fn missing(root: &Path, reference: &str) -> Option<String> {
    let (file, path) = reference.split_once(".rs::")?;
    let file = format!("{file}.rs");
    let name = path.rsplit("::").next().unwrap_or(path);
    match std::fs::read_to_string(root.join(&file)) {
        Err(_) => Some(format!("{reference}: no file {file}")),
        Ok(text) if !text.contains(&format!("fn {name}(")) => {
            Some(format!("{reference}: {file} has no `fn {name}`"))
        }
        Ok(_) => None,
    }
}

/// Every problem of the section: no rule at all, rules out of order, a rule naming no test, a
/// test named that is not there.
pub fn problems(root: &Path, text: &str) -> Vec<String> {
    let rules = invariants(text);
    let mut out = Vec::new();
    if rules.is_empty() {
        out.push("no numbered rule under `## Architecture invariants`".to_owned());
    }
    for (i, rule) in rules.iter().enumerate() {
        if rule.number != i + 1 {
            out.push(format!("rule {} is numbered {}", i + 1, rule.number));
        }
        if rule.tests.is_empty() {
            out.push(format!(
                "rule {} ({}…) names no test",
                rule.number, rule.title
            ));
        }
        out.extend(rule.tests.iter().filter_map(|t| missing(root, t)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_without_a_test_or_naming_a_missing_one_is_caught() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let text = "# A\n\n## Architecture invariants\n\nIntro `x.rs::y`.\n\n\
                    1. **One.** Held by `conformance/cli/tests/tidy/invariants.rs::invariants`.\n\
                    2. **Two**, wrapped\n   over lines. Held by nothing.\n\
                    3. **Three.** Held by `conformance/cli/tests/tidy/main.rs::no_such_test`,\n   \
                       `nowhere/at_all.rs::x`.\n\n## Decisions\n\n4. Not a rule.\n";
        assert_eq!(
            problems(&root, text),
            [
                "rule 2 (**Two**, wrapped…) names no test",
                "conformance/cli/tests/tidy/main.rs::no_such_test: conformance/cli/tests/tidy/main.rs has no `fn no_such_test`",
                "nowhere/at_all.rs::x: no file nowhere/at_all.rs"
            ]
        );
        assert_eq!(invariants(text).len(), 3);
    }
}
