//! The digitize pipeline: image bytes → embroidery [`Design`].
//!
//! Six stages, each run through [`JobContext::run_stage`] so it can be held, failed, cancelled,
//! timed out or stopped by the memory budget and is named in any error:
//!
//! | stage | module | produces |
//! |---|---|---|
//! | `decode` | [`decode`] | pixels (after the format sniff, the header checks and the bomb check) |
//! | `quantize` | [`quantize`] | K thread colours and the image as runs of palette indices |
//! | `segment` | [`segment`] | connected regions per colour, specks merged into neighbours |
//! | `fill` | [`fill`] | tatami rows of stitches, grouped in serpentine pieces |
//! | `sequence` | [`sequence`] | one needle program: colour blocks, travel, trims, jumps |
//! | `serialize` | [`serialize`] | the design as JSON |
//!
//! Each stage charges the memory it holds (its input and what it builds) to the job's budget
//! before allocating, and calls [`JobContext::checkpoint`] inside its loops.
//!
//! Geometry is in integer 0.1 mm units (the unit of DST and EXP), y growing downwards, with the
//! image's top-left corner at (0, 0).

pub mod decode;
pub mod fill;
mod halves;
mod nearest;
pub mod quantize;
pub mod segment;
pub mod sequence;
pub mod serialize;

use plimsoll_spec::{Design, ErrorCode, Stage};

use crate::job::{Charge, Interrupt, JobContext, JobError, StageError};

/// What the caller asks of a digitize job. No defaults here: they live in the contract
/// (`spec/contract.toml`), which the server reads.
#[derive(Debug, Clone, PartialEq)]
pub struct DigitizeParams {
    /// Physical width of the design; the height follows the image's aspect ratio.
    pub width_mm: f64,
    /// Distance between tatami rows.
    pub density_mm: f64,
    /// Number of thread colours (at most; fewer if the image has fewer).
    pub colors: u8,
    /// Longest stitch along a row.
    pub max_stitch_mm: f64,
    /// Images with more pixels are refused with `payload_too_large`.
    pub max_pixels: u64,
}

/// The result of a digitize job: the design and its JSON (what `/v1/digitize` answers).
#[derive(Debug, Clone)]
pub struct DigitizeOutput {
    /// The design, for a caller that exports it without parsing the JSON back.
    pub design: Design,
    /// The design as JSON, the response body, in the parts it was written in.
    pub json: serialize::Json,
}

/// Peak bytes the pipeline holds per image pixel, used by `decode` to refuse an image from its
/// header alone (B2) before a single pixel is allocated.
///
/// Measured with `examples/bench_digitize.rs`, which counts every heap allocation through a
/// counting global allocator. With the stitch work made negligible (`--width-mm 50`), the heap
/// peak of its synthetic 8-bit RGBA posters (flat colours, rings, stripes, noisy edges) was
/// 5.05, 4.40 and 4.20 bytes per pixel at 1, 4 and 16 MP: the decoded buffer (4 B/px) held
/// while `quantize` builds the run-length raster and its 1 MiB histogram. A 16-bit RGBA PNG
/// decodes to 8 B/px, so 10 covers both with room for busier images. Pathological inputs (pure
/// noise: a run per pixel, ~30 B/px in `segment`) are still stopped, while running, because every
/// growing buffer is charged before it grows. The stitches scale with the physical area
/// (`width_mm`), not with pixels, so `fill`, `sequence` and `serialize` charge them separately.
pub const ESTIMATED_BYTES_PER_PIXEL: u64 = 10;

/// The design limits belong to the design format (the OpenAPI document states them too).
pub use plimsoll_spec::design::{MAX_COORDINATE, MAX_STITCHES};

/// Needle units per millimetre.
pub const UNITS_PER_MM: f64 = 10.0;

/// Regions smaller than this (in mm²) are specks: merged into a neighbouring region, because a
/// tatami fill cannot render them (at the default 0.4 mm rows a 1 mm² blob gets two or three
/// stitches) and they would each cost a trim and a jump.
pub const MIN_REGION_MM2: f64 = 1.0;

/// Travel between pieces longer than this (0.1 mm) is trimmed and jumped rather than stitched.
pub const TRIM_THRESHOLD_UNITS: i64 = 20;

/// Longest jump per axis in 0.1 mm: the smaller of the two machine formats' limits (DST ±121,
/// EXP ±127), so every jump of a design is encodable as one record in both.
pub const MAX_JUMP_UNITS: i32 = 121;

/// Runs the six digitize stages on an uploaded image.
pub fn digitize(
    ctx: &mut JobContext,
    image: &[u8],
    params: &DigitizeParams,
) -> Result<DigitizeOutput, JobError> {
    let decoded = ctx.run_stage(Stage::Decode, |ctx| decode::decode(ctx, image, params))?;
    let quantized = ctx.run_stage(Stage::Quantize, |ctx| {
        quantize::quantize(ctx, decoded, params.colors)
    })?;
    let segmented = ctx.run_stage(Stage::Segment, |ctx| {
        segment::segment(ctx, quantized, params.width_mm)
    })?;
    let filled = ctx.run_stage(Stage::Fill, |ctx| fill::fill(ctx, segmented, params))?;
    let design = ctx.run_stage(Stage::Sequence, |ctx| {
        sequence::sequence(ctx, filled, params)
    })?;
    let json = ctx.run_stage(Stage::Serialize, |ctx| serialize::serialize(ctx, &design))?;
    Ok(DigitizeOutput { design, json })
}

/// Heap bytes held by a stage's product, so the next stage can charge what it is given.
pub(crate) trait HeapSize {
    fn heap_bytes(&self) -> u64;
}

pub(crate) fn vec_bytes<T>(v: &Vec<T>) -> u64 {
    (v.capacity() * size_of::<T>()) as u64
}

