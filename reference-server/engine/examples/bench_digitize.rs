//! Digitize benchmark: a synthetic but realistic image through the real pipeline.
//!
//! ```text
//! cargo run --release -p plimsoll-engine --example bench_digitize -- --megapixels 4 --width-mm 850
//! cargo run --release -p plimsoll-engine --example bench_digitize -- --sweep
//! ```
//!
//! Prints one JSON line per run: wall time (best and median of `--repeat` runs), time per stage,
//! stitch count, the peak RSS of the process (VmHWM, reset through `/proc/self/clear_refs` after
//! the input is generated, when the kernel allows it), the heap peak counted by a global
//! allocator wrapper, what the job charged to its budget, and the DST export timings.
//! `--sweep` runs 1, 4 and 16 MP each in a fresh process and prints a table.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use image::{ImageEncoder, RgbaImage};
use plimsoll_engine::export::{encode_dst, export};
use plimsoll_engine::job::{JobConfig, JobContext};
use plimsoll_engine::pipeline::{DigitizeParams, digitize};
use plimsoll_spec::{ExportFormat, Stage, StitchCommand};
use tokio_util::sync::CancellationToken;

/// Counts live heap bytes and their peak, so the bench can report what the pipeline really held.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator (which gets zeroed pages from the
        // kernel for big buffers, instead of the default's alloc + memset).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let live = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn reset_heap_peak() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

fn heap_peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Resets VmHWM to the current RSS ("5" to clear_refs, Linux ≥ 4.0); false if refused.
fn reset_rss_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

struct Args {
    megapixels: f64,
    width_mm: f64,
    repeat: usize,
    sweep: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        megapixels: 4.0,
        width_mm: 850.0,
        repeat: 3,
        sweep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> f64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--megapixels" => args.megapixels = value("--megapixels"),
            "--width-mm" => args.width_mm = value("--width-mm"),
            "--repeat" => args.repeat = value("--repeat").max(1.0) as usize,
            "--sweep" => args.sweep = true,
            "--help" | "-h" => {
                println!("bench_digitize [--megapixels N] [--width-mm MM] [--repeat N] [--sweep]");
                std::process::exit(0);
            }
            other => panic!("unknown argument `{other}`"),
        }
    }
    args
}

/// Deterministic pseudo-random numbers (an LCG is plenty for edge noise).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

/// A poster-like image: flat background, rings, a disc with a hole, diagonal stripes, blocks of
/// "text" bars, thin lines, a transparent corner, and noisy anti-aliased edges. Shapes are laid out
/// in normalised coordinates, so every resolution shows the same design (same physical areas).
fn synthetic_image(width: u32, height: u32) -> RgbaImage {
    const BG: [u8; 4] = [236, 228, 210, 255];
    const RED: [u8; 4] = [200, 30, 45, 255];
    const NAVY: [u8; 4] = [20, 40, 110, 255];
    const GOLD: [u8; 4] = [230, 170, 20, 255];
    const GREEN: [u8; 4] = [30, 130, 60, 255];
    const BLACK: [u8; 4] = [25, 25, 25, 255];
    const CLEAR: [u8; 4] = [0, 0, 0, 0];
    let (w, h) = (f64::from(width), f64::from(height));
    let shade = |u: f64, v: f64| -> [u8; 4] {
        // Transparent top-right corner.
        if u > 0.9 && v < 0.1 && (u - 0.9) > v {
            return CLEAR;
        }
        let ring = |cx: f64, cy: f64, r0: f64, r1: f64| {
            let d = ((u - cx).powi(2) + (v - cy).powi(2)).sqrt();
            d >= r0 && d <= r1
        };
        if ring(0.25, 0.25, 0.12, 0.18) || ring(0.25, 0.25, 0.04, 0.07) {
            return RED;
        }
        if ring(0.72, 0.3, 0.0, 0.16) && !ring(0.72, 0.3, 0.0, 0.06) {
            return NAVY;
        }
        // Diagonal stripes inside a band.
        if v > 0.55 && v < 0.75 && u > 0.05 && u < 0.6 && ((u + v) * 40.0).fract() < 0.45 {
            return GOLD;
        }
        // "Text": rows of bars of varying length, with gaps like letters.
        if u > 0.62 && u < 0.95 && v > 0.55 && v < 0.95 {
            let line = ((v - 0.55) / 0.05).floor();
            let in_line = ((v - 0.55) / 0.05).fract();
            let glyph = ((u - 0.62) / 0.03).floor();
            let in_glyph = ((u - 0.62) / 0.03).fract();
            let shape = (line * 7.0 + glyph * 3.0) % 5.0;
            let stroke = in_line > 0.2 && in_line < 0.8 && in_glyph < 0.75;
            let hole =
                shape < 2.0 && in_line > 0.4 && in_line < 0.6 && in_glyph > 0.2 && in_glyph < 0.55;
            if stroke && !hole {
                return BLACK;
            }
        }
        // Thin lines (about 0.25 % of the height) and a green leaf-like blob.
        if v > 0.8 && v < 0.95 && u < 0.55 && ((v - 0.8) * 80.0).fract() < 0.2 {
            return GREEN;
        }
        if ((u - 0.15) / 0.1).powi(2) + ((v - 0.45) / 0.05).powi(2) < 1.0 {
            return GREEN;
        }
        BG
    };
    let mut rng = Lcg(0x5eed);
    let mut img = RgbaImage::new(width, height);
    for y in 0..height {
        for x in 0..width {
            let (u, v) = ((f64::from(x) + 0.5) / w, (f64::from(y) + 0.5) / h);
            let c = shade(u, v);
            // Anti-aliasing noise: at an edge, blend with the neighbour or flip to it.
            let (du, dv) = (1.0 / w, 1.0 / h);
            let n = shade(u + du, v + dv);
            let px = if n != c {
                match rng.next() % 4 {
                    0 => n,
                    1 => [0, 1, 2, 3].map(|k| ((u16::from(c[k]) + u16::from(n[k])) / 2) as u8),
                    _ => c,
                }
            } else {
                c
            };
            img.put_pixel(x, y, image::Rgba(px));
        }
    }
    img
}

