//! How often each stage looks at its cancellation, held against the work it does (B3). No
//! clock: a wall-clock bound in a test on a shared machine measures the machine. What a test can
//! hold is the work between checkpoints: every stage checkpoints at least once per the work the
//! contract's `checkpoint_interval_ms` covers at the engine's documented rates
//! ([`PIXELS_PER_MS`], [`STITCHES_PER_MS`]), and a stage given more work checkpoints more often.
//! `examples/bench_checkpoints.rs` measures the gaps themselves.

use std::sync::Mutex;

use plimsoll_engine::job::CheckpointObserver;
use plimsoll_engine::pipeline::{PIXELS_PER_MS, STITCHES_PER_MS};
use plimsoll_spec::Contract;

use super::*;

/// Counts each stage's checkpoints.
#[derive(Debug, Default)]
struct Counter {
    state: Mutex<(u64, Vec<(Stage, u64)>)>,
}

impl CheckpointObserver for Counter {
    fn stage_started(&self, _stage: Stage) {
        self.state.lock().unwrap().0 = 0;
    }

    fn checkpoint(&self) {
        self.state.lock().unwrap().0 += 1;
    }

    fn stage_ended(&self, stage: Stage) {
        let mut state = self.state.lock().unwrap();
        let n = state.0;
        state.1.push((stage, n));
    }
}

/// A photograph stand-in: colour gradients, hard-edged shaded discs, and per-pixel noise, so
/// every stage has real work (thousands of colours, many small regions, ragged rows).
fn photograph(side: u32) -> RgbaImage {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let s = f64::from(side);
    RgbaImage::from_fn(side, side, |x, y| {
        let (u, v) = (f64::from(x) / s, f64::from(y) / s);
        let mut rgb = [
            120.0 + 90.0 * (3.1 * u + 1.3 * v).sin(),
            110.0 + 80.0 * (2.3 * v - 1.7 * u).cos(),
            140.0 + 70.0 * (5.0 * u * v + 0.5).sin(),
        ];
        for k in 0..12u64 {
            let r = mix(k + 1);
            let (cx, cy) = (
                (r & 0xFFFF) as f64 / 65535.0,
                ((r >> 16) & 0xFFFF) as f64 / 65535.0,
            );
            let radius = 0.04 + 0.1 * ((r >> 32) & 0xFFFF) as f64 / 65535.0;
            let (dx, dy) = (u - cx, v - cy);
            if dx * dx + dy * dy < radius * radius {
                let shade = 0.75 + 0.25 * (dx - dy) / radius;
                rgb = [8, 24, 40].map(|b| f64::from((r >> b) as u8 & 0xF0) * shade + 20.0);
            }
        }
        let noise = mix(u64::from(y) << 32 | u64::from(x));
        let px = |c: usize| {
            let n = ((noise >> (c * 8)) & 0xFF) as f64 / 255.0 * 24.0 - 12.0;
            (rgb[c] + n).round().clamp(0.0, 255.0) as u8
        };
        Rgba([px(0), px(1), px(2), 255])
    })
}

/// Digitizes `image` watched by a [`Counter`]: each stage's checkpoints, and the stitch count.
fn checkpoints(image: &[u8], width_mm: f64) -> (Vec<(Stage, u64)>, u64) {
    let root = tempfile::tempdir().unwrap();
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    let counter = Arc::new(Counter::default());
    ctx.observe(counter.clone());
    let out = digitize(&mut ctx, image, &params(width_mm)).unwrap();
    let counts = std::mem::take(&mut counter.state.lock().unwrap().1);
    assert_eq!(counts.iter().map(|c| c.0).collect::<Vec<_>>(), DIGITIZE);
    (counts, out.design.stitches.len() as u64)
}

fn is_pixel_stage(stage: Stage) -> bool {
    matches!(stage, Stage::Decode | Stage::Quantize | Stage::Segment)
}

