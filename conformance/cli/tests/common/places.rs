//! The places among the load and fleet tests that may run at once, across the test binaries:
//! file locks in the target's temp folder, so a run without nextest's groups holds the same.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

/// How many load and fleet tests may run at once, across the test binaries (nextest's `alone`
/// group holds the same number, `.config/nextest.toml`). A load profile keeps the machine far
/// from busy (its rates are a few hundred requests a second at most), so two fit beside each
/// other on two cores; beside the timing tests' crowds they did not (a fleet's refusal p99 went
/// from 15 to 69 ms against a 50 ms bound), which is why nothing else runs beside them.
pub const AT_ONCE: usize = 2;

/// The lock files of the [`AT_ONCE`] places, `plimsoll-load-tests.N.lock`.
fn places() -> Vec<File> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    (0..AT_ONCE)
        .map(|n| {
            File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("plimsoll-load-tests.{n}.lock")))
                .unwrap()
        })
        .collect()
}

/// A place among the [`AT_ONCE`] load tests that may run at once, held until dropped: the first
/// free one, waiting until one is.
pub fn one() -> File {
    let mut places = places();
    loop {
        if let Some(free) = places.iter().position(|place| place.try_lock().is_ok()) {
            return places.swap_remove(free);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every place, held until dropped, taken in order (so two takers cannot each hold one and wait
/// for the other's): for a fleet test, five processes that need the machine to themselves.
pub fn every() -> Vec<File> {
    let places = places();
    for place in &places {
        place.lock().unwrap();
    }
    places
}
