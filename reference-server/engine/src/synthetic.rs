//! The digitize benchmark's input, generated in code so every run sees the same pixels: a poster
//! (flat colours, the shapes embroidery is made of, noisy anti-aliased edges), laid out in
//! normalised coordinates so every resolution shows the same design at the same physical size.
//!
//! Not used by the server. Public so that the benchmarks (the engine's
//! `examples/bench_digitize.rs`, the server's end-to-end `reference-server/examples/bench_pipeline.rs`)
//! and the byte-identity test of the response bodies (`tests/pipeline/bodies.rs`) digitize one
//! definition: a body's recorded SHA-256 means
//! something only if the test and the benchmark feed the pipeline the same bytes.

use std::io::Cursor;

use image::{ImageEncoder, RgbaImage};

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

/// The colour of the poster at normalised `(u, v)`.
fn shade(u: f64, v: f64) -> [u8; 4] {
    const BG: [u8; 4] = [236, 228, 210, 255];
    const RED: [u8; 4] = [200, 30, 45, 255];
    const NAVY: [u8; 4] = [20, 40, 110, 255];
    const GOLD: [u8; 4] = [230, 170, 20, 255];
    const GREEN: [u8; 4] = [30, 130, 60, 255];
    const BLACK: [u8; 4] = [25, 25, 25, 255];
    const CLEAR: [u8; 4] = [0, 0, 0, 0];
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
    if text(u, v) {
        return BLACK;
    }
    // Thin lines (about 0.25 % of the height) and a green leaf-like blob.
    if v > 0.8 && v < 0.95 && u < 0.55 && ((v - 0.8) * 80.0).fract() < 0.2 {
        return GREEN;
    }
    if ((u - 0.15) / 0.1).powi(2) + ((v - 0.45) / 0.05).powi(2) < 1.0 {
        return GREEN;
    }
    BG
}

/// "Text": rows of bars of varying length, with gaps like letters.
fn text(u: f64, v: f64) -> bool {
    if !(u > 0.62 && u < 0.95 && v > 0.55 && v < 0.95) {
        return false;
    }
    let line = ((v - 0.55) / 0.05).floor();
    let in_line = ((v - 0.55) / 0.05).fract();
    let glyph = ((u - 0.62) / 0.03).floor();
    let in_glyph = ((u - 0.62) / 0.03).fract();
    let shape = (line * 7.0 + glyph * 3.0) % 5.0;
    let stroke = in_line > 0.2 && in_line < 0.8 && in_glyph < 0.75;
    let hole = shape < 2.0 && in_line > 0.4 && in_line < 0.6 && in_glyph > 0.2 && in_glyph < 0.55;
    stroke && !hole
}

/// The poster, `width` × `height`: flat background, rings, a disc with a hole, diagonal stripes,
/// blocks of "text" bars, thin lines, a transparent corner, and noisy anti-aliased edges — the
/// digitize benchmark's input since issue 3, pixel for pixel.
pub fn poster(width: u32, height: u32) -> RgbaImage {
    let (w, h) = (f64::from(width), f64::from(height));
    let (du, dv) = (1.0 / w, 1.0 / h);
    let mut rng = Lcg(0x5eed);
    let mut img = RgbaImage::new(width, height);
    for y in 0..height {
        for x in 0..width {
            let (u, v) = ((f64::from(x) + 0.5) / w, (f64::from(y) + 0.5) / h);
            let c = shade(u, v);
            // Anti-aliasing noise: at an edge, blend with the neighbour or flip to it.
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

/// The side of the square image of about `megapixels` the benchmark digitizes (1 → 1000 px).
pub fn side(megapixels: f64) -> u32 {
    (megapixels * 1e6).sqrt().round() as u32
}

/// The poster of about `megapixels`, square, as the PNG the benchmark uploads: fast compression
/// with adaptive filters, so the file is as a quick export from an editor would make it.
pub fn poster_png(megapixels: f64) -> Vec<u8> {
    let side = side(megapixels);
    let img = poster(side, side);
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

/// The query the benchmarks digitize the poster with: 850 mm wide (a large design, ~700K
/// stitches whatever the pixels), 0.4 mm rows, 8 colours, 3 mm stitches. Written once, so the
/// engine's benchmark, the end-to-end one and the body test ask for the same design.
pub const QUERY: &str = "width_mm=850&density_mm=0.4&colors=8&max_stitch_mm=3";

/// The SHA-256 of the response body of the poster at 1, 4 and 16 MP digitized with [`QUERY`], as
/// recorded at 8f6cb68, before issue 39 made the pipeline faster (and the same at d409573: the
/// output had not moved since). A faster stage or serializer must leave every byte where it
/// was: `tests/pipeline/bodies.rs` holds the engine to these, and the end-to-end benchmark
/// compares what it receives over HTTP.
pub const BODY_SHA256: [(f64, &str); 3] = [
    (
        1.0,
        "9bd44c4d767e9c1c5ca478c860dfa0a1832392170e41127f0931a18a66fb5372",
    ),
    (
        4.0,
        "0da23a5fdec3f4374c58925a9e1c4e6f4f63526927df9d6650c640d348d94d8c",
    ),
    (
        16.0,
        "1c935412c610c9f2b5f0ebd15d0da51adb32f5ea7d921a2ccc73de1763021594",
    ),
];

/// The recorded digest of the poster's body at `megapixels`, if that size was recorded.
pub fn recorded_body_sha256(megapixels: f64) -> Option<&'static str> {
    BODY_SHA256
        .iter()
        .find(|(mp, _)| *mp == megapixels)
        .map(|(_, digest)| *digest)
}
