//! Throughput (T1–T3): how many digitize jobs run at once, in which order the rest wait, and
//! how a full pool says no.

pub mod t1;
pub mod t2;
pub mod t3;
