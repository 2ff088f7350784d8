//! Export: design → DST / EXP / SVG, checked by decoders written here from the format
//! descriptions (not from the encoder's code).

use std::io::Cursor;
use std::path::Path;
use std::time::{Duration, Instant};

use image::{ImageEncoder, Rgba, RgbaImage};
use plimsoll_engine::export::{encode_dst, encode_exp, export, parse, render_svg, validate_design};
use plimsoll_engine::job::{Interrupt, JobConfig, JobContext, JobErrorKind};
use plimsoll_engine::pipeline::{DigitizeParams, digitize};
use plimsoll_spec::design::DESIGN_FORMAT;
use plimsoll_spec::{
    Design, ErrorCode, ExportFormat, Extents, HookDirective, Stage, Stitch, StitchCommand, Thread,
};
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

mod job;
mod machine_files;
mod preview;

fn config(root: &Path) -> JobConfig {
    JobConfig {
        cancel: CancellationToken::new(),
        deadline: Instant::now() + Duration::from_secs(60),
        memory_cap_bytes: 1 << 30,
        upload_bytes: 0,
        temp_root: root.to_path_buf(),
        hooks: Vec::new(),
        progress: Default::default(),
    }
}

/// A real design: digitized from an image with rings, stripes and several colours.
fn digitized() -> Design {
    let (w, h) = (160u32, 120u32);
    let img = RgbaImage::from_fn(w, h, |x, y| {
        let (u, v) = (x as f64 / w as f64, y as f64 / h as f64);
        let d = ((u - 0.3).powi(2) + (v - 0.5).powi(2)).sqrt();
        if (0.1..0.2).contains(&d) {
            Rgba([200, 30, 40, 255])
        } else if u > 0.55 && ((u + v) * 8.0).fract() < 0.5 {
            Rgba([230, 170, 20, 255])
        } else if u > 0.9 || v > 0.9 {
            Rgba([0, 0, 0, 0])
        } else {
            Rgba([20, 40, 160, 255])
        }
    });
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(Cursor::new(&mut png))
        .write_image(img.as_raw(), w, h, image::ExtendedColorType::Rgba8)
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut ctx = JobContext::new(config(root.path())).unwrap();
    let params = DigitizeParams {
        width_mm: 120.0,
        density_mm: 0.4,
        colors: 4,
        max_stitch_mm: 3.0,
        max_pixels: 1_000_000,
    };
    digitize(&mut ctx, &png, &params).unwrap().design
}

fn design(threads: usize, stitches: Vec<Stitch>) -> Design {
    let (mut min, mut max) = ((0, 0), (0, 0));
    for s in &stitches {
        min = (min.0.min(s.x), min.1.min(s.y));
        max = (max.0.max(s.x), max.1.max(s.y));
    }
    Design {
        format: DESIGN_FORMAT.to_owned(),
        width_mm: 10.0,
        height_mm: 10.0,
        threads: (0..threads)
            .map(|i| Thread {
                color: format!("#{:02x}{:02x}07", i * 40 % 256, (i * 30 + 17) % 256),
            })
            .collect(),
        extents: Extents {
            min_x: min.0,
            min_y: min.1,
            max_x: max.0,
            max_y: max.1,
        },
        stitch_count: stitches
            .iter()
            .filter(|s| s.cmd == StitchCommand::Stitch)
            .count() as u64,
        stitches,
    }
}

fn st(x: i32, y: i32, cmd: StitchCommand) -> Stitch {
    Stitch { x, y, cmd }
}

/// Everything the encoders must handle: long stitches and jumps in every direction, trims,
/// commands away from the needle, zero-length moves, negative coordinates, no final `end`.
fn awkward() -> Design {
    use StitchCommand::*;
    design(
        3,
        vec![
            st(0, 0, Stitch),
            st(500, -300, Stitch),
            st(500, -300, Stitch),
            st(-1000, 2000, Jump),
            st(-1000, 2000, Stitch),
            st(-979, 2000, Stitch),
            st(-979, 2000, Trim),
            st(4000, -4000, Jump),
            st(4121, -4121, Stitch),
            st(4121, -4121, Trim),
            st(0, 0, ColorChange),
            st(3, 4, Stitch),
            st(127, -127, Stitch),
            st(-122, 122, Stitch),
            st(-122, 122, Jump),
            st(50, 50, Trim),
            st(60, 70, ColorChange),
            st(61, 71, Stitch),
        ],
    )
}
