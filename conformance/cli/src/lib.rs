//! `plimsoll`: the glue between the command line, the conformance library and the reference
//! server, as ripgrep's binary is glue around its libraries.
//!
//! [`plimsoll_conformance`] judges any implementation through HTTP and never sees the
//! reference server; this crate is the one place both meet: [`embedded`] starts the reference
//! server as the subject of a run when no `--target` is given, `serve` runs it for people,
//! and [`cli`] parses the command line and hands each command to its module. The options are
//! declared once, in [`args`], and become the libraries' plans there; [`check`] and [`load`]
//! run them with the terminal report of [`report`] watching, and write the report files.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod args;
pub mod check;
pub mod cli;
mod contract;
mod discover;
pub mod embedded;
mod init;
pub mod load;
pub mod report;
mod serve;
