//! The digitize pipeline and its job context, end to end (no HTTP).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use image::{ImageEncoder, Rgba, RgbaImage};
use plimsoll_server::job::{Interrupt, JobConfig, JobContext, JobError, JobErrorKind};
use plimsoll_server::pipeline::{
    DigitizeOutput, DigitizeParams, ESTIMATED_BYTES_PER_PIXEL, digitize,
};
use plimsoll_spec::{Design, ErrorCode, HookDirective, Stage, StitchCommand};
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

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
        temp_root: root.to_path_buf(),
        hooks: Vec::new(),
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

#[test]
fn a_solid_rectangle_is_covered_with_the_stitch_count_its_area_needs() {
    let root = tempfile::tempdir().unwrap();
    // 0.5 mm per pixel: the rectangle is 150 mm × 60 mm at (25 mm, 20 mm).
    let img = rectangle(400, 200, (50, 40, 350, 160));
    let p = params(200.0);
    let out = run(root.path(), &png(&img), &p, |_| {}).unwrap();
    let d = &out.design;
    assert_well_formed(d, 30.0);
    assert_eq!(d.threads.len(), 1);
    assert_eq!(d.threads[0].color, "#c81e28");
    assert_eq!((d.width_mm, d.height_mm), (200.0, 100.0));

    let area = 150.0 * 60.0;
    let expected = area / (p.density_mm * p.max_stitch_mm);
    let n = d.stitch_count as f64;
    assert!(
        (n - expected).abs() / expected < 0.15,
        "{n} stitches, expected about {expected}"
    );

    // Every stitch inside the rectangle; interior points of a row on that row's staggered grid.
    let (rx0, ry0, rx1, ry1) = (250, 200, 1750, 800);
    let stitches: Vec<_> = d
        .stitches
        .iter()
        .filter(|s| s.cmd == StitchCommand::Stitch)
        .collect();
    for s in &stitches {
        assert!(
            s.x >= rx0 && s.x <= rx1 && s.y >= ry0 && s.y <= ry1,
            "{s:?} outside"
        );
    }
    let mut phases = std::collections::BTreeMap::new();
    for s in &stitches {
        if s.x > rx0 && s.x < rx1 {
            phases
                .entry(s.y)
                .or_insert_with(std::collections::BTreeSet::new)
                .insert(s.x % 30);
        }
    }
    for (y, set) in &phases {
        assert_eq!(set.len(), 1, "row {y} has points off its grid: {set:?}");
        let row = (*y - 2) / 4;
        assert_eq!(*set.iter().next().unwrap(), (row % 3) * 10, "row {y} phase");
    }

    // Coverage: each row of stitches covers ±density/2 around it; IoU with the rectangle.
    let (w, h) = (2000usize, 1000usize);
    let mut covered = vec![false; w * h];
    for pair in d.stitches.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.cmd == StitchCommand::Stitch && b.cmd == StitchCommand::Stitch && a.y == b.y {
            let (x0, x1) = (a.x.min(b.x) as usize, a.x.max(b.x) as usize);
            for y in (a.y - 2).max(0) as usize..(a.y + 2) as usize {
                covered[y * w + x0..y * w + x1]
                    .iter_mut()
                    .for_each(|c| *c = true);
            }
        }
    }
    let (mut inter, mut union) = (0u64, 0u64);
    for y in 0..h {
        for x in 0..w {
            let inside =
                x >= rx0 as usize && x < rx1 as usize && y >= ry0 as usize && y < ry1 as usize;
            let c = covered[y * w + x];
            inter += u64::from(inside && c);
            union += u64::from(inside || c);
        }
    }
    let iou = inter as f64 / union as f64;
    assert!(iou >= 0.9, "IoU {iou}");

    // The same rectangle at twice the resolution and the same physical size: same stitches.
    let img2 = rectangle(800, 400, (100, 80, 700, 320));
    let out2 = run(root.path(), &png(&img2), &p, |_| {}).unwrap();
    let n2 = out2.design.stitch_count as f64;
    assert!(
        (n2 - n).abs() / n < 0.02,
        "{n} vs {n2}: stitch count must follow mm², not pixels"
    );
    // And twice the physical width: four times the area, four times the stitches.
    let out3 = run(root.path(), &png(&img), &params(400.0), |_| {}).unwrap();
    let ratio = out3.design.stitch_count as f64 / n;
    assert!((ratio - 4.0).abs() < 0.3, "ratio {ratio}");
    assert!(is_empty_dir(root.path()));
}

