//! `ci/gate.sh` run as a user's CI runs it: the real `plimsoll` binary against `plimsoll serve`
//! in another process.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Process, serve};

/// `plimsoll serve` with the values `plimsoll check` gives its embedded server (scaled timeouts,
/// a queue), `extra_env` on top.
pub fn serve_scaled(dir: &Path, extra_env: &[(&str, &str)]) -> (Process, String) {
    let mut env = plimsoll_conformance::check::embedded_overrides(false);
    env.extend_from_slice(extra_env);
    serve(dir, &env)
}

/// Runs `ci/gate.sh`'s `steps` against `url` with the real binary, its reports under `dir`.
pub fn gate(url: &str, dir: &Path, steps: &str) -> (std::process::ExitStatus, PathBuf) {
    gate_reporting_to(url, dir, steps, dir.join("reports"))
}

/// [`gate`], its reports written to `reports`.
pub fn gate_reporting_to(
    url: &str,
    dir: &Path,
    steps: &str,
    reports: PathBuf,
) -> (std::process::ExitStatus, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = Command::new("bash")
        .arg(root.join("ci/gate.sh"))
        .env("TARGET", url)
        .env("TEMP_DIR", dir.join("jobs"))
        .env("SERVER_LOG", dir.join("server.log"))
        .env("REPORT_DIR", &reports)
        .env("PLIMSOLL_BIN", env!("CARGO_BIN_EXE_plimsoll"))
        // The server runs with scaled timeouts (so B1 is quick): judge its own values.
        .env("CHECK_ARGS", "--allow-overrides")
        .env("LOAD_ARGS", "--allow-overrides")
        .env("LOAD_DURATION", "4")
        .env("GATE_STEPS", steps)
        .status()
        .unwrap();
    (status, reports)
}

/// Every step named wrote its JUnit and HTML report, and neither is empty.
pub fn assert_reports(reports: &Path, steps: &[&str]) {
    for name in steps {
        for ext in ["junit.xml", "html"] {
            let file = reports.join(format!("{name}.{ext}"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert!(!text.is_empty());
        }
    }
}
