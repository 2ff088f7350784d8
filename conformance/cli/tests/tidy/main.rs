//! Architecture invariants a test can hold (rust-analyzer's "tidy" idea): the structure
//! `ARCHITECTURE.md` promises, checked on the source tree so it cannot silently rot. Where a
//! crate boundary can hold a rule the compiler holds it, and this test only checks that the
//! boundaries are the ones drawn; every rule below has a test of its own that it can fail.
//! (That every clause has a broken variant in the mutation matrix is checked beside the matrix,
//! in `tests/mutants.rs`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use plimsoll_conformance::checks::{Check, CheckId, REGISTRY, coverage};
use plimsoll_spec::{ClauseId, Contract};

mod disk;
mod features;
mod invariants;
mod literals;
mod normative;

/// The workspace root (this crate is `conformance/cli`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the crate sits two folders below the workspace root")
        .to_owned()
}

/// Every path this test names, relative to the root. A rule about a path that no longer exists
/// cannot fail, so each must exist (`every_path_the_rules_name_exists`).
const NAMED: &[&str] = &[
    "ARCHITECTURE.md",
    "spec",
    "reference-server/engine",
    "reference-server",
    "reference-server/src",
    "reference-server/src/lib.rs",
    "reference-server/src/relay",
    "reference-server/src/bridge",
    "conformance",
    "conformance/src/checks",
    "conformance/report/src",
    "conformance/src/remote",
    "conformance/cli",
];

/// The crates and the workspace crates each may depend on (normal dependencies): the one-way
/// flow contract → engine → server, contract → fault proxy → conformance library → load
/// profiles and reports, everything → the binary; contract → the hold layer services add.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("spec", "plimsoll-spec", &[]),
    (
        "reference-server/engine",
        "plimsoll-engine",
        &["plimsoll-spec"],
    ),
    (
        "reference-server",
        "plimsoll-server",
        &["plimsoll-spec", "plimsoll-engine"],
    ),
    ("conformance/fault", "plimsoll-fault", &["plimsoll-spec"]),
    (
        "conformance",
        "plimsoll-conformance",
        &["plimsoll-spec", "plimsoll-fault"],
    ),
    (
        "conformance/load",
        "plimsoll-load",
        &["plimsoll-spec", "plimsoll-fault", "plimsoll-conformance"],
    ),
    (
        "conformance/report",
        "plimsoll-report",
        &["plimsoll-spec", "plimsoll-fault", "plimsoll-conformance"],
    ),
    ("adapters/tower", "plimsoll-tower", &["plimsoll-spec"]),
    (
        "examples/rust-service",
        "plimsoll-example-service",
        &["plimsoll-tower"],
    ),
    (
        "conformance/cli",
        "plimsoll",
        &[
            "plimsoll-spec",
            "plimsoll-server",
            "plimsoll-fault",
            "plimsoll-conformance",
            "plimsoll-load",
            "plimsoll-report",
        ],
    ),
];

/// Source folders whose files may not import a module: the relay protocol and the bridge never
/// import the HTTP layer (the API reaches the bridge through the state).
const FORBIDDEN_IMPORTS: &[(&str, &str)] = &[
    ("reference-server/src/relay", "crate::http"),
    ("reference-server/src/bridge", "crate::http"),
];

/// Functions allowed over [`MAX_FN_LINES`], each with why: table-like or generated code only.
/// Empty: every function of the crates' sources reads at once.
const LONG_FN_ALLOWLIST: &[(&str, &str)] = &[];

/// The server's files that may touch the disk outside `spawn_blocking`, each with why.
const DISK_ALLOWED: &[(&str, &str)] = &[
    (
        "reference-server/src/worker.rs",
        "the worker's blocking thread: the job's temp dir is made and removed there",
    ),
    (
        "reference-server/src/logging/writer.rs",
        "the log writer's own thread (the sink is opened at start)",
    ),
    (
        "reference-server/src/server.rs",
        "before the server serves and after it stopped",
    ),
    (
        "reference-server/src/embedded.rs",
        "the embedded server's workspace, made before it starts",
    ),
    (
        "reference-server/src/mutant",
        "broken variants' temp cleaners, which run on the worker's thread",
    ),
];