#[test]
fn colours_regions_specks_and_sequencing() {
    let root = tempfile::tempdir().unwrap();
    let img = poster(300, 200);
    let mut p = params(150.0);
    p.colors = 4;
    let out = run(root.path(), &png(&img), &p, |_| {}).unwrap();
    let d = &out.design;
    assert_well_formed(d, 30.0);
    // The green noise is a palette colour but every region of it is a speck: merged away.
    let colors: Vec<&str> = d.threads.iter().map(|t| t.color.as_str()).collect();
    assert_eq!(colors.len(), 3, "{colors:?}");
    for want in ["#1428a0", "#c81e28", "#e6aa14"] {
        assert!(colors.contains(&want), "{want} missing from {colors:?}");
    }
    // Largest colour first: blue is the background.
    assert_eq!(colors[0], "#1428a0");

    // Colour blocks go largest area first, whatever the palette order.
    let img = RgbaImage::from_fn(200, 100, |x, _| match x {
        0..120 => Rgba([250, 240, 100, 255]),
        120..170 => Rgba([120, 130, 140, 255]),
        _ => Rgba([20, 20, 20, 255]),
    });
    let blocks = run(root.path(), &png(&img), &params(100.0), |_| {}).unwrap();
    let order: Vec<&str> = blocks
        .design
        .threads
        .iter()
        .map(|t| t.color.as_str())
        .collect();
    assert_eq!(order, ["#faf064", "#78828c", "#141414"]);
    // The JSON is exactly serde_json's rendering of the design.
    assert_eq!(out.json, serde_json::to_vec(d).unwrap());
    assert_eq!(serde_json::from_slice::<Design>(&out.json).unwrap(), *d);
}

#[test]
fn jpeg_and_sixteen_bit_png_and_transparent_images_digitize() {
    let root = tempfile::tempdir().unwrap();
    let img = rectangle(120, 80, (10, 10, 110, 70));
    let out = run(root.path(), &jpeg(&img), &params(60.0), |_| {}).unwrap();
    assert!(out.design.stitch_count > 500);
    assert_well_formed(&out.design, 30.0);

    let img16 = image::DynamicImage::ImageRgba8(img.clone()).into_rgba16();
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut bytes))
        .write_image(
            &img16
                .as_raw()
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect::<Vec<u8>>(),
            120,
            80,
            image::ExtendedColorType::Rgba16,
        )
        .unwrap();
    let out16 = run(root.path(), &bytes, &params(60.0), |_| {}).unwrap();
    let out8 = run(root.path(), &png(&img), &params(60.0), |_| {}).unwrap();
    assert_eq!(out16.design, out8.design);

    // Luma + alpha: the same shape in grey, transparent outside.
    let la = image::GrayAlphaImage::from_fn(120, 80, |x, y| {
        let inside = img.get_pixel(x, y)[3] == 255;
        image::LumaA([90, if inside { 255 } else { 0 }])
    });
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut bytes))
        .write_image(la.as_raw(), 120, 80, image::ExtendedColorType::La8)
        .unwrap();
    let out_la = run(root.path(), &bytes, &params(60.0), |_| {}).unwrap();
    assert_eq!(out_la.design.stitches, out8.design.stitches);
    assert_eq!(out_la.design.threads[0].color, "#5a5a5a");

    let clear = RgbaImage::from_pixel(50, 50, CLEAR);
    let out = run(root.path(), &png(&clear), &params(60.0), |_| {}).unwrap();
    assert_eq!(out.design.stitch_count, 0);
    assert!(out.design.threads.is_empty());
    assert_eq!(out.design.stitches.len(), 1);
    assert_eq!(out.design.stitches[0].cmd, StitchCommand::End);
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// A PNG whose IHDR claims `w × h` RGBA with a tiny IDAT: a header-only lie.
fn png_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    // zlib stream with one stored block of 5 zero bytes.
    chunk(
        &mut out,
        b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x05, 0x00, 0xFA, 0xFF, 0, 0, 0, 0, 0, 0, 0x05, 0, 0x01,
        ],
    );
    chunk(&mut out, b"IEND", &[]);
    out
}

