//! `plimsoll`: the one front door. Parsing lives in `cli`, the work in the libraries.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

use std::process::ExitCode;

fn main() -> ExitCode {
    plimsoll::cli::main()
}