/// The calls of the server's `rel` (code, not tests) that touch the disk outside a blocking
/// closure and outside [`DISK_ALLOWED`], read from its syntax tree (`disk`), as `rel:line: path`.
/// Under writeback one can wait for seconds (an `rmdir` holds its parent directory, and a
/// `read_dir` of it waits): on one of the server's async threads that stalls every request the
/// thread serves — measured, refusals answered after 2.5 s while the disk flushed a build.
fn disk_calls_on_async_threads(rel: &str, text: &str) -> Vec<String> {
    if !rel.starts_with("reference-server/src/")
        || DISK_ALLOWED.iter().any(|(at, _)| rel.starts_with(at))
    {
        return Vec::new();
    }
    match disk::on_async_threads(text) {
        Ok(calls) => calls.iter().map(|call| format!("{rel}:{call}")).collect(),
        Err(e) => vec![format!("{rel}: does not parse: {e}")],
    }
}

/// Architecture invariant: the server touches the disk only on blocking threads.
#[test]
fn the_server_touches_the_disk_only_on_blocking_threads() {
    let wrong: Vec<String> = rust_files()
        .iter()
        .flat_map(|path| disk_calls_on_async_threads(&relative(path), &read(path)))
        .collect();
    assert!(
        wrong.is_empty(),
        "disk calls on an async thread (use spawn_blocking):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_disk_call_on_an_async_thread_is_caught() {
    let handler = "pub async fn metrics(state: State) -> Response {\n    \
                   let temp = plimsoll_engine::temp::count(&root);\n    \
                   // temp::count is slow\n    \
                   let ok = spawn_blocking(move || temp::count(&root));\n}\n";
    assert_eq!(
        disk_calls_on_async_threads("reference-server/src/http/info.rs", handler),
        ["reference-server/src/http/info.rs:2: plimsoll_engine::temp::count"]
    );
    assert!(disk_calls_on_async_threads("reference-server/src/worker.rs", handler).is_empty());
}

/// A function longer than this holds more than one phase; cut it into phases with typed state.
const MAX_FN_LINES: usize = 80;

/// Every `.rs` file under `dir`, skipping build folders (cargo marks each with `CACHEDIR.TAG`,
/// whatever its name) and insta's snapshots.
fn rust_files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                let build_folder = path.join("CACHEDIR.TAG").exists();
                if !build_folder && entry.file_name() != "snapshots" && entry.file_name() != ".git"
                {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// Every `.rs` file of the workspace's crates.
fn rust_files() -> Vec<PathBuf> {
    let out = rust_files_under(&root());
    assert!(out.len() > 50, "found only {} source files", out.len());
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The paths of `named` that do not exist under `root`.
fn missing_paths<'a>(root: &Path, named: &[&'a str]) -> Vec<&'a str> {
    named
        .iter()
        .copied()
        .filter(|p| !root.join(p).exists())
        .collect()
}

#[test]
fn every_path_the_rules_name_exists() {
    let crates: Vec<&str> = CRATES.iter().map(|(dir, _, _)| *dir).collect();
    let forbidden: Vec<&str> = FORBIDDEN_IMPORTS.iter().map(|(dir, _)| *dir).collect();
    let disk: Vec<&str> = DISK_ALLOWED.iter().map(|(at, _)| *at).collect();
    let allowlisted: Vec<&str> = LONG_FN_ALLOWLIST
        .iter()
        .map(|(at, _)| at.split_once("::").map_or(*at, |(file, _)| file))
        .collect();
    let mut missing = missing_paths(&root(), NAMED);
    missing.extend(missing_paths(&root(), DOCUMENTS));
    missing.extend(missing_paths(&root(), &crates));
    missing.extend(missing_paths(&root(), &forbidden));
    missing.extend(missing_paths(&root(), &disk));
    missing.extend(missing_paths(&root(), &allowlisted));
    assert!(missing.is_empty(), "named by tidy, missing: {missing:?}");
}

#[test]
fn a_stale_path_is_caught() {
    assert_eq!(
        missing_paths(&root(), &["conformance/src/target.rs", "spec"]),
        ["conformance/src/target.rs"]
    );
}

/// The documents people read, whose repository paths must exist.
const DOCUMENTS: &[&str] = &[
    "README.md",
    "ARCHITECTURE.md",
    "docs",
    "examples/python-service/README.md",
    "adapters/tower/README.md",
    "adapters/asgi/README.md",
    "examples/nginx/README.md",
];

/// The repository paths `text` names in backticks (`` `conformance/cli/tests/tidy.rs` ``), without
/// a `::item` or `:line` suffix; patterns (`{…}`, `*`) are not paths.
fn named_paths(text: &str) -> Vec<String> {
    const ROOTS: &[&str] = &[
        "spec/",
        "reference-server/",
        "conformance/",
        "ci/",
        "docs/",
        "examples/",
        "adapters/",
        ".ci/",
        ".config/",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| ROOTS.iter().any(|r| quoted.starts_with(r)))
        .filter(|quoted| !quoted.contains(['{', '*', '…', ' ']))
        .map(|quoted| {
            let path = quoted.split("::").next().unwrap_or(quoted);
            let path = path.split(':').next().unwrap_or(path);
            path.trim_end_matches(['.', ',']).to_owned()
        })
        .collect()
}

