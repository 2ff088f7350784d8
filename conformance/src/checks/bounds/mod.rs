//! Per-request bounds (B1–B3): a deadline, a memory cap, and a stop when the client goes away,
//! after each of which every slot must admit work again; the connection bounds (B4): a head
//! timeout and a connection cap; and the upload budget (B5): the bodies in flight together.

pub mod b1;
pub mod b2;
pub mod b3;
pub mod b4;
pub mod b5;
mod deadline;
mod disconnect;
mod over_cap;
mod stalled_body;
mod trickle;
