//! Architecture invariants a test can hold (rust-analyzer's "tidy" idea): the structure
//! `ARCHITECTURE.md` promises, checked on the source tree so it cannot silently rot.
//! (That every clause has a broken variant in the mutation matrix is checked beside the matrix,
//! in `tests/mutants.rs`.)

use std::path::{Path, PathBuf};

use plimsoll_conformance::checks::{CheckId, REGISTRY};
use plimsoll_spec::{ClauseId, Contract};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_owned()
}

/// Every `.rs` file of the workspace's crates (not `target/`).
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "target" && name != "snapshots" {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for krate in ["spec", "reference-server", "conformance"] {
        walk(&root().join(krate), &mut out);
    }
    assert!(out.len() > 50, "found only {} source files", out.len());
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Following a clause is one grep of its id: it has its contract entry, its check, a row in
/// ARCHITECTURE.md and a `// clause: ID` mark at the server code that implements it.
#[test]
fn every_clause_is_followed_through() {
    let contract = Contract::embedded();
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let server: Vec<String> = rust_files()
        .iter()
        .filter(|p| p.starts_with(root().join("reference-server/src")))
        .map(|p| read(p))
        .collect();
    let mut missing = Vec::new();
    for id in ClauseId::ALL {
        let clause = contract.clause(id);
        if clause.statement.trim().is_empty() || clause.verification.trim().is_empty() {
            missing.push(format!(
                "{id}: contract entry without statement or verification"
            ));
        }
        if !REGISTRY.iter().any(|c| c.id == CheckId::Clause(id)) {
            missing.push(format!("{id}: no check in the registry"));
        }
        if !architecture.contains(&format!("\n| {id} ")) {
            missing.push(format!("{id}: no row in ARCHITECTURE.md's clause table"));
        }
        let mark = format!("// clause: {id}");
        if !server.iter().any(|text| {
            text.lines().any(|l| {
                l.trim_start()
                    .strip_prefix(&mark)
                    .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
            })
        }) {
            missing.push(format!("{id}: no `{mark}` mark in reference-server/src"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// Architecture invariant: no source file over 500 lines — a file that grows past that holds
/// more than one job and is split by what it holds.
#[test]
fn no_source_file_is_over_500_lines() {
    let long: Vec<String> = rust_files()
        .iter()
        .filter_map(|p| {
            let n = read(p).lines().count();
            (n > 500).then(|| format!("{} has {n} lines", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "{}", long.join("\n"));
}

/// Architecture invariant: the broken variants exist only in builds with the `mutants` feature.
/// The module is declared behind the feature, so any other use of it fails to compile in a
/// build without it (`.ci/run` builds the server that way).
#[test]
fn broken_variants_are_behind_the_mutants_feature() {
    let lib = read(&root().join("reference-server/src/lib.rs"));
    let lines: Vec<&str> = lib.lines().map(str::trim).collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("mod mutant;") || line.contains("use mutant::") {
            assert_eq!(
                lines.get(i.wrapping_sub(1)).copied(),
                Some("#[cfg(feature = \"mutants\")]"),
                "reference-server/src/lib.rs: `{line}` is not behind the mutants feature"
            );
        }
    }
    let cargo = read(&root().join("reference-server/Cargo.toml"));
    assert!(
        cargo.contains("\n[features]") && !cargo.contains("default = [\"mutants\"]"),
        "the mutants feature must exist and never be a default"
    );
}

/// Architecture invariant: modules import downwards. The relay protocol and the bridge never
/// import the HTTP layer (the API reaches the bridge through the state), and the checks never
/// import the reference server: they see any implementation only through HTTP.
#[test]
fn imports_point_downwards() {
    let mut wrong = Vec::new();
    for path in rust_files() {
        let rel = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = read(&path);
        let forbidden: &[&str] = if rel.starts_with("reference-server/src/relay/")
            || rel.starts_with("reference-server/src/bridge/")
        {
            &["crate::http"]
        } else if rel.starts_with("conformance/src/checks/")
            || rel.starts_with("conformance/src/report/")
            || rel == "conformance/src/target.rs"
        {
            &["plimsoll_server"]
        } else {
            &[]
        };
        for f in forbidden {
            if text.contains(f) {
                wrong.push(format!("{rel} uses {f}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
