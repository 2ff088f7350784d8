//! Per-request bounds (B1–B3): a deadline, a memory cap, and a stop when the client goes away;
//! after each fault every slot must admit work again.

pub mod b1;
pub mod b2;
pub mod b3;
