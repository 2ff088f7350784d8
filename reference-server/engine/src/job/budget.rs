//! The per-job memory budget (B2): stages charge what they hold before they allocate.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Interrupt;

/// The memory budget shared by the job and its outstanding charges.
#[derive(Debug)]
pub(super) struct Budget {
    pub(super) cap: u64,
    pub(super) used: AtomicU64,
    pub(super) peak: AtomicU64,
}

impl Budget {
    /// A budget of `cap` bytes with `held` already charged (the request body the job holds).
    pub(super) fn charged(cap: u64, held: u64) -> Budget {
        Budget {
            cap,
            used: AtomicU64::new(held),
            peak: AtomicU64::new(held),
        }
    }

    // clause: B2 — per-request accounting, charged before allocating
    pub(super) fn try_add(&self, bytes: u64) -> Result<(), Interrupt> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let total = used.saturating_add(bytes);
            if total > self.cap {
                return Err(Interrupt::MemoryCapExceeded {
                    requested_bytes: total,
                    cap_bytes: self.cap,
                });
            }
            match self
                .used
                .compare_exchange_weak(used, total, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(total, Ordering::Relaxed);
                    return Ok(());
                }
                Err(actual) => used = actual,
            }
        }
    }

    fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Memory held against the job's budget; given back when dropped.
#[derive(Debug)]
#[must_use = "the charge is released as soon as it is dropped"]
pub struct Charge<'a> {
    /// The job charged; its budget holds the bytes.
    pub(super) ctx: &'a super::JobContext,
    pub(super) bytes: u64,
}

impl<'a> Charge<'a> {
    /// The bytes this charge holds against the budget.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Changes the amount held to `bytes` (growing is refused past the cap; the old amount stays
    /// held then). Lets a stage track a buffer that grows, charging *before* it reserves.
    pub fn resize(&mut self, bytes: u64) -> Result<(), Interrupt> {
        if bytes > self.bytes {
            self.ctx.budget.try_add(bytes - self.bytes)?;
        } else {
            self.ctx.budget.release(self.bytes - bytes);
        }
        self.bytes = bytes;
        Ok(())
    }

    /// The job charged, whose checkpoint is at hand for work done under the charge (a buffer
    /// of tens of megabytes copied as it grows: `pipeline::reserve_charged`).
    pub(crate) fn job(&self) -> &'a super::JobContext {
        self.ctx
    }

    /// Grows the amount held by `bytes`.
    pub fn grow(&mut self, bytes: u64) -> Result<(), Interrupt> {
        self.resize(self.bytes.saturating_add(bytes))
    }
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.ctx.budget.release(self.bytes);
    }
}