/// Recomputes every chunk CRC, so mutations reach the decoder rather than the checksum test.
fn fix_crcs(png: &mut [u8]) {
    let mut i = 8;
    while i + 12 <= png.len() {
        let len = u32::from_be_bytes(png[i..i + 4].try_into().unwrap()) as usize;
        let Some(end) = (i + 8).checked_add(len) else {
            return;
        };
        if end + 4 > png.len() {
            return;
        }
        let crc = crc32fast::hash(&png[i + 4..end]);
        png[end..end + 4].copy_from_slice(&crc.to_be_bytes());
        i = end + 4;
    }
}

fn expect_code(result: Result<DigitizeOutput, JobError>, code: ErrorCode, what: &str) -> JobError {
    let err = result
        .err()
        .unwrap_or_else(|| panic!("{what}: expected {code}, got a design"));
    assert_eq!(err.kind.code(), Some(code), "{what}: {err:?}");
    assert_eq!(err.failed_stage, Stage::Decode, "{what}");
    assert!(err.completed_stages.is_empty(), "{what}");
    err
}

#[test]
fn each_bad_input_gets_its_code() {
    let root = tempfile::tempdir().unwrap();
    let good = png(&poster(64, 48));
    let p = params(50.0);
    let go = |bytes: &[u8], p: &DigitizeParams| run(root.path(), bytes, p, |_| {});

    let truncated = &good[..good.len() / 2];
    expect_code(
        go(truncated, &p),
        ErrorCode::MalformedImage,
        "truncated PNG",
    );

    let mut corrupt_jpeg = jpeg(&poster(64, 48));
    // Keep SOI and the first segment; garble everything after (tables, frame, scan).
    for b in corrupt_jpeg[20..].iter_mut() {
        *b = 0xFF;
    }
    expect_code(
        go(&corrupt_jpeg, &p),
        ErrorCode::MalformedImage,
        "corrupt JPEG",
    );
    let half_jpeg = jpeg(&poster(64, 48))[..100].to_vec();
    expect_code(
        go(&half_jpeg, &p),
        ErrorCode::MalformedImage,
        "truncated JPEG header",
    );

    let gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";
    let e = expect_code(go(gif, &p), ErrorCode::UnsupportedFormat, "GIF");
    assert!(e.to_string().contains("GIF"), "{e}");
    expect_code(
        go(b"II*\x00\x08\x00\x00\x00", &p),
        ErrorCode::UnsupportedFormat,
        "TIFF",
    );
    expect_code(go(b"%PDF-1.7\n", &p), ErrorCode::UnsupportedFormat, "PDF");
    expect_code(
        go(b"hello, world", &p),
        ErrorCode::UnsupportedFormat,
        "text",
    );
    let random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    expect_code(
        go(&random, &p),
        ErrorCode::UnsupportedFormat,
        "random bytes",
    );
    expect_code(go(b"", &p), ErrorCode::EmptyBody, "empty");

    expect_code(
        go(&png_claiming(0, 10), &p),
        ErrorCode::MalformedImage,
        "zero width",
    );
    expect_code(
        go(&png_claiming(10, 0), &p),
        ErrorCode::MalformedImage,
        "zero height",
    );

    let mut small = p.clone();
    small.max_pixels = 64 * 48 - 1;
    expect_code(
        go(&good, &small),
        ErrorCode::PayloadTooLarge,
        "past max_pixels",
    );

    // A decompression bomb: 10^10 pixels claimed in ~100 bytes. Refused from the header, fast.
    let started = Instant::now();
    let e = expect_code(
        go(&png_claiming(100_000, 100_000), &p),
        ErrorCode::MemoryCapExceeded,
        "bomb",
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    match e.kind {
        JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded {
            requested_bytes,
            cap_bytes,
        }) => {
            assert_eq!(requested_bytes, 10_000_000_000 * ESTIMATED_BYTES_PER_PIXEL);
            assert_eq!(cap_bytes, 1 << 30);
        }
        other => panic!("{other:?}"),
    }
    // A header that passes but a body that is not what it claims: malformed, not a crash.
    expect_code(
        go(&png_claiming(300, 300), &p),
        ErrorCode::MalformedImage,
        "lying header",
    );

    let mut bad = p.clone();
    bad.colors = 0;
    expect_code(go(&good, &bad), ErrorCode::InvalidParameter, "zero colours");
    let mut bad = p.clone();
    bad.width_mm = f64::NAN;
    expect_code(go(&good, &bad), ErrorCode::InvalidParameter, "NaN width");
    assert!(is_empty_dir(root.path()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random bytes and mutated PNGs (with and without valid checksums) never panic: every
    /// outcome is a design or an input/memory error.
    #[test]
    fn no_input_makes_the_pipeline_panic(
        random in proptest::collection::vec(any::<u8>(), 0..256),
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        fix in any::<bool>(),
        truncate in any::<bool>(),
    ) {
        let root = tempfile::tempdir().unwrap();
        let mut p = params(40.0);
        p.max_pixels = 1_000_000;
        let mut mutated = BASE_PNG.with(|b| b.clone());
        for (at, byte) in &mutations {
            let i = at.index(mutated.len() - 8) + 8; // keep the signature: reach the decoder
            mutated[i] = *byte;
        }
        if truncate {
            mutated.truncate(cut.index(mutated.len()).max(8));
        }
        if fix {
            fix_crcs(&mut mutated);
        }
        for input in [&random, &mutated] {
            match run(root.path(), input, &p, |c| c.memory_cap_bytes = 64 << 20) {
                Ok(out) => assert_well_formed(&out.design, 30.0),
                Err(e) => prop_assert!(
                    matches!(
                        e.kind,
                        JobErrorKind::Invalid { .. } | JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
                    ),
                    "{e:?}"
                ),
            }
        }
        prop_assert!(is_empty_dir(root.path()));
    }
}

thread_local! {
    static BASE_PNG: Vec<u8> = png(&poster(40, 30));
}

#[test]
fn cancellation_stops_a_real_four_megapixel_job_within_a_second() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(2000, 2000));
    let cfg = config(root.path());
    let token = cfg.cancel.clone();
    let mut ctx = JobContext::new(cfg).unwrap();
    let progress = ctx.progress();
    let canceller = std::thread::spawn(move || {
        // Cancel 50 ms into the job, once it is inside a pixel or stitch loop (past decode).
        std::thread::sleep(Duration::from_millis(50));
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            let (current, completed) = progress.snapshot();
            if let Some(stage) = current.filter(|s| *s != Stage::Decode) {
                token.cancel();
                return (Instant::now(), Some(stage));
            }
            if completed.len() == DIGITIZE.len() || Instant::now() > give_up {
                return (Instant::now(), None);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    // 2000 mm wide: ~3M stitches, so even an optimised build is still running at 50 ms.
    let result = digitize(&mut ctx, &image, &params(2000.0));
    let returned = Instant::now();
    let (cancelled_at, stage) = canceller.join().unwrap();
    let stage = stage.expect("the job was still running when cancelled");
    let err = failed(result);
    assert_eq!(err.kind, JobErrorKind::Interrupted(Interrupt::Cancelled));
    let lag = returned.duration_since(cancelled_at);
    assert!(
        lag < Duration::from_secs(1),
        "stopped {lag:?} after the cancel"
    );
    // Stopped inside the stage that was running (its loop saw the flag) — or, if the cancel
    // landed on a stage boundary, at the start of the next one.
    let at = DIGITIZE.iter().position(|s| *s == stage).unwrap();
    assert!(
        err.failed_stage == stage || DIGITIZE.get(at + 1) == Some(&err.failed_stage),
        "cancelled during {stage}, failed at {}",
        err.failed_stage
    );
    let failed_at = DIGITIZE
        .iter()
        .position(|s| *s == err.failed_stage)
        .unwrap();
    assert_eq!(err.completed_stages, DIGITIZE[..failed_at]);
    drop(ctx);
    assert!(is_empty_dir(root.path()));
}

#[test]
fn the_deadline_stops_a_job_within_a_second() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(1000, 1000));
    let started = Instant::now();
    // 2000 mm wide: ~3M stitches, well past 100 ms even in an optimised build.
    let err = failed(run(root.path(), &image, &params(2000.0), |c| {
        c.deadline = Instant::now() + Duration::from_millis(100)
    }));
    assert_eq!(
        err.kind,
        JobErrorKind::Interrupted(Interrupt::DeadlineExceeded)
    );
    assert_eq!(err.kind.code(), Some(ErrorCode::Timeout));
    assert!(
        started.elapsed() < Duration::from_millis(1100),
        "{:?}",
        started.elapsed()
    );
    assert!(is_empty_dir(root.path()));

    // A held stage observes the deadline too.
    let started = Instant::now();
    let err = failed(run(
        root.path(),
        &png(&poster(40, 30)),
        &params(40.0),
        |c| {
            c.deadline = Instant::now() + Duration::from_millis(150);
            c.hooks = vec![HookDirective::Hold {
                stage: Stage::Fill,
                ms: 10_000,
            }];
        },
    ));
    assert_eq!(
        (err.kind, err.failed_stage),
        (
            JobErrorKind::Interrupted(Interrupt::DeadlineExceeded),
            Stage::Fill
        )
    );
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[test]
fn the_memory_budget_names_the_stage_that_ran_out() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&rectangle(512, 512, (0, 0, 512, 512)));
    // Enough for the pixels (512² × 10 = 2.5 MiB estimated), not for 1.6M stitches of 1400 mm².
    let (err, peak) = heap_peak_of(|| {
        failed(run(root.path(), &image, &params(1400.0), |c| {
            c.memory_cap_bytes = 4 << 20
        }))
    });
    // Charged before allocated: the job never held much more than its cap (the slack is the
    // small uncharged bookkeeping: paths, the error, the stage records).
    assert!(
        peak < (4 << 20) + (256 << 10),
        "peak heap {peak} bytes with a 4 MiB cap"
    );
    assert!(
        matches!(err.kind, JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { cap_bytes, .. }) if cap_bytes == 4 << 20),
        "{err:?}"
    );
    assert_eq!(err.failed_stage, Stage::Fill);
    assert_eq!(
        err.completed_stages,
        [Stage::Decode, Stage::Quantize, Stage::Segment]
    );
    // The same job with room to spare succeeds: the refusal was the budget, nothing else.
    let (ok, peak) = heap_peak_of(|| {
        run(root.path(), &image, &params(1400.0), |c| {
            c.memory_cap_bytes = 256 << 20
        })
        .unwrap()
    });
    assert!(ok.design.stitch_count > 1_000_000);
    assert!(peak > 4 << 20, "{peak}");

    // Too small for the pixels: refused by decode's header estimate.
    let err = failed(run(root.path(), &image, &params(100.0), |c| {
        c.memory_cap_bytes = 1 << 20
    }));
    assert!(
        matches!(err.kind, JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { requested_bytes, .. }) if requested_bytes == 512 * 512 * ESTIMATED_BYTES_PER_PIXEL)
    );
    assert_eq!(err.failed_stage, Stage::Decode);

    // An `alloc=` hook is charged at the first stage and held.
    let err = failed(run(root.path(), &image, &params(100.0), |c| {
        c.memory_cap_bytes = 64 << 20;
        c.hooks = vec![HookDirective::Alloc { mb: 100 }];
    }));
    assert!(
        matches!(err.kind, JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { requested_bytes, .. }) if requested_bytes == 100 << 20)
    );
    assert_eq!(err.failed_stage, Stage::Decode);
    // Held past the first stage: 62 MiB + decode's 1 MiB fits in 64, quantize's 2 MiB more not.
    let err = failed(run(root.path(), &image, &params(100.0), |c| {
        c.memory_cap_bytes = 64 << 20;
        c.hooks = vec![HookDirective::Alloc { mb: 62 }];
    }));
    assert!(
        matches!(
            err.kind,
            JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
        ),
        "{err:?}"
    );
    assert_eq!(err.failed_stage, Stage::Quantize);
    assert!(is_empty_dir(root.path()));
}

