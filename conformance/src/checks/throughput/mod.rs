//! Throughput (T1–T4): how many requests a pool runs at once, in which order the rest wait,
//! how a full pool says no, and how fast a rate limit admits.

pub mod t1;
pub mod t2;
pub mod t3;
pub mod t4;