fn encode_png(img: &RgbaImage) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new_with_quality(
        Cursor::new(&mut out),
        image::codecs::png::CompressionType::Fast,
        image::codecs::png::FilterType::Adaptive,
    )
    .write_image(
        img.as_raw(),
        img.width(),
        img.height(),
        image::ExtendedColorType::Rgba8,
    )
    .expect("PNG encoding of a generated image");
    out
}

fn config(temp_root: &std::path::Path) -> JobConfig {
    JobConfig {
        cancel: CancellationToken::new(),
        deadline: Instant::now() + Duration::from_secs(600),
        memory_cap_bytes: 4 << 30,
        upload_bytes: 0,
        temp_root: temp_root.to_path_buf(),
        hooks: Vec::new(),
        progress: Default::default(),
    }
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 1e2
}

fn run(args: &Args) {
    let side = (args.megapixels * 1e6).sqrt().round() as u32;
    let (width, height) = (side, side);
    let png = {
        let img = synthetic_image(width, height);
        encode_png(&img)
    };
    let temp_root = tempfile::tempdir().expect("temp dir");
    let params = DigitizeParams {
        width_mm: args.width_mm,
        density_mm: 0.4,
        colors: 8,
        max_stitch_mm: 3.0,
        max_pixels: 100_000_000,
    };

    let rss_reset = reset_rss_peak();
    let heap_before = reset_heap_peak();
    let mut walls = Vec::new();
    let mut stage_ms: Vec<(Stage, f64)> = Vec::new();
    let mut gap_ms: Vec<(Stage, f64)> = Vec::new();
    let mut output: Option<plimsoll_engine::pipeline::DigitizeOutput> = None;
    let mut peak_charged = 0;
    for _ in 0..args.repeat {
        drop(output.take()); // free the previous result before the next run
        let mut ctx = JobContext::new(config(temp_root.path())).expect("job");
        let started = Instant::now();
        let out = digitize(&mut ctx, &png, &params).expect("digitize");
        walls.push(started.elapsed());
        let timings = ctx.stage_timings();
        if stage_ms.is_empty() || walls.last() == walls.iter().min() {
            stage_ms = timings.into_iter().map(|(s, d)| (s, ms(d))).collect();
        }
        let gaps = ctx.stage_checkpoint_gaps();
        if gap_ms.is_empty() {
            gap_ms = gaps.into_iter().map(|(s, d)| (s, ms(d))).collect();
        } else {
            for (slot, (_, d)) in gap_ms.iter_mut().zip(gaps) {
                slot.1 = slot.1.max(ms(d));
            }
        }
        peak_charged = peak_charged.max(ctx.peak_charged_bytes());
        output = Some(out);
    }
    let heap_peak_digitize = heap_peak() - heap_before;
    let out = output.expect("at least one run");
    walls.sort();

    let started = Instant::now();
    let dst = encode_dst(&out.design);
    let encode_ms = ms(started.elapsed());
    let mut ctx = JobContext::new(config(temp_root.path())).expect("job");
    let started = Instant::now();
    let exported = export(&mut ctx, &out.json, ExportFormat::Dst).expect("export");
    let export_ms = ms(started.elapsed());
    assert_eq!(exported.bytes, dst);
    let export_stages: Vec<String> = ctx
        .stage_timings()
        .iter()
        .map(|(s, d)| format!("\"{s}\":{}", ms(*d)))
        .collect();

    let pixels = u64::from(width) * u64::from(height);
    let count = |cmd: StitchCommand| out.design.stitches.iter().filter(|s| s.cmd == cmd).count();
    let line = format!(
        concat!(
            "{{\"megapixels\":{:.2},\"width_px\":{},\"height_px\":{},\"width_mm\":{},",
            "\"png_bytes\":{},\"stitches\":{},\"commands\":{},\"jumps\":{},\"trims\":{},\"colors\":{},",
            "\"wall_ms\":{},\"wall_ms_median\":{},\"runs\":{},\"stage_ms\":{{{}}},\"max_checkpoint_gap_ms\":{{{}}},",
            "\"peak_rss_mb\":{},\"rss_peak_reset\":{},\"heap_peak_mb\":{:.1},",
            "\"heap_peak_bytes_per_pixel\":{:.2},\"charged_peak_mb\":{:.1},\"json_mb\":{:.1},",
            "\"dst_encode_ms\":{},\"dst_export_ms\":{},\"dst_export_stage_ms\":{{{}}},\"dst_bytes\":{}}}"
        ),
        pixels as f64 / 1e6,
        width,
        height,
        args.width_mm,
        png.len(),
        out.design.stitch_count,
        out.design.stitches.len(),
        count(StitchCommand::Jump),
        count(StitchCommand::Trim),
        out.design.threads.len(),
        ms(walls[0]),
        ms(walls[walls.len() / 2]),
        walls.len(),
        stage_ms
            .iter()
            .map(|(s, v)| format!("\"{s}\":{v}"))
            .collect::<Vec<_>>()
            .join(","),
        gap_ms
            .iter()
            .map(|(s, v)| format!("\"{s}\":{v}"))
            .collect::<Vec<_>>()
            .join(","),
        status_kb("VmHWM:").map_or(-1.0, |kb| (kb as f64 / 1024.0).round()),
        rss_reset,
        heap_peak_digitize as f64 / (1 << 20) as f64,
        heap_peak_digitize as f64 / pixels as f64,
        peak_charged as f64 / (1 << 20) as f64,
        out.json.len() as f64 / (1 << 20) as f64,
        encode_ms,
        export_ms,
        export_stages.join(","),
        dst.len(),
    );
    println!("{line}");
}

fn sweep(args: &Args) {
    let exe = std::env::current_exe().expect("own path");
    println!(
        "| MP | stitches | wall ms | decode | quantize | segment | fill | sequence | serialize | peak RSS MB | heap MB | DST encode ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for mp in [1.0, 4.0, 16.0] {
        let out = std::process::Command::new(&exe)
            .args([
                "--megapixels",
                &mp.to_string(),
                "--width-mm",
                &args.width_mm.to_string(),
                "--repeat",
                &args.repeat.to_string(),
            ])
            .output()
            .expect("run the bench in a fresh process");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default();
        eprintln!("{line}");
        let v: serde_json::Value = serde_json::from_str(line).expect("bench JSON line");
        let st = |s: &str| v["stage_ms"][s].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            v["megapixels"],
            v["stitches"],
            v["wall_ms"],
            st("decode"),
            st("quantize"),
            st("segment"),
            st("fill"),
            st("sequence"),
            st("serialize"),
            v["peak_rss_mb"],
            v["heap_peak_mb"],
            v["dst_encode_ms"],
        );
    }
}

fn main() {
    let args = parse_args();
    if args.sweep {
        sweep(&args);
    } else {
        run(&args);
    }
}