#[test]
fn completed_stages_are_exactly_those_before_the_failed_one() {
    let image = png(&poster(60, 40));
    for (i, &stage) in DIGITIZE.iter().enumerate() {
        for hook in [
            HookDirective::Fail { stage },
            HookDirective::Panic { stage },
        ] {
            let root = tempfile::tempdir().unwrap();
            let mut cfg = config(root.path());
            cfg.hooks = vec![hook];
            let mut ctx = JobContext::new(cfg).unwrap();
            let progress = ctx.progress();
            let err = failed(digitize(&mut ctx, &image, &params(40.0)));
            assert_eq!(err.failed_stage, stage);
            assert_eq!(err.completed_stages, DIGITIZE[..i], "{hook:?}");
            assert_eq!(progress.snapshot(), (Some(stage), DIGITIZE[..i].to_vec()));
            match (&hook, &err.kind) {
                (HookDirective::Fail { .. }, JobErrorKind::Failed { message, backtrace }) => {
                    assert_eq!(message, &format!("injected failure at {stage}"));
                    assert!(!backtrace.is_empty());
                }
                (HookDirective::Panic { .. }, JobErrorKind::Panicked { message, backtrace }) => {
                    assert!(
                        message.starts_with(&format!("injected panic at {stage}")),
                        "{message}"
                    );
                    assert!(backtrace.contains("run_stage"), "{backtrace}");
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(err.kind.code(), Some(ErrorCode::StageFailed));
            // Partial state exists until the job is dropped, then it is gone.
            let dir = ctx.temp_dir().to_path_buf();
            assert!(dir.exists());
            if stage != Stage::Decode {
                assert!(dir.join("upload.bin").exists());
            }
            drop(ctx);
            assert!(is_empty_dir(root.path()), "{hook:?} left files behind");
        }
    }
}

#[test]
fn the_temp_dir_goes_away_on_success_and_when_a_panic_unwinds_past_the_job() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(60, 40));
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    let out = digitize(&mut ctx, &image, &params(40.0)).unwrap();
    assert!(ctx.temp_dir().join("upload.bin").exists());
    assert_eq!(ctx.progress().snapshot(), (None, DIGITIZE.to_vec()));
    let timings = ctx.stage_timings();
    assert_eq!(timings.iter().map(|t| t.0).collect::<Vec<_>>(), DIGITIZE);
    assert!(out.design.stitch_count > 0);
    drop(ctx);
    assert!(is_empty_dir(root.path()));

    // A panic outside any stage (in the caller) unwinds through the context: still removed.
    let path = root.path().to_path_buf();
    let result = std::panic::catch_unwind(move || {
        let mut ctx = JobContext::new(config(&path)).unwrap();
        let _ = digitize(&mut ctx, &png(&poster(20, 20)), &params(20.0));
        assert!(!is_empty_dir(&path));
        panic!("caller panics while holding the job");
    });
    assert!(result.is_err());
    assert!(is_empty_dir(root.path()));
}

