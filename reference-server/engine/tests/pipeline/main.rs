//! The digitize pipeline and its job context, end to end (no HTTP).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use image::{ImageEncoder, Rgba, RgbaImage};
use plimsoll_engine::job::{Interrupt, JobConfig, JobContext, JobError, JobErrorKind};
use plimsoll_engine::pipeline::{
    DigitizeOutput, DigitizeParams, ESTIMATED_BYTES_PER_PIXEL, digitize,
};
use plimsoll_spec::{Design, ErrorCode, HookDirective, Stage, StitchCommand};
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

mod bad_input;
mod bodies;
mod checkpoints;
mod designs;
mod interrupts;
mod jpeg;

/// Counts heap bytes per thread, so a test can check what one job really allocated (other tests
/// run on other threads).
struct PerThreadCounting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let v = live.get() + delta;
        live.set(v);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(v)));
    });
}

unsafe impl GlobalAlloc for PerThreadCounting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: PerThreadCounting = PerThreadCounting;

/// Runs `f` and returns the most heap this thread held during it, above what it held before.
fn heap_peak_of<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let r = f();
    (r, (PEAK.with(Cell::get) - before).max(0) as u64)
}

const DIGITIZE: [Stage; 6] = [
    Stage::Decode,
    Stage::Quantize,
    Stage::Segment,
    Stage::Fill,
    Stage::Sequence,
    Stage::Serialize,
];

fn config(root: &Path) -> JobConfig {
    JobConfig {
        cancel: CancellationToken::new(),
        deadline: Instant::now() + Duration::from_secs(120),
        memory_cap_bytes: 1 << 30,
        upload_bytes: 0,
        temp_root: root.to_path_buf(),
        hooks: Vec::new(),
        progress: Default::default(),
    }
}

fn params(width_mm: f64) -> DigitizeParams {
    DigitizeParams {
        width_mm,
        density_mm: 0.4,
        colors: 8,
        max_stitch_mm: 3.0,
        max_pixels: 20_000_000,
    }
}

fn png(img: &RgbaImage) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut out))
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ExtendedColorType::Rgba8,
        )
        .unwrap();
    out
}

fn jpeg(img: &RgbaImage) -> Vec<u8> {
    let rgb = image::DynamicImage::ImageRgba8(img.clone()).into_rgb8();
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(Cursor::new(&mut out), 90)
        .write_image(
            rgb.as_raw(),
            rgb.width(),
            rgb.height(),
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    out
}

const CLEAR: Rgba<u8> = Rgba([0, 0, 0, 0]);
const RED: Rgba<u8> = Rgba([200, 30, 40, 255]);
const BLUE: Rgba<u8> = Rgba([20, 40, 160, 255]);
const GOLD: Rgba<u8> = Rgba([230, 170, 20, 255]);

/// An opaque rectangle `[x0, x1) × [y0, y1)` on a transparent background.
fn rectangle(w: u32, h: u32, (x0, y0, x1, y1): (u32, u32, u32, u32)) -> RgbaImage {
    RgbaImage::from_fn(w, h, |x, y| {
        if x >= x0 && x < x1 && y >= y0 && y < y1 {
            RED
        } else {
            CLEAR
        }
    })
}

/// Several colours, a ring (a region with a hole), stripes and pixel noise.
fn poster(w: u32, h: u32) -> RgbaImage {
    let mut seed = 7u64;
    RgbaImage::from_fn(w, h, |x, y| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (u, v) = (x as f64 / w as f64, y as f64 / h as f64);
        let d = ((u - 0.3).powi(2) + (v - 0.4).powi(2)).sqrt();
        let c = if (0.1..0.25).contains(&d) {
            RED
        } else if u > 0.6 && ((u + v) * 12.0).fract() < 0.5 {
            GOLD
        } else {
            BLUE
        };
        // One pixel in 500 is noise of a fourth colour: specks that must be merged away.
        if (seed >> 33).is_multiple_of(500) {
            Rgba([20, 200, 20, 255])
        } else {
            c
        }
    })
}

fn run(
    root: &Path,
    image: &[u8],
    params: &DigitizeParams,
    adjust: impl FnOnce(&mut JobConfig),
) -> Result<DigitizeOutput, JobError> {
    let mut cfg = config(root);
    adjust(&mut cfg);
    let mut ctx = JobContext::new(cfg).unwrap();
    digitize(&mut ctx, image, params)
}

/// The error of a job expected to fail (a design in its place is reported by size, not dumped).
fn failed(result: Result<DigitizeOutput, JobError>) -> JobError {
    match result {
        Ok(out) => panic!(
            "expected the job to fail, it made a design of {} stitches",
            out.design.stitch_count
        ),
        Err(e) => e,
    }
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).unwrap().next().is_none()
}

fn dist(a: (i32, i32), b: (i32, i32)) -> f64 {
    (((a.0 - b.0) as f64).powi(2) + ((a.1 - b.1) as f64).powi(2)).sqrt()
}

/// Checks what every design must satisfy: stitches no longer than the maximum, jumps within
/// ±121 per axis and preceded by a trim (or at the start / after a colour change), one colour
/// block per thread, true extents and stitch count, `end` last.
fn assert_well_formed(design: &Design, max_stitch_units: f64) {
    let mut at = (0, 0);
    let mut prev = None;
    let (mut min, mut max) = ((i32::MAX, i32::MAX), (i32::MIN, i32::MIN));
    let mut stitches = 0;
    let mut changes = 0;
    for s in &design.stitches {
        let p = (s.x, s.y);
        match s.cmd {
            StitchCommand::Stitch => {
                assert!(
                    dist(at, p) <= max_stitch_units + 1e-9,
                    "stitch {at:?} -> {p:?}"
                );
                stitches += 1;
            }
            StitchCommand::Jump => {
                assert!((p.0 - at.0).abs() <= 121 && (p.1 - at.1).abs() <= 121);
                assert!(
                    matches!(
                        prev,
                        None | Some(
                            StitchCommand::Jump | StitchCommand::Trim | StitchCommand::ColorChange
                        )
                    ),
                    "a jump after {prev:?} without a trim"
                );
            }
            StitchCommand::ColorChange => {
                assert_eq!(prev, Some(StitchCommand::Trim));
                changes += 1;
                assert_eq!(p, at);
            }
            StitchCommand::Trim | StitchCommand::End => assert_eq!(p, at),
        }
        min = (min.0.min(p.0), min.1.min(p.1));
        max = (max.0.max(p.0), max.1.max(p.1));
        at = p;
        prev = Some(s.cmd);
    }
    assert_eq!(
        design.stitches.last().map(|s| s.cmd),
        Some(StitchCommand::End)
    );
    assert_eq!(design.stitch_count, stitches);
    if stitches > 0 {
        assert_eq!(changes + 1, design.threads.len());
        let e = design.extents;
        assert_eq!(
            (e.min_x, e.min_y, e.max_x, e.max_y),
            (min.0, min.1, max.0, max.1)
        );
    }
}
