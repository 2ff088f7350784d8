//! `plimsoll`: the one front door. Parsing lives in `cli`, the work in the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    plimsoll_conformance::cli::main()
}