#[test]
fn progress_is_visible_from_another_thread_while_a_stage_is_held() {
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(60, 40));
    let mut cfg = config(root.path());
    cfg.hooks = vec![HookDirective::Hold {
        stage: Stage::Segment,
        ms: 300,
    }];
    let mut ctx = JobContext::new(cfg).unwrap();
    let progress: Arc<_> = ctx.progress();
    let watcher = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let snap = progress.snapshot();
            if snap.0 == Some(Stage::Segment) {
                return snap;
            }
            assert!(Instant::now() < until, "never saw segment running");
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let started = Instant::now();
    digitize(&mut ctx, &image, &params(40.0)).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    let (current, completed) = watcher.join().unwrap();
    assert_eq!(current, Some(Stage::Segment));
    assert_eq!(completed, [Stage::Decode, Stage::Quantize]);
}

#[test]
fn long_loops_reach_a_checkpoint_every_few_milliseconds() {
    // 4 MP of pixels and ~100K stitches; in a debug build every stretch between checkpoints
    // stays far below the 1 s cancellation bound (release: well under a millisecond).
    let root = tempfile::tempdir().unwrap();
    let image = png(&poster(2000, 2000));
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    digitize(&mut ctx, &image, &params(300.0)).unwrap();
    let gaps = ctx.stage_checkpoint_gaps();
    assert_eq!(gaps.iter().map(|g| g.0).collect::<Vec<_>>(), DIGITIZE);
    for ((stage, gap), (_, time)) in gaps.into_iter().zip(ctx.stage_timings()) {
        if stage == Stage::Decode {
            continue; // one call into the image decoder, bounded by max_pixels
        }
        assert!(
            gap < Duration::from_millis(100),
            "{stage}: {gap:?} without a checkpoint"
        );
        if time > Duration::from_millis(100) {
            assert!(
                gap * 4 < time,
                "{stage}: {gap:?} of {time:?} without a checkpoint"
            );
        }
    }
}

