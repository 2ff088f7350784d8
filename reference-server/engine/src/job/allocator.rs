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
//! and the upload budget); blocks above the threshold (a 16 MP job's 64 MB of pixels and
//! ~100 MB body) are still mapped and unmapped per job, as glibc allows no higher threshold.

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
