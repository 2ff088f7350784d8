//! Digitize benchmark: a synthetic but realistic image ([`plimsoll_engine::synthetic`]) through
//! the real pipeline.
//!
//! ```text
//! cargo run --release -p plimsoll-engine --example bench_digitize -- --megapixels 4 --width-mm 850
//! cargo run --release -p plimsoll-engine --example bench_digitize -- --sweep
//! cargo run --release -p plimsoll-engine --example bench_digitize -- --megapixels 4 --jpeg
//! ```
//!
//! Prints one JSON line per run: wall time (best and median of `--repeat` runs), time per stage,
//! stitch count, the peak RSS of the process (VmHWM, reset through `/proc/self/clear_refs` after
//! the input is generated, when the kernel allows it), the heap peak counted by a global
//! allocator wrapper, what the job charged to its budget, the DST export timings, and the SHA-256
//! of the response body (`tests/pipeline/bodies.rs` holds the digests of 1, 4 and 16 MP).
//! `--sweep` runs 1, 4 and 16 MP each in a fresh process and prints a table. `--jpeg` sends the
//! same poster as a JPEG (quality 90) instead of a PNG, to time the JPEG decoder; its body is
//! not one of the recorded ones.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use plimsoll_engine::export::{encode_dst, export};
use plimsoll_engine::job::{JobConfig, JobContext};
use plimsoll_engine::pipeline::{DigitizeParams, digitize};
use plimsoll_engine::synthetic;
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
    jpeg: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        megapixels: 4.0,
        width_mm: 850.0,
        repeat: 3,
        sweep: false,
        jpeg: false,
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
            "--jpeg" => args.jpeg = true,
            "--help" | "-h" => {
                println!(
                    "bench_digitize [--megapixels N] [--width-mm MM] [--repeat N] [--sweep] [--jpeg]"
                );
                std::process::exit(0);
            }
            other => panic!("unknown argument `{other}`"),
        }
    }
    args
}

/// The SHA-256 of a response body, in hex: what `tests/pipeline/bodies.rs` records.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
    // The server's allocator policy, so the stages' figures are the ones a server's job sees.
    plimsoll_engine::job::allocator::keep_freed_memory();
    let side = synthetic::side(args.megapixels);
    let (width, height) = (side, side);
    let input = if args.jpeg {
        poster_jpeg(side)
    } else {
        synthetic::poster_png(args.megapixels)
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
        let out = digitize(&mut ctx, &input, &params).expect("digitize");
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
    let exported = export(&mut ctx, &out.json.to_vec(), ExportFormat::Dst).expect("export");
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
            "{{\"body_sha256\":\"{}\",\"format\":\"{}\",\"megapixels\":{:.2},\"width_px\":{},\"height_px\":{},\"width_mm\":{},",
            "\"input_bytes\":{},\"stitches\":{},\"commands\":{},\"jumps\":{},\"trims\":{},\"colors\":{},",
            "\"wall_ms\":{},\"wall_ms_median\":{},\"runs\":{},\"stage_ms\":{{{}}},\"max_checkpoint_gap_ms\":{{{}}},",
            "\"peak_rss_mb\":{},\"rss_peak_reset\":{},\"heap_peak_mb\":{:.1},",
            "\"heap_peak_bytes_per_pixel\":{:.2},\"charged_peak_mb\":{:.1},\"json_mb\":{:.1},",
            "\"dst_encode_ms\":{},\"dst_export_ms\":{},\"dst_export_stage_ms\":{{{}}},\"dst_bytes\":{}}}"
        ),
        sha256_hex(&out.json.to_vec()),
        if args.jpeg { "JPEG" } else { "PNG" },
        pixels as f64 / 1e6,
        width,
        height,
        args.width_mm,
        input.len(),
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
            .args(args.jpeg.then_some("--jpeg"))
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

/// The synthetic poster of `side` × `side` pixels as a JPEG of quality 90.
fn poster_jpeg(side: u32) -> Vec<u8> {
    use image::ImageEncoder;
    let rgb = image::DynamicImage::ImageRgba8(synthetic::poster(side, side)).into_rgb8();
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .write_image(rgb.as_raw(), side, side, image::ExtendedColorType::Rgb8)
        .expect("JPEG encoding of the poster");
    out
}

fn main() {
    let args = parse_args();
    if args.sweep {
        sweep(&args);
    } else {
        run(&args);
    }
}
