//! `plimsoll docs`: regenerate (or check) every file derived from the contract: the spec's
//! renderings, and what the checker adds to them (`docs/rule-coverage.md`, from the checks'
//! declarations; `spec/schemas/report.schema.json`, the schema of its JSON report).

use std::path::{Path, PathBuf};

use plimsoll_spec::{Contract, render};

/// Finds the repository root: the nearest ancestor of `start` holding `spec/contract.toml`.
pub fn find_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join("spec/contract.toml").is_file())
        .map(Path::to_path_buf)
}

/// Runs `plimsoll docs` in the repository at `root` (`None`: the nearest ancestor of the
/// working directory holding `spec/contract.toml`): writes every generated file, or with
/// `check` only compares them. Returns the process exit code (0 ok, 1 stale, 2 could not run).
pub fn run(root: Option<PathBuf>, check: bool) -> u8 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let Some(root) = root.or_else(|| find_root(&cwd)) else {
        eprintln!(
            "plimsoll docs: no spec/contract.toml in {} or above; pass --root",
            cwd.display()
        );
        return 2;
    };
    let contract = match Contract::from_file(&root.join("spec/contract.toml")) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("plimsoll docs: {e}");
            return 2;
        }
    };
    if check {
        let stale = stale(&contract, &root);
        if stale.is_empty() {
            println!("plimsoll docs: all generated files are fresh");
            return 0;
        }
        for path in &stale {
            eprintln!("stale: {path}");
        }
        eprintln!(
            "plimsoll docs: {} generated file(s) are stale; run `cargo run -p plimsoll -- docs`",
            stale.len()
        );
        return 1;
    }
    match write_all(&contract, &root) {
        Ok(changed) => {
            for path in &changed {
                println!("wrote {path}");
            }
            if changed.is_empty() {
                println!("plimsoll docs: nothing to do, all generated files are fresh");
            }
            0
        }
        Err(e) => {
            eprintln!("plimsoll docs: {e}");
            2
        }
    }
}

/// `plimsoll docs --contract FILE [--out OUT] [--check]`: the document of any contract — the
/// reference one's `concurrency.md`, or another service's pools, rate limits, refusals and
/// tolerances followed by what `plimsoll check` judges of it — to standard output or `out`
/// (with `check`, only compared with `out`). Returns the exit code (0 ok, 1 stale, 2 could not
/// run).
pub fn render_contract(path: &Path, out: Option<&Path>, check: bool) -> u8 {
    let contract = match Contract::from_file(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("plimsoll docs: {e}");
            return 2;
        }
    };
    let text = contract_document(&contract, &path.display().to_string());
    match (out, check) {
        (None, true) => {
            eprintln!("plimsoll docs: --check with --contract compares --out FILE; give one");
            2
        }
        (None, false) => {
            print!("{text}");
            0
        }
        (Some(out), true) => {
            if std::fs::read_to_string(out).ok().as_deref() == Some(&text) {
                println!("plimsoll docs: {} is fresh", out.display());
                0
            } else {
                eprintln!("stale: {}", out.display());
                1
            }
        }
        (Some(out), false) => match std::fs::write(out, &text) {
            Ok(()) => {
                println!("wrote {}", out.display());
                0
            }
            Err(e) => {
                eprintln!("plimsoll docs: {}: {e}", out.display());
                2
            }
        },
    }
}

/// The document of `contract`, read from `source`.
pub fn contract_document(contract: &Contract, source: &str) -> String {
    if contract.is_reference() {
        return render::concurrency_md(contract);
    }
    let mut md = render::service_md(contract, source);
    md.push_str(&judged_section(contract));
    md
}

/// `## What plimsoll check judges`: every check, and whether the contract gives it something
/// to judge or why not — decided as a run decides it, from the contract alone.
fn judged_section(contract: &Contract) -> String {
    let mut md = String::from(
        "## What `plimsoll check` judges\n\nEvery check of the checker, and whether this \
         contract declares what it judges. A check given nothing to judge is reported not \
         applicable, with the reason below, never as a pass.\n\n| check | what it judges | for this \
         contract |\n|---|---|---|\n",
    );
    for check in crate::checks::REGISTRY {
        let verdict = match (check.applies)(contract) {
            Ok(()) => "judged".to_owned(),
            Err(why) => format!("not applicable: {why}"),
        };
        md.push_str(&format!(
            "| {} | {} | {} |\n",
            check.id,
            check.title(contract),
            verdict.replace('|', "\\|")
        ));
    }
    md
}

/// The files the checker generates beside the spec's: path (from the repository root) and
/// contents.
fn checker_outputs(contract: &Contract) -> [(&'static str, String); 2] {
    [
        (
            crate::checks::coverage::PATH,
            crate::checks::coverage::document(contract),
        ),
        (
            crate::verdict::REPORT_SCHEMA_PATH,
            crate::verdict::report_schema_text(),
        ),
    ]
}

/// The example services whose contracts' documents are generated beside them
/// (`DIR/CONTRACT.md` from `DIR/contract.toml`).
pub const EXAMPLES: [(&str, &str); 2] = [
    ("examples/nginx/contract.toml", "examples/nginx/CONTRACT.md"),
    (
        "examples/rust-service/contract.toml",
        "examples/rust-service/CONTRACT.md",
    ),
];

/// Every generated file: the checker's, and each example's document (an example contract that
/// does not load is an error naming it).
fn all_outputs(contract: &Contract, root: &Path) -> std::io::Result<Vec<(&'static str, String)>> {
    let mut out: Vec<(&'static str, String)> = checker_outputs(contract).into();
    for (source, document) in EXAMPLES {
        let example = Contract::from_file(&root.join(source))
            .map_err(|e| std::io::Error::other(format!("{source}: {e}")))?;
        out.push((document, contract_document(&example, "contract.toml")));
    }
    Ok(out)
}

/// Every generated file under `root` that differs from a fresh rendering (missing counts).
pub fn stale(contract: &Contract, root: &Path) -> Vec<&'static str> {
    let mut stale = render::stale(contract, root);
    let Ok(outputs) = all_outputs(contract, root) else {
        stale.extend(EXAMPLES.iter().map(|(_, document)| *document));
        return stale;
    };
    for (path, contents) in outputs {
        if std::fs::read_to_string(root.join(path)).ok().as_deref() != Some(&contents) {
            stale.push(path);
        }
    }
    stale
}

/// Writes every generated file under `root`; returns the paths that changed.
fn write_all(contract: &Contract, root: &Path) -> std::io::Result<Vec<&'static str>> {
    let mut changed = render::write_all(contract, root)?;
    for (path, contents) in all_outputs(contract, root)? {
        let file = root.join(path);
        if std::fs::read_to_string(&file).ok().as_deref() != Some(&contents) {
            std::fs::write(&file, contents)?;
            changed.push(path);
        }
    }
    Ok(changed)
}
