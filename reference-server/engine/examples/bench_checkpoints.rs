//! Checkpoint benchmark: how long each digitize stage works between two looks at its
//! cancellation, against the contract's `checkpoint_interval_ms` (B3).
//!
//! ```text
//! cargo run --release -p plimsoll-engine --example bench_checkpoints
//! cargo run --release -p plimsoll-engine --example bench_checkpoints -- --megapixels 4 --repeat 5
//! cargo run --release -p plimsoll-engine --example bench_checkpoints -- --save /tmp/inputs
//! jpegtran -progressive -outfile /tmp/inputs/prog-16.jpg /tmp/inputs/JPEG-16.jpg
//! cargo run --release -p plimsoll-engine --example bench_checkpoints -- --file /tmp/inputs/prog-16.jpg
//! ```
//!
//! The inputs are photograph-like images generated here, deterministically: smooth colour
//! gradients, hard-edged shapes and per-pixel noise, so `quantize` sees thousands of colours,
//! `segment` many small regions and `fill` ragged rows (flat posters, as `bench_digitize` uses,
//! make those stages cheap). Each is encoded as PNG and as JPEG (quality 90) and digitized at
//! 1, 4 and 16 MP, 850 mm wide. For every stage the job context records the longest stretch
//! without a checkpoint (from the stage's start to its first checkpoint, between checkpoints,
//! and from the last to its end) and how many checkpoints it passed.
//!
//! Gaps are measured twice, through a [`CheckpointObserver`] the job carries (the server sets
//! none): in thread CPU time (`CLOCK_THREAD_CPUTIME_ID`), which is the work the contract bounds
//! and which a thread does not accrue while it is preempted, and in wall time, which on the
//! shared 2-core machine also holds the scheduler's slices (a loaded machine preempts a thread
//! for ~4 ms at a time, whatever the code does). Each case runs `--repeat` times (default 3);
//! the table gives the largest CPU gap of the runs and the smallest and largest wall gaps. The
//! verdict compares the CPU gap with the interval. `--file PATH` (repeatable) digitizes that
//! upload instead of the generated ones, for inputs no encoder here makes (a progressive JPEG:
//! `jpegtran -progressive` rewrites a generated JPEG losslessly, so its pixels and its body are
//! the baseline one's); `--save DIR` also writes each generated input to `DIR/FORMAT-MP.png|jpg`.

use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use image::{ExtendedColorType, ImageEncoder};
use plimsoll_engine::job::{CheckpointObserver, JobConfig, JobContext};
use plimsoll_engine::pipeline::{DigitizeParams, digitize};
use plimsoll_spec::{Contract, Stage};
use tokio_util::sync::CancellationToken;

struct Args {
    megapixels: Vec<f64>,
    repeat: usize,
    files: Vec<std::path::PathBuf>,
    save: Option<std::path::PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args {
        megapixels: vec![1.0, 4.0, 16.0],
        repeat: 3,
        files: Vec::new(),
        save: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--megapixels" => {
                args.megapixels = vec![value().parse().expect("--megapixels: a number")];
            }
            "--repeat" => args.repeat = value().parse().expect("--repeat: a count"),
            "--file" => args.files.push(value().into()),
            "--save" => args.save = Some(value().into()),
            other => panic!("unknown argument {other}; see the doc comment"),
        }
    }
    assert!(args.repeat > 0, "--repeat must be at least 1");
    args
}