/// The runs of row `y` in a raster stored as runs: row `y` is `runs[row_start[y]..row_start[y + 1]]`.
pub(crate) fn row_runs<'r, T>(runs: &'r [T], row_start: &[u32], y: u32) -> &'r [T] {
    let y = y as usize;
    &runs[row_start[y] as usize..row_start[y + 1] as usize]
}

/// Makes room for `additional` more elements in `v`, charging the new capacity *before* it is
/// allocated, so a growing buffer can never take the job past its cap.
///
/// A buffer holding more than [`GROW_SLICE_BYTES`] is not grown by `realloc`, which copies it in
/// one uninterruptible call (28 MB of runs took 30 ms of CPU in `quantize` on a 16 MP JPEG, three
/// times the checkpoint interval), but moved into a new allocation slice by slice, with a
/// checkpoint between slices. The contents are the same either way. As with `realloc`, the old
/// buffer lives beside the new one during the copy; the charge is the new capacity, as before.
#[inline]
pub(crate) fn reserve_charged<T: Clone>(
    v: &mut Vec<T>,
    additional: usize,
    charge: &mut Charge<'_>,
    others: u64,
) -> Result<(), Interrupt> {
    // Inlined so that the common case, room enough, costs a compare in a per-element loop.
    if v.capacity() - v.len() >= additional {
        return Ok(());
    }
    let job = charge.job();
    reserve_ticked(v, additional, charge, others, &mut || job.checkpoint())
}

/// [`reserve_charged`], calling `go_on` between the slices of a copy instead of the job's
/// checkpoint: for a half of a stage's work on a helper thread, which must not call the job's
/// context ([`halves`]).
pub(crate) fn reserve_ticked<T: Clone>(
    v: &mut Vec<T>,
    additional: usize,
    charge: &mut Charge<'_>,
    others: u64,
    go_on: &mut dyn FnMut() -> Result<(), Interrupt>,
) -> Result<(), Interrupt> {
    let needed = v.len().saturating_add(additional);
    if needed <= v.capacity() {
        return Ok(());
    }
    let new_cap = needed.max(v.capacity().saturating_mul(2)).max(64);
    charge.resize(others.saturating_add((new_cap * size_of::<T>()) as u64))?;
    let held = v.len() * size_of::<T>();
    if held <= GROW_SLICE_BYTES {
        v.reserve_exact(new_cap - v.len());
        return Ok(());
    }
    let mut grown = Vec::with_capacity(new_cap);
    for slice in v.chunks((GROW_SLICE_BYTES / size_of::<T>().max(1)).max(1)) {
        grown.extend_from_slice(slice);
        go_on()?;
    }
    *v = grown;
    Ok(())
}

/// Bytes of a growing buffer copied between two checkpoints (well under a millisecond of copying
/// and page faults); smaller buffers are grown by `realloc` in one call.
pub(crate) const GROW_SLICE_BYTES: usize = 1 << 20;

/// The slowest rate at which a pixel stage (`decode`, `quantize`, `segment`) works through an
/// image, in pixels per millisecond: the work one checkpoint interval covers, so a stage must
/// look at its cancellation at least once per `checkpoint_interval_ms` × this many pixels.
///
/// Half the slowest stage rate `examples/bench_checkpoints.rs` measured on the project's
/// loaded 2-core machine (release build, photograph-like 16 MP inputs): PNG `decode`, ~49,000
/// pixels per ms; `quantize` and `segment` ran at ~75,000.
pub const PIXELS_PER_MS: u64 = 25_000;

/// The same for the stitch stages (`fill`, `sequence`, `serialize`), in stitches of the
/// finished design per millisecond: half the slowest measured (`serialize`, ~8,000 per ms for
/// ~700K stitches).
pub const STITCHES_PER_MS: u64 = 4_000;

/// Calls [`JobContext::checkpoint`] once per `every` units of work, so hot loops pay for a
/// clock read only every few thousand pixels; or, for a half of a stage's work on two threads,
/// the half's own `go_on` ([`halves`]).
pub(crate) struct Ticker<'a> {
    go_on: Box<dyn FnMut() -> Result<(), Interrupt> + 'a>,
    every: u64,
    done: u64,
}

impl<'a> Ticker<'a> {
    pub(crate) fn new(ctx: &'a JobContext, every: u64) -> Self {
        Ticker::calling(move || ctx.checkpoint(), every)
    }

    /// A ticker that calls `go_on` where [`new`](Self::new)'s checkpoints.
    pub(crate) fn calling(go_on: impl FnMut() -> Result<(), Interrupt> + 'a, every: u64) -> Self {
        Ticker {
            go_on: Box::new(go_on),
            every,
            done: 0,
        }
    }

    /// Checkpoints now, whatever the work since the last one (between the slices of a copy).
    pub(crate) fn now(&mut self) -> Result<(), Interrupt> {
        (self.go_on)()
    }

    #[inline]
    pub(crate) fn tick(&mut self, work: u64) -> Result<(), Interrupt> {
        self.done += work;
        if self.done >= self.every {
            self.done = 0;
            (self.go_on)()?;
        }
        Ok(())
    }
}

/// Number of equal steps for a stitched move of (dx, dy) so that no step, after rounding each
/// intermediate point to whole units (at most √2 off), is longer than `pitch` (≥ 10 units).
pub(crate) fn stitch_steps(dx: i64, dy: i64, pitch: i64) -> i64 {
    let len = ((dx * dx + dy * dy) as f64).sqrt();
    ((len / (pitch as f64 - 1.5)).ceil() as i64).max(1)
}

pub(crate) fn invalid_parameter(message: impl Into<String>) -> StageError {
    StageError::invalid(ErrorCode::InvalidParameter, message)
}
