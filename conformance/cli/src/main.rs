//! `plimsoll`: the one front door. Parsing lives in `cli`, the work in the libraries.

use std::process::ExitCode;

fn main() -> ExitCode {
    plimsoll::cli::main()
}