/// A 64-bit mix (splitmix64's finaliser): deterministic noise without a random crate.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An RGB photograph stand-in, `width` × `height`: a sky-to-ground gradient that drifts in hue,
/// a few dozen hard-edged discs and bars of their own shaded colours (objects), and ±12 levels
/// of noise per channel (sensor grain, which also defeats run-length shortcuts).
fn photograph(width: u32, height: u32) -> Vec<u8> {
    let (w, h) = (f64::from(width), f64::from(height));
    // Shapes in unit coordinates: centre, radius (discs) or half extents (bars), colour.
    let mut shapes = Vec::new();
    for k in 0..48u64 {
        let r = mix(k + 1);
        let f = |shift: u32| ((r >> shift) & 0xFFFF) as f64 / 65535.0;
        shapes.push((
            k % 3 == 0,
            f(0),
            f(16),
            0.02 + 0.1 * f(32),
            [
                (r >> 8) as u8 & 0xF0,
                (r >> 24) as u8 & 0xF0,
                (r >> 40) as u8 & 0xF0,
            ],
        ));
    }
    let mut out = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        let v = f64::from(y) / h;
        for x in 0..width {
            let u = f64::from(x) / w;
            let mut rgb = [
                120.0 + 90.0 * (3.1 * u + 1.3 * v).sin(),
                110.0 + 80.0 * (2.3 * v - 1.7 * u).cos(),
                140.0 + 70.0 * (5.0 * u * v + 0.5).sin(),
            ];
            for &(bar, cx, cy, size, colour) in &shapes {
                let (dx, dy) = (u - cx, v - cy);
                let inside = if bar {
                    dx.abs() < size * 1.5 && dy.abs() < size * 0.3
                } else {
                    dx * dx + dy * dy < size * size
                };
                if inside {
                    // Shaded, so an object is not one flat colour either.
                    let shade = 0.75 + 0.25 * (dx - dy) / size.max(1e-9);
                    rgb = colour.map(|c| f64::from(c) * shade + 20.0);
                }
            }
            let noise = mix(u64::from(y) << 32 | u64::from(x));
            for (c, value) in rgb.iter().enumerate() {
                let n = ((noise >> (c * 8)) & 0xFF) as f64 / 255.0 * 24.0 - 12.0;
                out.push((value + n).round().clamp(0.0, 255.0) as u8);
            }
        }
    }
    out
}

fn encode(rgb: &[u8], width: u32, height: u32, jpeg: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if jpeg {
        JpegEncoder::new_with_quality(&mut out, 90)
            .write_image(rgb, width, height, ExtendedColorType::Rgb8)
            .expect("JPEG encoding of a generated image");
    } else {
        PngEncoder::new(Cursor::new(&mut out))
            .write_image(rgb, width, height, ExtendedColorType::Rgb8)
            .expect("PNG encoding of a generated image");
    }
    out
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Per stage: the longest CPU time between its start, its checkpoints and its end, and the
/// number of checkpoints.
#[derive(Debug, Default)]
struct CpuGaps {
    state: Mutex<CpuState>,
}

#[derive(Debug, Default)]
struct CpuState {
    last: Duration,
    longest: Duration,
    checkpoints: u64,
    stages: Vec<(Stage, Duration, u64)>,
}

impl CpuState {
    fn look(&mut self) {
        let now = thread_cpu();
        self.longest = self.longest.max(now.saturating_sub(self.last));
        self.last = now;
    }
}

impl CpuGaps {
    fn lock(&self) -> std::sync::MutexGuard<'_, CpuState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl CheckpointObserver for CpuGaps {
    fn stage_started(&self, _stage: Stage) {
        let mut s = self.lock();
        s.last = thread_cpu();
        s.longest = Duration::ZERO;
        s.checkpoints = 0;
    }

    fn checkpoint(&self) {
        let mut s = self.lock();
        s.look();
        s.checkpoints += 1;
    }

    fn stage_ended(&self, stage: Stage) {
        let mut s = self.lock();
        s.look();
        let (longest, checkpoints) = (s.longest, s.checkpoints);
        s.stages.push((stage, longest, checkpoints));
    }
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
    d.as_secs_f64() * 1e3
}

/// Per stage over the repeats: the largest CPU gap, the smallest and largest wall gap, the
/// checkpoints, the shortest stage time.
struct StageFigures {
    stage: Stage,
    cpu_gap: Duration,
    gap_min: Duration,
    gap_max: Duration,
    checkpoints: u64,
    time_min: Duration,
}

/// Also leaves the CRC-32 of the response body in `body_crc`, so runs of two builds can be
/// compared: checkpoints must not change what the pipeline produces.
fn measure(image: &[u8], repeat: usize, body_crc: &mut u32) -> Vec<StageFigures> {
    let temp_root = tempfile::tempdir().expect("temp dir");
    let params = DigitizeParams {
        width_mm: 850.0,
        density_mm: 0.4,
        colors: 8,
        max_stitch_mm: 3.0,
        max_pixels: 100_000_000,
    };
    let mut figures: Vec<StageFigures> = Vec::new();
    for _ in 0..repeat {
        let mut ctx = JobContext::new(config(temp_root.path())).expect("job");
        let cpu = Arc::new(CpuGaps::default());
        ctx.observe(cpu.clone());
        let out = digitize(&mut ctx, image, &params).expect("digitize");
        *body_crc = crc32fast::hash(&out.json.to_vec());
        drop(out);
        let gaps = ctx.stage_checkpoint_gaps();
        let cpu_gaps = std::mem::take(&mut cpu.lock().stages);
        let times = ctx.stage_timings();
        for (((stage, gap), (_, cpu_gap, count)), (_, time)) in
            gaps.into_iter().zip(cpu_gaps).zip(times)
        {
            match figures.iter_mut().find(|f| f.stage == stage) {
                Some(f) => {
                    f.cpu_gap = f.cpu_gap.max(cpu_gap);
                    f.gap_min = f.gap_min.min(gap);
                    f.gap_max = f.gap_max.max(gap);
                    f.time_min = f.time_min.min(time);
                    f.checkpoints = count;
                }
                None => figures.push(StageFigures {
                    stage,
                    cpu_gap,
                    gap_min: gap,
                    gap_max: gap,
                    checkpoints: count,
                    time_min: time,
                }),
            }
        }
    }
    figures
}

/// What to digitize: the named files, or else the generated photograph at each size as PNG and
/// as JPEG; each with its name and megapixels.
fn inputs(args: &Args) -> impl Iterator<Item = (String, f64, Vec<u8>)> + '_ {
    let files = args.files.iter().map(|path| {
        let file = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (w, h) = image::ImageReader::new(Cursor::new(&file))
            .with_guessed_format()
            .and_then(|r| r.into_dimensions().map_err(std::io::Error::other))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mp = (f64::from(w) * f64::from(h) / 1e4).round() / 1e2;
        (path.display().to_string(), mp, file)
    });
    let generated = args
        .megapixels
        .iter()
        .filter(|_| args.files.is_empty())
        .flat_map(|&mp| {
            let side = (mp * 1e6).sqrt().round() as u32;
            let rgb = photograph(side, side);
            [false, true].map(|jpeg| {
                let name = if jpeg { "JPEG" } else { "PNG" };
                let file = encode(&rgb, side, side, jpeg);
                if let Some(dir) = &args.save {
                    let path =
                        dir.join(format!("{name}-{mp}.{}", if jpeg { "jpg" } else { "png" }));
                    std::fs::create_dir_all(dir)
                        .and_then(|()| std::fs::write(&path, &file))
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                }
                (name.to_owned(), mp, file)
            })
        });
    files.chain(generated)
}

