//! The suite proves its own checks can fail: it runs against broken variants of the reference
//! server (one piece swapped each) and every variant must fail exactly the checks listed here,
//! while the correct server passes everything. `docs/gate.md` shows this matrix,
//! `docs/implementing.md` the registry's table of checks and `docs/faults.md` the standard faults
//! and the variants only a fault reveals; tests keep them in step (`PLIMSOLL_UPDATE_DOCS=1`
//! rewrites them).
//!
//! Cost: the reference server's whole-suite run is the gate's (`tests/load.rs`, the suite's one
//! clean run against the reference server); a broken variant runs only the checks it must
//! fail (plus those that provoke the replies they judge, `Mutant::also_runs`), and must fail exactly
//! those. `PLIMSOLL_MUTANTS_FULL=1` runs the whole suite against every variant instead, which
//! also proves every ✓ cell of the matrix (about 20 minutes on a 2-core machine).

use std::collections::BTreeSet;

use plimsoll::check::{CheckArgs, execute};
use plimsoll::embedded;
use plimsoll_conformance::checks::{CheckId, REGISTRY, markdown_table};
use plimsoll_fault::standard::{QUICK, STANDARD};
use plimsoll_server::Mutant;
use plimsoll_spec::Contract;

use CheckId::Clause;

/// The checks `ids` names, as a set.
fn check_ids(ids: &[CheckId]) -> BTreeSet<CheckId> {
    ids.iter().copied().collect()
}

/// The checks `mutant` must fail: no more, no fewer (its declaration in the server's
/// `mutant/mod.rs`).
fn must_fail(mutant: Mutant) -> BTreeSet<CheckId> {
    check_ids(mutant.fails())
}

/// Whether every variant runs the whole suite (`PLIMSOLL_MUTANTS_FULL=1`).
fn full_matrix() -> bool {
    std::env::var_os("PLIMSOLL_MUTANTS_FULL").is_some_and(|v| v != "0")
}

/// The checks a run makes: all of them for the reference server (or in a full-matrix run),
/// else the variant's row and what provokes the replies its row judges.
fn args(mutant: Option<Mutant>) -> CheckArgs {
    let only = match mutant {
        Some(m) if !full_matrix() => {
            let also = check_ids(m.also_runs());
            must_fail(m).union(&also).copied().collect()
        }
        _ => Vec::new(),
    };
    CheckArgs {
        trials: Some(2),
        only,
        ..CheckArgs::embedded()
    }
}

/// The checks the suite failed, and why (for the assertion message).
async fn failing_checks(mutant: Option<Mutant>) -> (BTreeSet<CheckId>, String) {
    let mut config = embedded::check_config(false).unwrap();
    if let Some(m) = mutant {
        config = config.with_mutant(m);
    }
    let args = args(mutant);
    let subject = embedded::start(config, Some(args.relay_end()))
        .await
        .unwrap();
    let report = execute(&args, subject).await.unwrap();
    let failed = report.results.iter().filter(|r| r.verdict.is_fail());
    let why = failed
        .clone()
        .map(|r| format!("{}: {:?}", r.id, r.verdict))
        .collect::<Vec<_>>()
        .join("\n");
    let ids = failed.map(|r| r.id.check().expect("a check's result names a check id"));
    (ids.collect(), why)
}

async fn assert_caught(mutant: Mutant) {
    let expected = must_fail(mutant);
    // In the full matrix every variant runs the whole suite: one visible only elsewhere must
    // pass all of it here (its row's ✓ cells).
    if expected.is_empty() && !full_matrix() {
        // Visible only where the checker plays both ends of the bridge (tests/bridge.rs), or
        // only under a fault (tests/faults.rs).
        assert!(
            !mutant.bridge_fails().is_empty() || mutant.fault_fails().is_some(),
            "{} must fail something, here, in bridge mode or under a fault",
            mutant.name()
        );
        return;
    }
    let (failed, why) = failing_checks(Some(mutant)).await;
    mutant.report_judged("the mutation matrix");
    assert_eq!(
        failed,
        expected,
        "{}: failed {failed:?}, expected exactly {expected:?}\n{why}",
        mutant.name()
    );
}

// The matrix's reference row (the reference server passes every check) is the suite's one clean
// run against the reference server: `load::the_gate_checks_a_conforming_server_in_another_process`,
// the whole suite through `ci/gate.sh` against `plimsoll serve` in another process, with the
// values the embedded server gets.

/// One test per declared variant (`caught::NoAdmissionLimit`, …). That each of them ran and judged
/// its variant is held by `.ci/run`, from the run's own record (`ci/every-test-ran.py`).
macro_rules! mutant_tests {
    ($($variant:ident),* $(,)?) => {
        mod caught {
            $(
                #[allow(non_snake_case)]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $variant() {
                    super::assert_caught(super::Mutant::$variant).await;
                }
            )*
        }
    };
}

plimsoll_server::for_each_mutant!(mutant_tests);