#[test]
fn every_stage_checkpoints_at_least_once_per_interval_of_work() {
    let interval_ms = Contract::embedded().cancellation().checkpoint_interval_ms;
    let pixels_per_interval = interval_ms * PIXELS_PER_MS;
    let stitches_per_interval = interval_ms * STITCHES_PER_MS;
    let photo = photograph(1000);
    for (format, image) in [("PNG", png(&photo)), ("JPEG", jpeg(&photo))] {
        let (counts, stitches) = checkpoints(&image, 300.0);
        for (stage, n) in counts {
            let (work, per_interval) = if is_pixel_stage(stage) {
                (1_000_000, pixels_per_interval)
            } else {
                (stitches, stitches_per_interval)
            };
            assert!(
                n >= work.div_ceil(per_interval),
                "{format} {stage}: {n} checkpoints for {work} units of work, at most \
                 {per_interval} of which fit in {interval_ms} ms"
            );
        }
    }
}

#[test]
fn a_stage_given_four_times_the_work_checkpoints_at_least_twice_as_often() {
    // Four times the pixels (twice the rows, twice the row length) at the same physical size;
    // then four times the area (twice the stitch rows, twice as long) from the same image. Every
    // stage's work at least doubles (it is per row at worst), so its checkpoints must: a loop
    // that lost its checkpoint would leave the count where it was.
    let small = png(&photograph(400));
    let big = png(&photograph(800));
    let (pixels_small, _) = checkpoints(&small, 120.0);
    let (pixels_big, _) = checkpoints(&big, 120.0);
    let (stitches_small, n_small) = checkpoints(&small, 120.0);
    let (stitches_big, n_big) = checkpoints(&small, 240.0);
    assert!(n_big >= 3 * n_small, "{n_small} then {n_big} stitches");
    for (((stage, a), (_, b)), ((_, c), (_, d))) in pixels_small
        .into_iter()
        .zip(pixels_big)
        .zip(stitches_small.into_iter().zip(stitches_big))
    {
        let (before, after) = if is_pixel_stage(stage) {
            (a, b)
        } else {
            (c, d)
        };
        assert!(
            after >= 2 * before,
            "{stage}: {before} checkpoints, then {after} for four times the work"
        );
    }
}

/// Counts the decode stage's checkpoints passed while this thread holds at least `raster` more
/// heap than when the stage started: those that come once the decoded pixels' buffer exists.
#[derive(Debug)]
struct RasterWatch {
    raster: isize,
    state: Mutex<(Option<isize>, u64)>,
}

impl CheckpointObserver for RasterWatch {
    fn stage_started(&self, stage: Stage) {
        if stage == Stage::Decode {
            self.state.lock().unwrap().0 = Some(LIVE.with(std::cell::Cell::get));
        }
    }

    fn checkpoint(&self) {
        let mut state = self.state.lock().unwrap();
        if let Some(base) = state.0
            && LIVE.with(std::cell::Cell::get) - base >= self.raster
        {
            state.1 += 1;
        }
    }

    fn stage_ended(&self, _stage: Stage) {
        self.state.lock().unwrap().0 = None;
    }
}

/// A JPEG is decoded as its input is read, with checkpoints in between (issue 39): the decode
/// checkpoints while it fills its pixels at least once per interval of pixel work. Decoding the
/// whole file in one call, as the image crate does, reads (and checkpoints) only before the
/// pixels' buffer exists: one checkpoint would come after it, at the stage's end.
#[test]
fn a_jpeg_decode_checkpoints_while_it_fills_its_pixels() {
    let interval_ms = Contract::embedded().cancellation().checkpoint_interval_ms;
    let side = 1000;
    let pixels = u64::from(side) * u64::from(side);
    let watch = Arc::new(RasterWatch {
        raster: (pixels * 3) as isize,
        state: Mutex::new((None, 0)),
    });
    let root = tempfile::tempdir().unwrap();
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    ctx.observe(watch.clone());
    digitize(&mut ctx, &jpeg(&photograph(side)), &params(300.0)).unwrap();
    let while_filling = watch.state.lock().unwrap().1;
    let needed = pixels.div_ceil(interval_ms * PIXELS_PER_MS);
    assert!(
        while_filling >= needed,
        "{while_filling} checkpoints while decoding {pixels} pixels, at most {} of which fit in \
         {interval_ms} ms",
        interval_ms * PIXELS_PER_MS
    );
}
