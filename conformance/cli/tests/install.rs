//! Installed in one line (`cargo install --locked --git … plimsoll`, or a release archive), the
//! binary is all a user has: the contract, the OpenAPI document it derives, the Locust file and
//! the HTML report's style are compiled in. So the binary is copied out of the build tree and
//! run from `/`, with an empty environment and an empty `HOME`: nothing points it at the
//! repository, and `check` must still work.

use std::path::Path;
use std::process::{Command, Output};

/// Runs the copied binary `bin` with `args` from `/`, with nothing of the environment but an
/// empty `HOME` and a temp folder.
fn run_installed(bin: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir("/")
        .env_clear()
        .env("HOME", home)
        .env("TMPDIR", home.join("tmp"))
        .output()
        .expect("the installed plimsoll runs")
}

#[test]
fn the_binary_alone_checks_from_anywhere_with_nothing_of_the_repository() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin/plimsoll");
    let home = root.path().join("home");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_plimsoll"), &bin).unwrap();

    let help = run_installed(&bin, &home, &["check", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert_eq!(help.status.code(), Some(0), "{text}");
    assert!(text.contains("--target"), "{text}");

    let reports = home.join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    let report = |name: &str| reports.join(name).to_str().unwrap().to_owned();
    let (json, junit, html) = (
        report("check.json"),
        report("check.junit.xml"),
        report("check.html"),
    );
    let check = run_installed(
        &bin,
        &home,
        &[
            "check", "--only", "T1", "--quiet", "--json", &json, "--junit", &junit, "--html", &html,
        ],
    );
    let stdout = String::from_utf8_lossy(&check.stdout);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(0), "{stdout}\n{stderr}");
    // The embedded contract (the `contract` check runs always) and T1, both passed.
    assert!(stdout.contains("2 passed, 0 failed"), "{stdout}");
    for file in [&json, &junit, &html] {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(text.contains("T1"), "{file}");
    }
}