/// A matrix of docs/gate.md or docs/faults.md: a column per check of `columns`, a first row for the
/// `reference` (passing everything), then a row per variant with the checks `fails` gives it.
fn matrix(
    columns: &[CheckId],
    reference: &str,
    rows: impl Iterator<Item = (Mutant, BTreeSet<CheckId>)>,
) -> String {
    let names: Vec<&str> = columns.iter().map(|id| id.as_str()).collect();
    let mut md = String::from("| broken variant | what is broken | ");
    md.push_str(&names.join(" | "));
    md.push_str(" |\n|---|---|");
    md.push_str(&"---|".repeat(columns.len()));
    md.push('\n');
    md.push_str(&format!(
        "| *({reference})* | nothing | {} |\n",
        vec!["✓"; columns.len()].join(" | ")
    ));
    for (m, failing) in rows {
        let cells: Vec<&str> = columns
            .iter()
            .map(|id| {
                if failing.contains(id) {
                    "**✗**"
                } else {
                    "✓"
                }
            })
            .collect();
        md.push_str(&format!(
            "| `{}` | {} | {} |\n",
            m.name(),
            m.what(),
            cells.join(" | ")
        ));
    }
    md
}

/// The matrix section: a column per check of the registry, a row per variant.
fn matrix_markdown() -> String {
    let columns: Vec<CheckId> = REGISTRY.iter().map(|c| c.id).collect();
    let rows = Mutant::ALL.iter().map(|&m| (m, must_fail(m)));
    matrix(&columns, "reference server", rows)
}

/// The bridge-mode matrix: the relay checks, and each variant with a bridge row
/// (`tests/bridge.rs` runs them).
fn bridge_matrix_markdown() -> String {
    let columns: Vec<CheckId> = plimsoll_spec::ClauseId::ALL
        .into_iter()
        .filter(|id| {
            Contract::embedded().clause(*id).category == plimsoll_spec::model::Category::Relay
        })
        .map(Clause)
        .collect();
    let rows = Mutant::ALL
        .iter()
        .filter(|m| !m.bridge_fails().is_empty())
        .map(|&m| (m, check_ids(m.bridge_fails())));
    matrix(&columns, "reference bridge", rows)
}

/// The fault matrix: the standard faults' checks, and each variant only a fault reveals with
/// the checks it fails under it (`tests/faults.rs` runs them; without the fault they pass).
fn fault_matrix_markdown() -> String {
    let mut md = String::from(
        "| broken variant | what is broken | fault | fails without it | fails under it |\n|---|---|---|---|---|\n",
    );
    for m in Mutant::ALL {
        if let Some((fault, ids)) = m.fault_fails() {
            let fails = check_ids(ids)
                .iter()
                .map(|id| format!("**{id} ✗**"))
                .collect::<Vec<_>>()
                .join(", ");
            md.push_str(&format!(
                "| `{}` | {} | `{fault}` | nothing | {fails} |\n",
                m.name(),
                m.what()
            ));
        }
    }
    md
}

/// The standard faults (`--fault NAME`, the matrix's columns), from their one declaration.
fn standard_faults_markdown() -> String {
    let mut md = String::from("| name | spec | checks | stands for |\n|---|---|---|---|\n");
    for (i, f) in STANDARD.iter().enumerate() {
        let set = if i < QUICK { "quick, full" } else { "full" };
        let checks = if f.only.is_empty() {
            "all".to_owned()
        } else {
            let ids: Vec<&str> = f.only.iter().map(|id| id.as_str()).collect();
            ids.join(", ")
        };
        md.push_str(&format!(
            "| `{}` ({set}) | `{}` | {checks} | {} |\n",
            f.name, f.spec, f.why
        ));
    }
    md
}

/// Architecture invariant: every clause of the reference contract has at least one broken
/// variant that must fail it, so every check is proved able to fail. (A clause the reference
/// service has no use for, T4, is failed by broken variants of another service:
/// `tests/services.rs`, held by the tidy test `every_clause_is_followed_through`.)
#[test]
fn every_clause_has_a_broken_variant() {
    for clause in Contract::embedded().clause_list() {
        let id = clause.id;
        assert!(
            Mutant::ALL
                .iter()
                .any(|m| must_fail(*m).contains(&Clause(id))),
            "no broken variant must fail {id}"
        );
    }
}

