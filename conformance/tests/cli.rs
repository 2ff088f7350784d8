//! The `plimsoll` binary's command line, run as a process: a typo in a check id must stop the
//! run before anything starts, with exit code 2 and the known ids, not quietly check nothing.

use std::process::Command;

#[test]
fn an_unknown_check_id_exits_2_naming_it_and_the_known_ones() {
    for flag in ["--only", "--skip"] {
        let out = Command::new(env!("CARGO_BIN_EXE_plimsoll"))
            .args(["check", flag, "T1,T9", "--quiet"])
            .output()
            .expect("the plimsoll binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains("`T9` is not a check id"),
            "{flag}: {stderr}"
        );
        for known in ["contract", "T1", "R6", "F4", "API"] {
            assert!(
                stderr.contains(known),
                "{flag}: {known} not listed in {stderr}"
            );
        }
    }
}
