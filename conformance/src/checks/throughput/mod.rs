//! Throughput (T1–T5): how many requests a pool runs at once, in which order the rest wait,
//! how a full pool says no, how fast a rate limit admits, and how long a request may wait.

pub mod t1;
pub mod t2;
pub mod t3;
pub mod t4;
pub mod t5;
