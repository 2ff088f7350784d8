//! Per-request bounds (B1–B3): a deadline, a memory cap, and a stop when the client goes away,
//! after each of which every slot must admit work again; and the connection bounds (B4): a
//! head timeout and a connection cap.

pub mod b1;
pub mod b2;
pub mod b3;
pub mod b4;
