//! Throughput (T1–T6): how many requests a pool runs at once, in which order the rest wait,
//! how a full pool says no, how fast a rate limit admits, how long a request may wait, and what
//! a refusal does to its connection.

pub mod t1;
pub mod t2;
pub mod t3;
pub mod t4;
pub mod t5;
pub mod t6;