/// Writes deflate bits, least significant first.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u64, len: u32) {
        self.acc |= value << self.n;
        self.n += len;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// Huffman codes go most significant bit first.
    fn code(&mut self, code: u64, len: u32) {
        let reversed = (0..len).fold(0, |r, i| r | ((code >> i) & 1) << (len - 1 - i));
        self.put(reversed, len);
    }
}

/// A zlib stream of `repeats × 258 + 1` zero bytes, ~13 bits per 258 bytes (fixed Huffman:
/// one literal 0, then length 258 / distance 1 copies).
fn zlib_zeros(repeats: usize) -> Vec<u8> {
    let mut b = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    b.put(1, 1); // final block
    b.put(1, 2); // fixed Huffman
    b.code(0x30, 8); // literal 0
    for _ in 0..repeats {
        b.code(0b1100_0101, 8); // length 258 (symbol 285)
        b.code(0, 5); // distance 1
    }
    b.code(0, 7); // end of block
    b.put(0, 7); // flush
    let total = (repeats * 258 + 1) as u64;
    let adler = ((total % 65521) << 16) | 1;
    b.out.extend_from_slice(&(adler as u32).to_be_bytes());
    b.out
}

#[test]
fn a_zip_bomb_in_the_png_metadata_is_bounded_by_the_budget() {
    // A 16×16 image whose ICC profile chunk inflates to 1 GiB: the header itself is the bomb.
    // The PNG decoder drops a profile it may not inflate, so the image still decodes; what
    // matters is that the profile was never inflated past the job's budget.
    let image = png(&poster(16, 16));
    let mut bomb = image[..33].to_vec(); // signature + IHDR
    let mut iccp = b"icc\0\0".to_vec();
    iccp.extend_from_slice(&zlib_zeros((1 << 30) / 258));
    chunk(&mut bomb, b"iCCP", &iccp);
    bomb.extend_from_slice(&image[33..]);
    assert!(bomb.len() < 8 << 20);

    let root = tempfile::tempdir().unwrap();
    let (result, peak) = heap_peak_of(|| {
        run(root.path(), &bomb, &params(40.0), |c| {
            c.memory_cap_bytes = 64 << 20
        })
        .map(|out| out.design.stitch_count)
    });
    match result {
        Ok(stitches) => assert!(stitches > 0),
        Err(e) => assert!(
            matches!(
                e.kind,
                JobErrorKind::Interrupted(Interrupt::MemoryCapExceeded { .. })
            ),
            "{e:?}"
        ),
    }
    assert!(
        peak < 80 << 20,
        "decoding held {peak} bytes with a 64 MiB cap"
    );
}