/// Fails when the section of `document` (a path from the repository root) between
/// `<!-- {name}:begin -->` and `<!-- {name}:end -->` is not `fresh`; with `PLIMSOLL_UPDATE_DOCS`
/// set, rewrites it instead. Each section lives in the document of the reader it serves.
fn docs_section_is_fresh(document: &str, name: &str, fresh: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(document);
    let doc =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{document} is unreadable: {e}"));
    let (begin, end) = (
        format!("<!-- {name}:begin -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let current = doc
        .split(&begin)
        .nth(1)
        .and_then(|rest| rest.split(&end).next());
    if current == Some(fresh) {
        return;
    }
    if std::env::var_os("PLIMSOLL_UPDATE_DOCS").is_some() {
        let (head, tail) = match (doc.split_once(&begin), doc.split_once(&end)) {
            (Some((head, _)), Some((_, tail))) => (head.to_owned(), tail.to_owned()),
            _ => (doc.clone(), String::new()),
        };
        std::fs::write(&path, format!("{head}{begin}{fresh}{end}{tail}")).unwrap();
    } else {
        panic!(
            "{document}'s {name} section is stale; run `PLIMSOLL_UPDATE_DOCS=1 cargo test -p plimsoll --test mutants docs_`"
        );
    }
}

/// One test for both generated sections: two tests rewriting the same file in parallel would
/// race (each writes the document it read, without the other's section).
#[test]
fn docs_show_the_tested_matrix_and_the_registered_checks() {
    docs_section_is_fresh("docs/gate.md", "mutation-matrix", &matrix_markdown());
    docs_section_is_fresh("docs/gate.md", "bridge-matrix", &bridge_matrix_markdown());
    docs_section_is_fresh("docs/faults.md", "fault-matrix", &fault_matrix_markdown());
    docs_section_is_fresh(
        "docs/faults.md",
        "standard-faults",
        &standard_faults_markdown(),
    );
    docs_section_is_fresh(
        "docs/implementing.md",
        "checks",
        &markdown_table(Contract::embedded()),
    );
}

/// ARCHITECTURE.md's clause table, with each row's last column (the broken variants that must
/// fail the clause) as the matrix says.
fn architecture_with_fresh_variants(doc: &str) -> String {
    let mut out = String::new();
    for line in doc.split_inclusive('\n') {
        let clause = line
            .strip_prefix("| ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|id| id.parse::<plimsoll_spec::ClauseId>().ok());
        let (Some(id), Some(cut)) = (clause, line.trim_end().rfind(" | ")) else {
            out.push_str(line);
            continue;
        };
        let under_fault = |m: &Mutant| {
            m.fault_fails()
                .filter(|(_, ids)| ids.contains(&Clause(id)))
                .map(|(fault, _)| format!("{} (under {fault})", m.name()))
        };
        let variants: Vec<String> = Mutant::ALL
            .iter()
            .filter_map(|m| {
                if must_fail(*m).contains(&Clause(id)) {
                    Some(m.name().to_owned())
                } else {
                    under_fault(m)
                }
            })
            .collect();
        out.push_str(&format!("{} | {} |\n", &line[..cut], variants.join(", ")));
    }
    out
}

/// ARCHITECTURE.md's broken-variants column is the matrix's; `PLIMSOLL_UPDATE_DOCS=1` rewrites it.
#[test]
fn architecture_names_the_variants_of_the_matrix() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path).expect("ARCHITECTURE.md is readable");
    let fresh = architecture_with_fresh_variants(&doc);
    if fresh == doc {
        return;
    }
    if std::env::var_os("PLIMSOLL_UPDATE_DOCS").is_some() {
        std::fs::write(&path, fresh).unwrap();
    } else {
        let stale: Vec<&str> = doc.lines().filter(|l| !fresh.contains(l)).collect();
        panic!(
            "ARCHITECTURE.md's broken variants differ from the matrix (`PLIMSOLL_UPDATE_DOCS=1 cargo test -p plimsoll --test mutants architecture_` rewrites them):\n{}",
            stale.join("\n")
        );
    }
}

/// The queue's order is the contract's to declare (contract language 2): against a contract
/// whose job pools' queues say `lifo`, the variant that serves the newest waiter first passes
/// T2, and the reference server, which serves arrival order, fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t2_judges_the_order_the_contract_declares() {
    let dir = tempfile::tempdir().unwrap();
    let lifo = dir.path().join("lifo.toml");
    let fifo_queue = "queue = { capacity = 0, order = \"fifo\" }";
    assert_eq!(plimsoll_spec::EMBEDDED_TOML.matches(fifo_queue).count(), 2);
    let text = plimsoll_spec::EMBEDDED_TOML
        .replace(fifo_queue, "queue = { capacity = 0, order = \"lifo\" }");
    std::fs::write(&lifo, text).unwrap();
    for (mutant, fails) in [(None, true), (Some(Mutant::Lifo), false)] {
        let mut config = embedded::check_config(false).unwrap();
        if let Some(m) = mutant {
            config = config.with_mutant(m);
        }
        let mut args = CheckArgs {
            trials: Some(2),
            only: vec![CheckId::Clause(plimsoll_spec::ClauseId::T2)],
            ..CheckArgs::embedded()
        };
        args.subject.contract = Some(lifo.clone());
        let subject = embedded::start(config, None).await.unwrap();
        let report = execute(&args, subject).await.unwrap();
        let t2 = report
            .results
            .iter()
            .find(|r| r.id.check() == Some(CheckId::Clause(plimsoll_spec::ClauseId::T2)))
            .unwrap();
        assert_eq!(t2.verdict.is_fail(), fails, "{mutant:?}: {t2:?}");
        assert!(t2.observed.contains("LIFO"), "{}", t2.observed);
    }
}
