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
