//! `plimsoll-engine`: the digitizing engine of the reference server, with no HTTP in it.
//!
//! [`pipeline`] turns an image into embroidery stitches and [`export`] turns stitches into
//! machine files; both are real work that stops early on request. [`job`] is what makes that
//! possible: one context per run holding the cancellation token, the deadline, the memory
//! budget and the private temp directory, checked at [`job::JobContext::checkpoint`] inside the
//! long loops. [`temp`] knows the job directories' names, for start-up cleanup and the
//! `plimsoll_temp_files` gauge. [`synthetic`] is the benchmarks' input, shared with the tests
//! that hold the response bodies byte for byte.
//!
//! The crate boundary holds one rule of the architecture: the engine cannot see admission,
//! HTTP, metrics or the broken variants, so a clause the server enforces around a job (a slot,
//! a response, a log line) cannot leak into the pixel work.

#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod export;
pub mod job;
pub mod pipeline;
pub mod synthetic;
pub mod temp;
