//! How a process that runs jobs keeps the memory they free: for the next job, not the kernel.
//!
//! A digitize job allocates a few buffers of tens of megabytes (at 4 MP: 16 MB of decoded
//! pixels, 9 MB of stitches, the 24 MB JSON body) and frees them when it ends. glibc's malloc
//! serves a block that large from `mmap`, or from a heap whose free top it hands back to the
//! kernel past a threshold, unless its own adaptive threshold has risen past the block first:
//! whether a job's buffers come back as memory already mapped or as fresh pages — a page fault
//! and a cleared page for every 4 KB of them — depends on the heap's layout. On the project's
//! machine the same 4 MP job took 29–31 ms with its memory reused and 43–44 ms without, and an
//! unrelated change in `sequence` flipped it from one to the other (docs/benchmarks.md).
//!
//! So the policy is set, not left to the layout: blocks below [`MMAP_THRESHOLD`] come from the
//! heaps and go back to them, and a heap keeps up to [`TRIM_THRESHOLD`] free at its top. What
//! the process holds after a burst is what the burst needed (bounded by the pools' memory caps
//! and the upload budget). Blocks above the threshold, which glibc maps and unmaps per job (it
//! allows no higher threshold), are the ones a job asks for as a [`KeptBuffer`]: a 16 MP
//! image's 64 MB of decoded pixels. The process keeps those itself, up to [`KEPT_BYTES`]; at
//! 16 MP their 16,000 fresh pages were 28 of the decode's 46 ms on the project's machine
//! (docs/benchmarks.md).

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, PoisonError};

/// Blocks of this size or more are mapped on their own: glibc's largest allowed threshold on
/// 64-bit (half its 64 MB heap size), above a 4 MP job's largest buffer (the 24 MB body).
pub const MMAP_THRESHOLD: usize = 32 << 20;

/// Free memory a heap keeps at its top before handing the rest back: room for the pool's
/// simultaneous jobs at 4 MP (about 60 MB each) on the main heap; the other heaps (64 MB at most
/// each) then keep what they hold.
pub const TRIM_THRESHOLD: usize = 256 << 20;

/// Sets the policy for the whole process (once is enough; again is harmless). Whether it took:
/// false where the allocator is not glibc's, which has its own policy.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let set = |param, value: usize| {
            let value = i32::try_from(value).unwrap_or(i32::MAX);
            // SAFETY: `mallopt` takes the allocator's lock; it may be called at any time.
            unsafe { libc::mallopt(param, value) == 1 }
        };
        // Both set: setting either turns glibc's adaptive threshold off.
        set(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) & set(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Idle bytes of [`KeptBuffer`]s the process keeps for the next job: two 16 MP images' decoded
/// pixels (RGBA, 64 MB each), the most a sequence of such jobs reuses; a full pool's other jobs
/// map theirs, as before. What the process holds beyond a burst's needs is bounded by this.
pub const KEPT_BYTES: usize = 128 << 20;

/// The buffers dropped and kept, each at least [`MMAP_THRESHOLD`] bytes, at most [`KEPT_BYTES`]
/// in all.
static KEPT: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A zeroed byte buffer, as `vec![0; len]` gives, for a job's largest blocks: dropped, its memory
/// goes back to the process's keep rather than to the kernel (when it is one of the blocks glibc
/// maps on its own, and the keep has room), and the next job's buffer reuses it, cleared, with
/// its pages already mapped. Clearing 64 MB of mapped memory takes about 3.5 ms, where mapping
/// it afresh took 28: the buffer never holds a previous job's bytes.
#[derive(Debug, Default)]
pub struct KeptBuffer(Vec<u8>);

impl KeptBuffer {
    /// `len` zero bytes, in kept memory when a kept buffer is large enough (the smallest such,
    /// its excess handed back), freshly allocated otherwise.
    pub fn zeroed(len: usize) -> Self {
        let Some(mut bytes) = (len >= MMAP_THRESHOLD).then(|| take_kept(len)).flatten() else {
            return Self(vec![0; len]);
        };
        bytes.clear();
        bytes.resize(len, 0);
        bytes.shrink_to(len);
        Self(bytes)
    }

    /// The bytes the buffer holds in memory (its length, or more when it came with room).
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl Deref for KeptBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl DerefMut for KeptBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl Drop for KeptBuffer {
    fn drop(&mut self) {
        let capacity = self.0.capacity();
        if capacity < MMAP_THRESHOLD {
            return;
        }
        let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        let held: usize = kept.iter().map(Vec::capacity).sum();
        if held + capacity <= KEPT_BYTES {
            kept.push(std::mem::take(&mut self.0));
        }
    }
}

/// The smallest kept buffer of at least `len` bytes, taken out of the keep.
fn take_kept(len: usize) -> Option<Vec<u8>> {
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let (index, _) = kept
        .iter()
        .enumerate()
        .filter(|(_, bytes)| bytes.capacity() >= len)
        .min_by_key(|(_, bytes)| bytes.capacity())?;
    Some(kept.swap_remove(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large buffer comes back zeroed in the memory the last one held, trimmed to its length;
    /// a small one is never kept (glibc's heaps keep those); the keep never holds more than its
    /// bound.
    #[test]
    fn a_large_buffer_is_kept_cleared_and_reused_within_the_bound() {
        let len = MMAP_THRESHOLD + 4096;
        let mut first = KeptBuffer::zeroed(len + 8192);
        first.fill(0xAB);
        let address = first.as_ptr();
        drop(first);
        // Other tests of this process may take it first: look for it among a few takes.
        let taken: Vec<KeptBuffer> = (0..4).map(|_| KeptBuffer::zeroed(len)).collect();
        let reused = taken.iter().find(|b| b.as_ptr() == address);
        let reused = reused.expect("the dropped buffer was not reused");
        assert_eq!(reused.len(), len);
        assert_eq!(reused.capacity(), len, "the excess was not handed back");
        assert!(
            reused.iter().all(|&b| b == 0),
            "a kept buffer came back uncleared"
        );
        drop(taken);
        let held: usize = KEPT.lock().unwrap().iter().map(Vec::capacity).sum();
        assert!(held <= KEPT_BYTES, "the keep holds {held} bytes");

        let small = KeptBuffer::zeroed(4096);
        drop(small);
        assert!(
            KEPT.lock()
                .unwrap()
                .iter()
                .all(|b| b.capacity() >= MMAP_THRESHOLD)
        );
    }
}