fn main() {
    let args = parse_args();
    let interval =
        Duration::from_millis(Contract::embedded().cancellation().checkpoint_interval_ms);
    println!(
        "checkpoint_interval_ms = {} (spec/contract.toml); {} runs per case; gap = longest stretch without a checkpoint (CPU: max over the runs; wall: min..max)",
        interval.as_millis(),
        args.repeat
    );
    println!(
        "| format | MP | stage | CPU gap ms | wall gap ms (min..max) | checkpoints | stage ms | within |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut worst: Option<(String, Duration)> = None;
    let mut bodies = Vec::new();
    for (name, mp, file) in inputs(&args) {
        let mut crc = 0;
        let figures = measure(&file, args.repeat, &mut crc);
        bodies.push(format!("{name} {mp} MP: {crc:08x}"));
        for f in figures {
            let within = f.cpu_gap <= interval;
            println!(
                "| {name} | {mp} | {} | {:.2} | {:.2}..{:.2} | {} | {:.1} | {} |",
                f.stage,
                ms(f.cpu_gap),
                ms(f.gap_min),
                ms(f.gap_max),
                f.checkpoints,
                ms(f.time_min),
                if within { "yes" } else { "NO" }
            );
            if worst.as_ref().is_none_or(|w| f.cpu_gap > w.1) {
                worst = Some((format!("{name} {mp} MP {}", f.stage), f.cpu_gap));
            }
        }
    }
    println!("response bodies (CRC-32): {}", bodies.join(", "));
    if let Some((case, gap)) = worst {
        println!(
            "worst: {case}, {:.2} ms of CPU against {} ms: {}",
            ms(gap),
            interval.as_millis(),
            if gap <= interval {
                "every stage within the interval"
            } else {
                "OVER the interval"
            }
        );
    }
}
