//! Work split in two halves, one on the job's thread and one on a scoped helper, with the job's
//! checkpoints kept as one thread would keep them (B3).
//!
//! Each half calls its `go_on` before each block of its work. The job's thread checkpoints before
//! each of its own blocks and once for each block the helper starts; its half done, it keeps to
//! the helper's blocks (looking every [`WAIT`]) until the helper's half is done too. So the job
//! passes one checkpoint per block whichever thread works it, every checkpoint is on the job's
//! thread (where the observers and the gap bookkeeping expect it), and no stretch without one is
//! longer than a block. The helper never calls the job's context: once the job's thread is
//! interrupted, the helper's next `go_on` stops it.
//!
//! Used where one stage's work splits cleanly in two (`quantize`'s rows, `serialize`'s stitches)
//! and takes long enough that a lone request's latency gains from the second core. Under a full
//! pool the helper only moves work between the same cores.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::job::{Interrupt, JobContext};

/// What a half calls before each block of its work: `Err` stops the half.
pub(crate) type GoOn<'a> = &'a mut dyn FnMut() -> Result<(), Interrupt>;

/// How long the job's thread sleeps between looks at the helper once its own half is done: a
/// small part of a block's time, so a checkpoint is never far.
const WAIT: std::time::Duration = std::time::Duration::from_micros(50);

/// Runs `first` on the job's thread and `second` on a scoped helper, each calling the `go_on` it
/// is given before each block of its work, and returns both results; the first error wins (the
/// job's own, then the helper's: a charge it was refused).
pub(crate) fn in_two_halves<A, B: Send>(
    ctx: &JobContext,
    first: impl FnOnce(GoOn<'_>) -> Result<A, Interrupt>,
    second: impl FnOnce(GoOn<'_>) -> Result<B, Interrupt> + Send,
) -> Result<(A, B), Interrupt> {
    let stop = AtomicBool::new(false);
    let helper_blocks = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| {
            second(&mut || {
                if stop.load(Ordering::Relaxed) {
                    return Err(Interrupt::Cancelled);
                }
                helper_blocks.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
        });
        let check = || {
            ctx.checkpoint()
                .inspect_err(|_| stop.store(true, Ordering::Relaxed))
        };
        let seen = Cell::new(0);
        let catch_up = || {
            let started = helper_blocks.load(Ordering::Relaxed);
            while seen.get() < started {
                check()?;
                seen.set(seen.get() + 1);
            }
            Ok::<(), Interrupt>(())
        };
        let mut own = first(&mut || check().and_then(|()| catch_up()));
        // Its half done, it waits for the helper's, still at its checkpoints.
        while own.is_ok() && !helper.is_finished() {
            std::thread::sleep(WAIT);
            if let Err(interrupt) = catch_up() {
                own = Err(interrupt);
            }
        }
        if own.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let helped = helper
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let own = own.and_then(|a| catch_up().map(|()| a));
        Ok((own?, helped?))
    })
}