/// Architecture invariant: a path the documentation names exists (a moved file leaves no
/// pointer to nowhere).
#[test]
fn every_path_the_documents_name_exists() {
    let mut stale = Vec::new();
    for document in DOCUMENTS {
        let path = root().join(document);
        let files: Vec<PathBuf> = if path.is_dir() {
            std::fs::read_dir(&path)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "md"))
                .collect()
        } else {
            vec![path]
        };
        for file in files {
            for named in named_paths(&read(&file)) {
                if !root().join(&named).exists() {
                    stale.push(format!("{}: `{named}`", relative(&file)));
                }
            }
        }
    }
    assert!(
        stale.is_empty(),
        "paths named but missing:\n{}",
        stale.join("\n")
    );
}

#[test]
fn a_stale_document_path_is_caught() {
    let text =
        "see `conformance/tests/mutants.rs` and `spec/src/lib.rs::Contract`, `docs/{a,b}.md`";
    let named = named_paths(text);
    assert_eq!(named, ["conformance/tests/mutants.rs", "spec/src/lib.rs"]);
    assert_eq!(
        missing_paths(
            &root(),
            &["conformance/tests/mutants.rs", "spec/src/lib.rs"]
        ),
        ["conformance/tests/mutants.rs"]
    );
}

/// Following a clause is one grep of its id: it has its check and a row in ARCHITECTURE.md;
/// a clause of the reference contract also its contract entry and a `// clause: ID` mark at the
/// server code that implements it; a clause the reference service has no use for (T4: it
/// declares no rate limit) a broken variant of another service in `tests/services.rs` that must
/// fail it (a test named `…_fails_<id>`), since no variant of the reference server can.
#[test]
fn every_clause_is_followed_through() {
    let contract = Contract::embedded();
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let services = read(&root().join("conformance/cli/tests/services.rs"));
    let server: Vec<String> = rust_files_under(&root().join("reference-server/src"))
        .iter()
        .map(|p| read(p))
        .collect();
    let reference: Vec<ClauseId> = contract.clause_list().iter().map(|c| c.id).collect();
    let mut missing = Vec::new();
    for id in ClauseId::ALL {
        if !REGISTRY.iter().any(|c| c.id == CheckId::Clause(id)) {
            missing.push(format!("{id}: no check in the registry"));
        }
        if !architecture.contains(&format!("\n| {id} ")) {
            missing.push(format!("{id}: no row in ARCHITECTURE.md's clause table"));
        }
        if !reference.contains(&id) {
            let variant = format!("_fails_{}() {{", id.as_str().to_lowercase());
            if !services.contains(&variant) {
                missing.push(format!(
                    "{id}: not in the reference contract, and no `fn …{variant}` in tests/services.rs"
                ));
            }
            continue;
        }
        let clause = contract.clause(id);
        if clause.statement.trim().is_empty() || clause.verification.trim().is_empty() {
            missing.push(format!(
                "{id}: contract entry without statement or verification"
            ));
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

/// Every `[[implementation]]` rule of the contract is exercised by at least one check, its own
/// check (its clause's, or `contract`) among them, and every rule id a check declares exists
/// (`conformance/src/checks/coverage.rs`; the table is docs/rule-coverage.md).
#[test]
fn every_implementation_rule_is_exercised_by_its_checks() {
    let gaps = coverage::gaps(Contract::embedded(), REGISTRY);
    assert!(gaps.is_empty(), "{}", gaps.join("\n"));
}

#[test]
fn a_rule_no_check_exercises_is_caught() {
    let contract = Contract::embedded();
    let victim = contract.implementation[0].id.as_str();
    let stripped: Vec<Check> = REGISTRY
        .iter()
        .map(|c| {
            let kept: Vec<&'static str> =
                c.rules.iter().copied().filter(|r| *r != victim).collect();
            c.covers(Vec::leak(kept))
        })
        .collect();
    assert_eq!(
        coverage::gaps(contract, &stripped),
        [format!("rule `{victim}`: no check exercises it")]
    );
}

/// docs/rule-coverage.md (and every file the spec renders) is what `plimsoll docs` writes.
#[test]
fn the_rule_coverage_table_is_fresh() {
    let contract = Contract::from_file(&root().join("spec/contract.toml")).unwrap();
    let stale = plimsoll_conformance::docs::stale(&contract, &root());
    assert!(
        stale.is_empty(),
        "stale: {stale:?}; run `cargo run -p plimsoll -- docs`"
    );
}

/// The workspace crates `manifest`'s normal dependencies name.
fn workspace_dependencies(manifest: &str, crates: &BTreeSet<&str>) -> BTreeSet<String> {
    let manifest: toml::Table = manifest.parse().expect("a Cargo.toml parses");
    manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|deps| {
            deps.keys()
                .filter(|name| crates.contains(name.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Architecture invariant: the crates depend one way, as drawn (the conformance library sees
/// only the contract, never the reference server it may be pointed at).
#[test]
fn crates_depend_along_the_drawn_boundaries() {
    let names: BTreeSet<&str> = CRATES.iter().map(|(_, name, _)| *name).collect();
    let mut wrong = Vec::new();
    for (dir, name, allowed) in CRATES {
        let manifest = read(&root().join(dir).join("Cargo.toml"));
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{dir}/Cargo.toml is not {name}"
        );
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        for dep in workspace_dependencies(&manifest, &names).difference(&allowed) {
            wrong.push(format!("{name} depends on {dep}"));
        }
    }
    let workspace = read(&root().join("Cargo.toml"));
    for (dir, _, _) in CRATES {
        assert!(
            workspace.contains(&format!("\"{dir}\"")),
            "{dir} is not a workspace member"
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_dependency_across_a_boundary_is_caught() {
    let names = BTreeSet::from(["plimsoll-spec", "plimsoll-server"]);
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nplimsoll-spec.workspace = true\n\
                    plimsoll-server = { path = \"../reference-server\" }\nserde = \"1\"\n\
                    [dev-dependencies]\nplimsoll-server = { path = \"..\" }\n";
    assert_eq!(
        workspace_dependencies(manifest, &names),
        BTreeSet::from(["plimsoll-server".to_owned(), "plimsoll-spec".to_owned()])
    );
}

/// A module of a crate: its path from the crate root (`["http", "run"]`) and its source file.
struct Module {
    path: Vec<String>,
    text: String,
}

/// The modules of the crate whose `src` folder is `src` (`a/mod.rs` and `a.rs` are `a`).
fn modules(src: &Path) -> Vec<Module> {
    rust_files_under(src)
        .into_iter()
        .map(|file| {
            let rel = file.strip_prefix(src).unwrap().with_extension("");
            let mut path: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                path.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                path.pop();
            }
            Module {
                path,
                text: read(&file),
            }
        })
        .collect()
}

/// The module paths `text` refers to through `crate::a::b` or `super::b` (from `at`), cut to
/// the part below the root that names modules (lowercase segments).
fn references(at: &[String], text: &str) -> Vec<Vec<String>> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(at))] {
        for (i, _) in code.match_indices(prefix) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            for segment in code[i + prefix.len()..].split("::") {
                let name: String = segment
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // Types and constants end the module path; a function's name is filtered out
                // later, as no module has it.
                if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
                    break;
                }
                path.push(name.clone());
                if name.len() < segment.len() {
                    break;
                }
            }
            out.push(path);
        }
    }
    out
}

fn parent(at: &[String]) -> Vec<String> {
    at[..at.len().saturating_sub(1)].to_vec()
}

/// Edges between sibling modules: `a → b` when a file in `a` (or below it) refers to `b` (or
/// below it), both children of the same folder module. Those are the file and folder level
/// graphs ARCHITECTURE.md promises acyclic.
fn sibling_edges(modules: &[Module]) -> BTreeSet<(Vec<String>, Vec<String>)> {
    let known: BTreeSet<&Vec<String>> = modules.iter().map(|m| &m.path).collect();
    let mut edges = BTreeSet::new();
    for module in modules {
        for target in references(&module.path, &module.text) {
            // The common ancestor decides which two siblings the reference joins.
            let common = module
                .path
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if common >= module.path.len() || common >= target.len() {
                continue; // a reference into itself or to an ancestor
            }
            let from = module.path[..=common].to_vec();
            let to = target[..=common].to_vec();
            if from != to && known.contains(&to) {
                edges.insert((from, to));
            }
        }
    }
    edges
}

/// A cycle in `edges`, as the path that closes it, if there is one.
fn find_cycle(edges: &BTreeSet<(Vec<String>, Vec<String>)>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&Vec<String>, Vec<&Vec<String>>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
    }
    fn visit<'a>(
        node: &'a Vec<String>,
        next: &BTreeMap<&'a Vec<String>, Vec<&'a Vec<String>>>,
        stack: &mut Vec<&'a Vec<String>>,
        done: &mut BTreeSet<&'a Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|n| *n == node) {
            let mut cycle: Vec<String> = stack[i..].iter().map(|n| n.join("::")).collect();
            cycle.push(node.join("::"));
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        stack.push(node);
        for n in next.get(node).into_iter().flatten() {
            if let Some(c) = visit(n, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    next.keys()
        .find_map(|n| visit(n, &next, &mut Vec::new(), &mut done))
}

/// Architecture invariant: modules import downwards: no cycle between the files or folders of
/// one folder, in any crate.
#[test]
fn no_module_cycle_at_file_or_folder_level() {
    let mut cycles = Vec::new();
    for (dir, name, _) in CRATES {
        let modules = modules(&root().join(dir).join("src"));
        let edges = sibling_edges(&modules);
        // A crate of the root and at most one module has no siblings to join.
        assert!(
            !edges.is_empty()
                || *name == "plimsoll"
                || modules.iter().filter(|m| !m.path.is_empty()).count() <= 1,
            "{name}: no module edges found"
        );
        if let Some(cycle) = find_cycle(&edges) {
            cycles.push(format!("{name}: {}", cycle.join(" → ")));
        }
    }
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn a_module_cycle_is_caught() {
    let module = |path: &str, text: &str| Module {
        path: path.split("::").map(str::to_owned).collect(),
        text: text.to_owned(),
    };
    let modules = [
        module("http", "use crate::state::AppState;"),
        module("http::run", "use super::timing::X;"),
        module("http::timing", "pub struct X;"),
        module("state", "use crate::connections;"),
        module("connections", "fn f() { crate::http::Api::new() }"),
    ];
    let edges = sibling_edges(&modules);
    assert!(edges.contains(&(
        vec!["http".into(), "run".into()],
        vec!["http".into(), "timing".into()]
    )));
    assert_eq!(
        find_cycle(&edges),
        Some(vec![
            "connections".into(),
            "http".into(),
            "state".into(),
            "connections".into()
        ])
    );
    assert_eq!(find_cycle(&sibling_edges(&modules[..4])), None);
}

#[test]
fn forbidden_imports_stay_out() {
    let mut wrong = Vec::new();
    for path in rust_files() {
        let rel = relative(&path);
        let text = read(&path);
        for (dir, forbidden) in FORBIDDEN_IMPORTS {
            if rel.starts_with(dir) && text.contains(forbidden) {
                wrong.push(format!("{rel} uses {forbidden}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The functions of `text` longer than `max` lines, as (name, first line, length). Counts from
/// the `fn` line to its closing brace by matching braces outside strings, chars and comments;
/// stops at the file's `#[cfg(test)]` module (tests are read as a table of cases).
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .collect();
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        if let Some(n) = body_length(&lines[start..]).filter(|n| *n > max) {
            out.push((name, start + 1, n));
        }
    }
    out
}

/// How many lines the function starting at `lines[0]` spans, or `None` for a declaration
/// without a body (`fn f();` in a trait).
fn body_length(lines: &[&str]) -> Option<usize> {
    let (mut braces, mut nesting) = (0i32, 0i32);
    let mut opened = false;
    for (offset, line) in lines.iter().enumerate() {
        for c in code_chars(line).chars() {
            match c {
                '{' => {
                    braces += 1;
                    opened = true;
                }
                '}' => braces -= 1,
                '(' | '[' => nesting += 1,
                ')' | ']' => nesting -= 1,
                ';' if !opened && nesting == 0 => return None,
                _ => {}
            }
        }
        if opened && braces <= 0 {
            return Some(offset + 1);
        }
    }
    None
}

/// The name of the function `line` starts, if it starts one.
fn fn_name(line: &str) -> Option<String> {
    // `pub(in crate::load)` is one visibility, however it is spaced.
    let line = line.replace("pub(in ", "pub(in_");
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let before_ok = words[..at].iter().all(|w| {
        matches!(*w, "pub" | "async" | "const" | "unsafe" | "extern") || w.starts_with("pub(")
    });
    let name: String = words
        .get(at + 1)?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (before_ok && !name.is_empty()).then_some(name)
}

/// The characters of `line` that are code: string and char literals and `//` comments dropped.
fn code_chars(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '/' if chars.peek() == Some(&'/') => break,
            '\'' => {
                // A char literal ('{', '\n') or a lifetime ('a): skip the literal's content.
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.nth(2);
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Architecture invariant: no function of a crate's `src` over [`MAX_FN_LINES`] lines, but the
/// allowlisted table-like ones.
#[test]
fn no_function_is_over_80_lines() {
    let mut long = Vec::new();
    for path in rust_files()
        .iter()
        .filter(|p| relative(p).contains("/src/") || relative(p).starts_with("spec/src"))
    {
        let rel = relative(path);
        for (name, line, n) in long_functions(&read(path), MAX_FN_LINES) {
            let at = format!("{rel}::{name}");
            if !LONG_FN_ALLOWLIST.iter().any(|(a, _)| *a == at) {
                long.push(format!("{rel}:{line} fn {name} has {n} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "{} functions over {MAX_FN_LINES} lines:\n{}",
        long.len(),
        long.join("\n")
    );
}

/// No string literal of the crates' own code has a line's indentation inside it: the mark of a
/// line break inside a literal whose `\` was lost (`literals`).
#[test]
fn no_string_literal_has_a_gap_between_words() {
    let mut found = Vec::new();
    for path in rust_files()
        .iter()
        .filter(|p| relative(p).contains("/src/") || relative(p).starts_with("spec/src"))
    {
        let rel = relative(path);
        match literals::gaps(&read(path)) {
            Ok(gaps) => found.extend(gaps.into_iter().map(|g| format!("{rel}:{g}"))),
            Err(e) => found.push(format!("{rel}: does not parse: {e}")),
        }
    }
    assert!(
        found.is_empty(),
        "string literals with a gap between words (a line break whose `\\` was lost):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_gap_between_words_is_caught() {
    let text = "fn f() -> String {\n    let ok = \"a \\\n        b\";\n    let lines = \"x\\n    y\";\n    \
                c.fail(format!(\"plays          (`{x}`)\", x = 1));\n    \
                let kept = \"a\n         b\";\n    /// doc         comment\n    \
                \"MX:+    0\".into()\n}\n";
    assert_eq!(
        literals::gaps(text).unwrap(),
        ["5: \"plays          (`{x}`)\"", "6: \"a\\n         b\""],
        "{text}"
    );
}

#[test]
fn a_long_function_is_caught() {
    let body: String = (0..81).map(|i| format!("    let x{i} = '{{';\n")).collect();
    let text = format!(
        "/// doc\npub async fn long(a: &str) -> u8 {{\n{body}    0\n}}\n\nfn short() {{ \"}}\"; }}\n\
         fn decl();\n#[cfg(test)]\nmod tests {{ fn t() {{\n{body}}} }}\n"
    );
    assert_eq!(long_functions(&text, 80), [("long".to_owned(), 2, 84)]);
    let scoped = text.replace("pub async fn long", "pub(in crate::load) fn long");
    assert_eq!(long_functions(&scoped, 80), [("long".to_owned(), 2, 84)]);
}

/// Architecture invariant: the broken variants exist only in builds that ask for the `mutants`
/// feature, and only a dev-dependency asks: a release build holds none. Read from `cargo
/// metadata` (the features and who asks for them) and from the server's syntax tree (its
/// variants' module and every `use` of it are behind the feature); `.ci/run` also builds the
/// shipped binary without it.
#[test]
fn broken_variants_are_behind_the_mutants_feature() {
    let metadata = features::workspace_metadata();
    assert_eq!(features::leaks(&metadata), Vec::<String>::new());
    let mut declaring = features::declaring(&metadata);
    declaring.sort();
    assert_eq!(
        declaring,
        ["plimsoll", "plimsoll-server"],
        "the variants' feature is declared by the server and the binary"
    );
    let lib = read(&root().join("reference-server/src/lib.rs"));
    assert_eq!(
        features::ungated(&lib).unwrap(),
        Vec::<String>::new(),
        "reference-server/src/lib.rs names the variants outside the feature"
    );
}

/// The sample run in README.md and the recommended run in implementing.md are of this contract:
/// its version, as many checks as the registry has, every override the embedded server runs
/// with. (A stale sample told an implementer they had one check fewer to pass.)
fn stale_samples(readme: &str, implementing: &str) -> Vec<String> {
    let mut out = Vec::new();
    let version = format!("contract {} (", Contract::embedded().contract.version);
    if !readme.contains(&version) {
        out.push(format!("README.md's sample run does not show `{version}…`"));
    }
    // The embedded contract declares no rate limit: T4 is not applicable to it.
    let applies = REGISTRY
        .iter()
        .filter(|c| (c.applies)(Contract::embedded()).is_ok())
        .count();
    let passed = match REGISTRY.len() - applies {
        0 => format!("{applies} passed, 0 failed"),
        n => format!("{applies} passed, {n} not applicable, 0 failed"),
    };
    if !readme.contains(&passed) {
        out.push(format!("README.md's sample run does not say `{passed}`"));
    }
    for (env, value) in plimsoll_conformance::check::embedded_overrides(false) {
        let set = format!("{env}={value}");
        if !implementing.contains(&set) {
            out.push(format!(
                "implementing.md's recommended run does not set `{set}`, which the embedded server runs with"
            ));
        }
    }
    out
}

#[test]
fn the_documents_sample_runs_are_of_this_contract() {
    let readme = read(&root().join("README.md"));
    let implementing = read(&root().join("docs/implementing.md"));
    let stale = stale_samples(&readme, &implementing);
    assert!(stale.is_empty(), "{stale:#?}");
}

#[test]
fn a_stale_sample_run_is_caught() {
    let stale = stale_samples(
        "contract 1.0.0 (8639fccc)\n18 passed, 0 failed",
        "QUEUE_CAPACITY=2",
    );
    assert!(stale.iter().any(|s| s.contains("contract")), "{stale:?}");
    assert!(stale.iter().any(|s| s.contains("passed")), "{stale:?}");
    assert!(
        stale.iter().any(|s| s.contains("HEAD_TIMEOUT_MS")),
        "{stale:?}"
    );
}

/// The guides whose sentences must link the rule they restate: README.md and every document of
/// `docs/` but those generated from the contract itself (`concurrency.md` holds the rules,
/// `language.md` the language, `changelog.md` the changelog).
fn guides() -> Vec<PathBuf> {
    const GENERATED_FROM_THE_CONTRACT: &[&str] = &["concurrency.md", "language.md", "changelog.md"];
    let mut out = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| {
            !GENERATED_FROM_THE_CONTRACT
                .iter()
                .any(|name| p.file_name().is_some_and(|f| f == *name))
        })
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// One home per fact: a guide's sentence that says what an implementation must, shall, is
/// required to, has to or needs to do links the rule (a heading of docs/concurrency.md) that
/// says it; a sentence about the checker or the operator says so without those words.
#[test]
fn normative_sentences_link_a_rule() {
    let anchors = normative::heading_anchors(&read(&root().join("docs/concurrency.md")));
    assert!(anchors.contains("implementation-rules"), "{anchors:?}");
    let guides = guides();
    assert!(guides.len() > 5, "found only {guides:?}");
    let mut unlinked = Vec::new();
    for guide in &guides {
        for sentence in normative::unlinked_normative_sentences(&read(guide), &anchors) {
            unlinked.push(format!("{}: {sentence}", relative(guide)));
        }
    }
    assert!(
        unlinked.is_empty(),
        "normative sentences that link no rule of docs/concurrency.md (link the rule, add one to \
         spec/contract.toml's [[implementation]], or say what the checker or operator does):\n{}",
        unlinked.join("\n")
    );
}

#[test]
fn a_normative_sentence_without_a_rule_is_caught() {
    let anchors = normative::heading_anchors(
        "# Title\n\n```toml\n# not a heading\n```\n\n### Input checks and their order\n",
    );
    assert_eq!(
        anchors,
        BTreeSet::from(["input-checks-and-their-order", "title"].map(str::to_owned))
    );
    let planted = "\
A service must answer within 2 s. The checker sends one request.

- [ ] Judge the hook first ([`input-order`](concurrency.md#input-checks-and-their-order)); it
  must come before the query ([`input-order`](concurrency.md#input-checks-and-their-order)).
- A body has to be read (see [the rules](concurrency.md#no-such-heading)).

| a | b |
|---|---|
| x | the server needs to close it |

The word `must` in code and mustard are not normative. Shall we? It shall, e.g. here.

```sh
echo a service must not be judged here
```

<!-- checks:begin -->
| generated | a check must hold it |
<!-- checks:end -->
";
    let found = normative::unlinked_normative_sentences(planted, &anchors);
    assert_eq!(
        found,
        [
            "A service must answer within 2 s.",
            "- A body has to be read (see [the rules](concurrency.md#no-such-heading)).",
            "the server needs to close it |",
            "Shall we?",
            "It shall, e.g. here.",
        ],
        "{found:#?}"
    );
}

/// Every numbered rule of ARCHITECTURE.md's invariants names the tests that hold it, and each
/// exists (`invariants`).
#[test]
fn every_invariant_names_tests_that_exist() {
    let text = read(&root().join("ARCHITECTURE.md"));
    let problems = invariants::problems(&root(), &text);
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(invariants::invariants(&text).len() >= 10);
}

/// The library crates of the workspace: every one but the binary.
fn libraries() -> Vec<&'static str> {
    CRATES
        .iter()
        .map(|(_, name, _)| *name)
        .filter(|name| *name != "plimsoll")
        .collect()
}

/// Architecture invariant: no library crate parses a command line (clap is the binary's), and the
/// checks' crate builds without the load generator: goose is nowhere in its normal dependencies,
/// as `cargo metadata` resolves them.
#[test]
fn no_library_parses_a_command_line_and_the_checks_build_without_goose() {
    let metadata = features::resolved_metadata();
    for library in libraries() {
        let direct = features::direct_dependencies(&metadata, library);
        assert!(
            !direct.contains("clap"),
            "{library} depends on clap: arguments are the binary's"
        );
    }
    let reached = features::normal_closure(&metadata, "plimsoll-conformance");
    assert!(
        reached.contains("reqwest"),
        "the closure is read: {reached:?}"
    );
    assert!(
        !reached.contains("goose"),
        "plimsoll-conformance reaches goose"
    );
    assert!(features::normal_closure(&metadata, "plimsoll-load").contains("goose"));
}

/// The paths only the run's setup and `remote` may name: the ways a target is held and witnessed
/// (a path matches when these segments appear in it, in order).
const MODE_PATHS: &[&[&str]] = &[
    &["TargetApi"],
    &["CheckerUpstream"],
    &["RelayListener"],
    &["RelaySocket"],
    &["upstream", "Upstream"],
];

/// The paths of `source` (in expressions, types and `use`s) that name a way of holding, as
/// `line: path`.
fn mode_names(source: &str) -> Vec<String> {
    struct Names(Vec<String>);
    impl Names {
        fn check(&mut self, line: usize, segments: &[String]) {
            let hit = MODE_PATHS.iter().any(|pattern| {
                segments
                    .windows(pattern.len())
                    .any(|w| w.iter().zip(pattern.iter()).all(|(a, b)| a == b))
            });
            if hit {
                self.0.push(format!("{line}: {}", segments.join("::")));
            }
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Names {
        fn visit_path(&mut self, path: &'ast syn::Path) {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path
                .segments
                .first()
                .map_or(0, |s| s.ident.span().start().line);
            self.check(line, &segments);
            syn::visit::visit_path(self, path);
        }
        fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
            fn flatten(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
                let with = |name: &syn::Ident| {
                    let mut p = prefix.clone();
                    p.push(name.to_string());
                    p
                };
                match tree {
                    syn::UseTree::Path(p) => flatten(&p.tree, with(&p.ident), out),
                    syn::UseTree::Name(n) => out.push(with(&n.ident)),
                    syn::UseTree::Rename(r) => out.push(with(&r.ident)),
                    syn::UseTree::Group(g) => {
                        g.items.iter().for_each(|t| flatten(t, prefix.clone(), out));
                    }
                    syn::UseTree::Glob(_) => out.push(prefix.clone()),
                }
            }
            let mut paths = Vec::new();
            flatten(&item.tree, Vec::new(), &mut paths);
            let line = item.use_token.span.start().line;
            for path in paths {
                self.check(line, &path);
            }
        }
    }
    let file = syn::parse_file(source).expect("a source file parses");
    let mut names = Names(Vec::new());
    syn::visit::Visit::visit_file(&mut names, &file);
    names.0
}

/// Architecture invariant: no check knows how its target is held or witnessed: no file of the
/// checks names one of the ways; each asks its `Target`'s `LocalHandler` and `RelaySocket`.
#[test]
fn no_check_knows_how_its_target_is_held() {
    let checks = root().join("conformance/src/checks");
    let wrong: Vec<String> = rust_files_under(&checks)
        .iter()
        .flat_map(|path| {
            let rel = relative(path);
            mode_names(&read(path))
                .into_iter()
                .map(move |name| format!("{rel}:{name}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "checks that know the mode:\n{}",
        wrong.join("\n")
    );
    assert_eq!(
        mode_names(
            "use crate::remote::upstream::{Upstream, Visit};\n\
             fn r(t: &Target) { let s = plimsoll_fault::Stream::Upstream;\n\
             if let Some(u) = t.local.as_any().downcast_ref::<CheckerUpstream>() {} }"
        ),
        ["1: crate::remote::upstream::Upstream", "3: CheckerUpstream"]
    );
}
