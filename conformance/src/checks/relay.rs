//! R1–R6: the relay bridge. Placeholder until the relay checks land.

use std::sync::Arc;

use super::Ctx;
use crate::target::Target;

pub async fn r1(_t: &Arc<Target>, c: &mut Ctx) {
    c.skip("relay checks not implemented yet");
}
pub async fn r2(_t: &Arc<Target>, c: &mut Ctx) {
    c.skip("relay checks not implemented yet");
}
pub async fn r3(_t: &Arc<Target>, c: &mut Ctx) {
    c.skip("relay checks not implemented yet");
}
pub async fn r4(_t: &Arc<Target>, c: &mut Ctx) {
    c.skip("relay checks not implemented yet");
}
pub async fn r5(_t: &Arc<Target>, c: &mut Ctx) {
    c.skip("relay checks not implemented yet");
}
pub async fn r6(_t: &Arc<Target>, c: &mut Ctx) {
    c.skip("relay checks not implemented yet");
}
