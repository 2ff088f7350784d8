//! B5: the bytes of request bodies the server holds at once, all requests together. An upload
//! takes a [`Reservation`] before it keeps a byte and gives it back when its request ends
//! (dropped with the job that held the body), so the sum of bodies in memory never passes the
//! budget, whoever sends them and however slowly.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The shared budget. Never waits: a reservation that does not fit is refused at once.
#[derive(Debug)]
pub struct UploadBudget {
    capacity: u64,
    held: AtomicU64,
}

impl UploadBudget {
    /// A budget of `capacity` bytes (`u64::MAX` when the server's policy sets none).
    pub fn new(capacity: u64) -> Arc<UploadBudget> {
        Arc::new(UploadBudget {
            capacity,
            held: AtomicU64::new(0),
        })
    }

    /// Bytes held by reservations right now (the `/metrics` gauge and the tests read it).
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    /// An empty reservation, to grow as a body arrives.
    pub fn reservation(self: &Arc<Self>) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes: 0,
        }
    }

    // clause: B5 — the bodies in flight never pass the budget together
    fn try_take(&self, bytes: u64) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&n| n <= self.capacity)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Bytes of the budget one request holds; given back on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<UploadBudget>,
    bytes: u64,
}

impl Reservation {
    /// Holds `total` bytes in all (never less than already held); false, holding what it held,
    /// when the budget has no room for the difference.
    #[must_use]
    pub fn grow_to(&mut self, total: u64) -> bool {
        let more = total.saturating_sub(self.bytes);
        if more == 0 {
            return true;
        }
        if !self.budget.try_take(more) {
            return false;
        }
        self.bytes += more;
        true
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_never_pass_the_capacity_and_give_back_on_drop() {
        let budget = UploadBudget::new(100);
        let mut a = budget.reservation();
        assert!(a.grow_to(60));
        let mut b = budget.reservation();
        assert!(!b.grow_to(41), "60 + 41 passes 100");
        assert_eq!(b.bytes(), 0, "a refused growth holds nothing more");
        assert!(b.grow_to(40));
        assert_eq!(budget.held(), 100);
        assert!(a.grow_to(60), "growing to what is held takes nothing");
        drop(a);
        assert_eq!(budget.held(), 40);
        assert!(b.grow_to(100));
        drop(b);
        assert_eq!(budget.held(), 0);
    }
}
