//! A worker slot shared by the request's handler and its worker, so the moment the slot is given
//! back is one decision ([`crate::worker::SlotRelease`]) rather than wherever the permit happens
//! to drop.

use std::sync::{Arc, Mutex, MutexGuard};

use super::Permit;

/// A [`Permit`] that several owners can see. The slot is given back by [`Slot::release`], or
/// when the last owner drops it.
#[derive(Debug, Clone)]
pub struct Slot(Arc<Mutex<Option<Permit>>>);

impl Slot {
    /// The one owner of `permit` so far; clones share it.
    pub fn new(permit: Permit) -> Slot {
        Slot(Arc::new(Mutex::new(Some(permit))))
    }

    fn lock(&self) -> MutexGuard<'_, Option<Permit>> {
        // Nothing panics while the lock is held; recover the data regardless.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives the slot back now (no-op if it already went back).
    pub fn release(&self) {
        drop(self.take());
    }

    /// Takes the permit out, leaving the slot empty; dropping what is returned releases it.
    pub fn take(&self) -> Option<Permit> {
        self.lock().take()
    }

    /// The slot has not gone back yet.
    pub fn is_held(&self) -> bool {
        self.lock().is_some()
    }

    /// `other` is a handle on this same slot.
    pub fn same(&self, other: &Slot) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
