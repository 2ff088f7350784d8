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

/// Every generated file under `root` that differs from a fresh rendering (missing counts).
pub fn stale(contract: &Contract, root: &Path) -> Vec<&'static str> {
    let mut stale = render::stale(contract, root);
    for (path, contents) in checker_outputs(contract) {
        if std::fs::read_to_string(root.join(path)).ok().as_deref() != Some(&contents) {
            stale.push(path);
        }
    }
    stale
}

/// Writes every generated file under `root`; returns the paths that changed.
fn write_all(contract: &Contract, root: &Path) -> std::io::Result<Vec<&'static str>> {
    let mut changed = render::write_all(contract, root)?;
    for (path, contents) in checker_outputs(contract) {
        let file = root.join(path);
        if std::fs::read_to_string(&file).ok().as_deref() != Some(&contents) {
            std::fs::write(&file, contents)?;
            changed.push(path);
        }
    }
    Ok(changed)
}
