//! `quantize`: reduce the image to K thread colours and re-express it as runs of palette indices.
//!
//! Colours are first counted in a 32×32×32 histogram (5 bits per channel, keeping exact colour
//! sums per bin), then split by a variance-minimising median cut over the occupied bins: the box
//! with the largest between-bin squared error is cut along its widest channel at the point that
//! minimises the error of the two halves. That costs one pass over the pixels plus work
//! proportional to the number of occupied bins, not K × pixels as k-means would. Pixels are then
//! mapped through a bin → colour lookup table, with a one-pixel cache because flat artwork repeats
//! the same colour for long stretches. Both passes compare a pixel's samples with the previous
//! pixel's before packing them, so a stretch of one colour costs a compare a pixel (issue 39:
//! 12.6 → 6.4 ms at 4 MP, 62 → 51 ms at 16 MP on the benchmark's poster, docs/benchmarks.md; the
//! runs unchanged). An image of [`PARALLEL_FROM`] pixels or more has both passes done by two
//! threads, half of its rows each (`pipeline::halves`), the helper's runs appended after the
//! job thread's (28 → 17 ms at 16 MP in `bench_digitize`; the runs unchanged).
//!
//! Transparent pixels (alpha < 128) are background: neither counted nor stitched.

use super::decode::{DecodedImage, Samples};
use super::halves::in_two_halves;
use super::{GROW_SLICE_BYTES, HeapSize, Ticker, reserve_ticked, vec_bytes};
use crate::job::{Charge, Interrupt, JobContext, StageError};

/// Palette index of background (transparent) pixels; never stored in a run.
pub const BACKGROUND: u8 = u8::MAX;

/// A horizontal run `[x0, x1)` of one palette colour in one image row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColorRun {
    /// First pixel of the run.
    pub x0: u32,
    /// One past its last pixel.
    pub x1: u32,
    /// Palette index.
    pub color: u8,
}

/// The image as thread colours: for each row, its non-background runs, left to right.
#[derive(Debug)]
pub struct Quantized {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Thread colours as RGB.
    pub palette: Vec<[u8; 3]>,
    /// Runs of row `y` are `runs[row_start[y]..row_start[y + 1]]`.
    pub row_start: Vec<u32>,
    /// The runs of all rows, row after row.
    pub runs: Vec<ColorRun>,
}

impl Quantized {
    /// The runs of row `y`.
    pub fn row(&self, y: u32) -> &[ColorRun] {
        super::row_runs(&self.runs, &self.row_start, y)
    }
}

impl HeapSize for Quantized {
    fn heap_bytes(&self) -> u64 {
        vec_bytes(&self.row_start) + vec_bytes(&self.runs) + vec_bytes(&self.palette)
    }
}

const BINS: usize = 1 << 15;
/// Packed value of a transparent pixel (opaque pixels are `0x00RRGGBB`).
const TRANSPARENT: u32 = u32::MAX;
/// Pixels a pass works through between two ticks.
const CHUNK: usize = 4096;
/// Pixels between checkpoints, as the passes tick them.
const TICK: u64 = 16 * 1024;
/// The fewest pixels whose passes two threads share, half of the rows each: below it, starting
/// the second thread costs about what it saves.
const PARALLEL_FROM: u64 = 512 * 1024;

trait Sample: Copy + PartialEq + Sync {
    fn to_u8(self) -> u8;
}

impl Sample for u8 {
    #[inline(always)]
    fn to_u8(self) -> u8 {
        self
    }
}

impl Sample for u16 {
    #[inline(always)]
    fn to_u8(self) -> u8 {
        (self >> 8) as u8
    }
}

#[inline(always)]
fn pack<T: Sample, const C: usize>(px: &[T; C]) -> u32 {
    let rgb = |r: T, g: T, b: T| {
        (u32::from(r.to_u8()) << 16) | (u32::from(g.to_u8()) << 8) | u32::from(b.to_u8())
    };
    match C {
        1 => rgb(px[0], px[0], px[0]),
        2 if px[1].to_u8() < 128 => TRANSPARENT,
        2 => rgb(px[0], px[0], px[0]),
        3 => rgb(px[0], px[1], px[2]),
        _ if px[3].to_u8() < 128 => TRANSPARENT,
        _ => rgb(px[0], px[1], px[2]),
    }
}

#[inline(always)]
fn bin_of(packed: u32) -> usize {
    (((packed >> 9) & 0x7C00) | ((packed >> 6) & 0x03E0) | ((packed >> 3) & 0x001F)) as usize
}

/// Colour statistics of one histogram bin.
#[derive(Debug, Clone, Copy, Default)]
struct Bin {
    key: u16,
    count: u64,
    sum: [u64; 3],
}

struct Histogram {
    count: Vec<u64>,
    sum: Vec<[u64; 3]>,
}

impl Histogram {
    /// Adds `other`'s counts and sums: the histogram of both halves' pixels.
    fn merge(&mut self, other: &Histogram) {
        for (count, n) in self.count.iter_mut().zip(&other.count) {
            *count += n;
        }
        for (sum, s) in self.sum.iter_mut().zip(&other.sum) {
            for c in 0..3 {
                sum[c] += s[c];
            }
        }
    }

    /// The occupied bins, in key order.
    fn occupied(&self) -> Vec<Bin> {
        (0..BINS)
            .filter(|&k| self.count[k] > 0)
            .map(|k| Bin {
                key: k as u16,
                count: self.count[k],
                sum: self.sum[k],
            })
            .collect()
    }

    #[inline(always)]
    fn add(&mut self, packed: u32, n: u64) {
        if packed == TRANSPARENT || n == 0 {
            return;
        }
        let b = bin_of(packed);
        self.count[b] += n;
        let s = &mut self.sum[b];
        s[0] += u64::from((packed >> 16) & 0xFF) * n;
        s[1] += u64::from((packed >> 8) & 0xFF) * n;
        s[2] += u64::from(packed & 0xFF) * n;
    }
}

/// Reduces the image to at most `colors` thread colours, as runs of palette indices.
pub fn quantize(
    ctx: &JobContext,
    image: DecodedImage,
    colors: u8,
) -> Result<Quantized, StageError> {
    let _input = ctx.charge(image.heap_bytes())?;
    match (&image.samples, image.channels) {
        (Samples::U8(s), 1) => run::<u8, 1>(ctx, &image, s, colors),
        (Samples::U8(s), 2) => run::<u8, 2>(ctx, &image, s, colors),
        (Samples::U8(s), 3) => run::<u8, 3>(ctx, &image, s, colors),
        (Samples::U8(s), _) => run::<u8, 4>(ctx, &image, s, colors),
        (Samples::U16(s), 1) => run::<u16, 1>(ctx, &image, s, colors),
        (Samples::U16(s), 2) => run::<u16, 2>(ctx, &image, s, colors),
        (Samples::U16(s), 3) => run::<u16, 3>(ctx, &image, s, colors),
        (Samples::U16(s), _) => run::<u16, 4>(ctx, &image, s, colors),
    }
}

/// Quantizes pixels of `C` channels of sample type `T`: histogram, median cut, then runs. An
/// image of [`PARALLEL_FROM`] pixels or more has each pass done by two threads, a half of its
/// rows each ([`in_two_halves`]): rows are independent in both passes (each row's runs start
/// afresh), so the result is the one thread's.
fn run<T: Sample, const C: usize>(
    ctx: &JobContext,
    image: &DecodedImage,
    samples: &[T],
    colors: u8,
) -> Result<Quantized, StageError> {
    let row_len = image.width as usize * C;
    let halves = u64::from(image.width) * u64::from(image.height) >= PARALLEL_FROM;
    // Where the helper's half starts (the image's end when there is one thread).
    let mid = if halves {
        image.height as usize / 2
    } else {
        image.height as usize
    };
    let (top, bottom) = samples.split_at(mid * row_len);
    // The histograms (a second one for the helper's half) and the bin table; held until the
    // stage ends.
    let hist_bytes = (BINS * (size_of::<u64>() + size_of::<[u64; 3]>())) as u64;
    let _hist_charge = ctx.charge(hist_bytes * (1 + u64::from(halves)) + BINS as u64)?;
    let hist = if halves {
        let (mut top, bottom) = in_two_halves(
            ctx,
            |go_on| histogram::<T, C>(top, row_len, &mut Ticker::calling(go_on, TICK)),
            |go_on| histogram::<T, C>(bottom, row_len, &mut Ticker::calling(go_on, TICK)),
        )?;
        top.merge(&bottom);
        top
    } else {
        histogram::<T, C>(samples, row_len, &mut Ticker::new(ctx, TICK))?
    };
    let (palette, lut) = median_cut(ctx, hist.occupied(), usize::from(colors))?;
    let mut raster = Raster::new(ctx, mid)?;
    if halves {
        let mut below = Raster::new(ctx, image.height as usize - mid)?;
        let lut = &lut;
        let ((), below) = in_two_halves(
            ctx,
            |go_on| raster.map_rows::<T, C>(top, row_len, lut, &mut Ticker::calling(go_on, TICK)),
            |go_on| {
                below.map_rows::<T, C>(bottom, row_len, lut, &mut Ticker::calling(go_on, TICK))?;
                Ok(below)
            },
        )?;
        raster.append(below, &mut Ticker::new(ctx, TICK))?;
    } else {
        raster.map_rows::<T, C>(samples, row_len, &lut, &mut Ticker::new(ctx, TICK))?;
    }
    raster.runs.shrink_to_fit();
    Ok(Quantized {
        width: image.width,
        height: image.height,
        palette,
        row_start: raster.row_start,
        runs: raster.runs,
    })
}

/// Pass 1: the colour histogram of whole rows, accumulated per run of identical pixels (flat
/// artwork repeats a colour for long stretches).
fn histogram<T: Sample, const C: usize>(
    samples: &[T],
    row_len: usize,
    ticker: &mut Ticker<'_>,
) -> Result<Histogram, Interrupt> {
    let mut hist = Histogram {
        count: vec![0; BINS],
        sum: vec![[0; 3]; BINS],
    };
    for row in samples.chunks_exact(row_len) {
        let Some(first) = row.as_chunks::<C>().0.first() else {
            continue;
        };
        // The row's first pixel starts its first run (counted as the loop meets it).
        let mut last_px = *first;
        let mut last = pack::<T, C>(first);
        let mut n = 0u64;
        for chunk in row.chunks(CHUNK * C) {
            for px in chunk.as_chunks::<C>().0 {
                // The same samples pack the same: packed only when they change.
                if *px != last_px {
                    last_px = *px;
                    let p = pack::<T, C>(px);
                    if p != last {
                        hist.add(last, n);
                        last = p;
                        n = 0;
                    }
                }
                n += 1;
            }
            ticker.tick((chunk.len() / C) as u64)?;
        }
        hist.add(last, n);
    }
    Ok(hist)
}

/// Pass 2's product as it grows: the image as runs of palette indices, charged as it grows.
struct Raster<'a> {
    charge: Charge<'a>,
    /// The row starts' bytes, charged alongside the runs.
    row_start_bytes: u64,
    runs: Vec<ColorRun>,
    row_start: Vec<u32>,
}

impl<'a> Raster<'a> {
    /// An empty raster of `rows` rows, its row starts charged.
    fn new(ctx: &'a JobContext, rows: usize) -> Result<Raster<'a>, Interrupt> {
        let mut row_start = Vec::with_capacity(rows + 1);
        row_start.push(0);
        Ok(Raster {
            charge: ctx.charge(0)?,
            row_start_bytes: (rows as u64 + 1) * 4,
            runs: Vec::new(),
            row_start,
        })
    }

    /// Maps whole rows of pixels (`row_len` samples each), row after row.
    fn map_rows<T: Sample, const C: usize>(
        &mut self,
        samples: &[T],
        row_len: usize,
        lut: &[u8],
        ticker: &mut Ticker<'_>,
    ) -> Result<(), Interrupt> {
        for row in samples.chunks_exact(row_len) {
            self.push_row::<T, C>(row, lut, ticker)?;
        }
        Ok(())
    }

    /// Appends the rows of `below` (the image's next rows) after this raster's, copied a slice
    /// at a time with a tick between slices.
    fn append(&mut self, below: Raster<'_>, ticker: &mut Ticker<'_>) -> Result<(), Interrupt> {
        let offset = self.runs.len() as u32;
        self.row_start_bytes += (below.row_start.len() as u64 - 1) * 4;
        self.row_start
            .extend(below.row_start[1..].iter().map(|&start| start + offset));
        reserve_ticked(
            &mut self.runs,
            below.runs.len(),
            &mut self.charge,
            self.row_start_bytes,
            &mut || ticker.now(),
        )?;
        let slice = (GROW_SLICE_BYTES / size_of::<ColorRun>()).max(1);
        for runs in below.runs.chunks(slice) {
            self.runs.extend_from_slice(runs);
            ticker.now()?;
        }
        Ok(())
    }

    /// Maps one row of pixels to thread colours (through the bin table, with a one-pixel cache)
    /// and appends its non-background runs.
    fn push_row<T: Sample, const C: usize>(
        &mut self,
        row: &[T],
        lut: &[u8],
        ticker: &mut Ticker<'_>,
    ) -> Result<(), Interrupt> {
        let index = |p: u32| {
            if p == TRANSPARENT {
                BACKGROUND
            } else {
                lut[bin_of(p)]
            }
        };
        let Some(first) = row.as_chunks::<C>().0.first() else {
            self.row_start.push(self.runs.len() as u32);
            return Ok(());
        };
        // The one-pixel cache starts with the row's first pixel.
        let mut last_px = *first;
        let mut last = pack::<T, C>(first);
        let mut last_idx = index(last);
        let mut cur = BACKGROUND;
        let mut start = 0u32;
        let mut x = 0u32;
        for chunk in row.chunks(CHUNK * C) {
            reserve_ticked(
                &mut self.runs,
                CHUNK,
                &mut self.charge,
                self.row_start_bytes,
                &mut || ticker.now(),
            )?;
            for px in chunk.as_chunks::<C>().0 {
                // The same samples pack the same: packed only when they change.
                if *px != last_px {
                    last_px = *px;
                    let p = pack::<T, C>(px);
                    if p != last {
                        last = p;
                        last_idx = index(p);
                    }
                }
                if last_idx != cur {
                    if cur != BACKGROUND {
                        self.runs.push(ColorRun {
                            x0: start,
                            x1: x,
                            color: cur,
                        });
                    }
                    cur = last_idx;
                    start = x;
                }
                x += 1;
            }
            ticker.tick((chunk.len() / C) as u64)?;
        }
        if cur != BACKGROUND {
            reserve_ticked(
                &mut self.runs,
                1,
                &mut self.charge,
                self.row_start_bytes,
                &mut || ticker.now(),
            )?;
            self.runs.push(ColorRun {
                x0: start,
                x1: x,
                color: cur,
            });
        }
        self.row_start.push(self.runs.len() as u32);
        Ok(())
    }
}

/// Sums over a set of bins that give its between-bin squared error in O(1).
#[derive(Debug, Clone, Copy, Default)]
struct Moments {
    n: f64,
    s: [f64; 3],
    /// Σ sum² / count per channel.
    q: [f64; 3],
}

impl Moments {
    fn add_bin(&mut self, b: &Bin) {
        let n = b.count as f64;
        self.n += n;
        for c in 0..3 {
            let s = b.sum[c] as f64;
            self.s[c] += s;
            self.q[c] += s * s / n;
        }
    }

    fn minus(&self, o: &Moments) -> Moments {
        Moments {
            n: self.n - o.n,
            s: [self.s[0] - o.s[0], self.s[1] - o.s[1], self.s[2] - o.s[2]],
            q: [self.q[0] - o.q[0], self.q[1] - o.q[1], self.q[2] - o.q[2]],
        }
    }

    fn channel_sse(&self, c: usize) -> f64 {
        if self.n <= 0.0 {
            0.0
        } else {
            (self.q[c] - self.s[c] * self.s[c] / self.n).max(0.0)
        }
    }

    fn sse(&self) -> f64 {
        (0..3).map(|c| self.channel_sse(c)).sum()
    }
}

struct ColorBox {
    start: usize,
    end: usize,
    moments: Moments,
}

fn box_of(bins: &[Bin], start: usize, end: usize) -> ColorBox {
    let mut moments = Moments::default();
    for b in &bins[start..end] {
        moments.add_bin(b);
    }
    ColorBox {
        start,
        end,
        moments,
    }
}

/// Splits the occupied bins into at most `colors` boxes; returns the palette (mean colour of each
/// box) and the bin → palette index table (nearest palette colour of each bin's mean).
fn median_cut(
    ctx: &JobContext,
    mut bins: Vec<Bin>,
    colors: usize,
) -> Result<(Vec<[u8; 3]>, Vec<u8>), StageError> {
    let mut boxes = Vec::new();
    if !bins.is_empty() {
        boxes.push(box_of(&bins, 0, bins.len()));
    }
    let mut prefix: Vec<Moments> = Vec::with_capacity(bins.len() + 1);
    while boxes.len() < colors {
        ctx.checkpoint()?;
        let Some((i, _)) = boxes
            .iter()
            .enumerate()
            .filter(|(_, b)| b.end - b.start > 1)
            .map(|(i, b)| (i, b.moments.sse()))
            .filter(|(_, sse)| *sse > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            break;
        };
        let (start, end) = (boxes[i].start, boxes[i].end);
        let axis = (0..3)
            .max_by(|&a, &b| {
                boxes[i]
                    .moments
                    .channel_sse(a)
                    .total_cmp(&boxes[i].moments.channel_sse(b))
            })
            .unwrap_or(0);
        // Sort by the mean along the axis (scaled to an integer for a total order).
        bins[start..end].sort_unstable_by_key(|b| (b.sum[axis] << 8) / b.count);
        prefix.clear();
        let mut acc = Moments::default();
        prefix.push(acc);
        for b in &bins[start..end] {
            acc.add_bin(b);
            prefix.push(acc);
        }
        let total = acc;
        let cut = (1..end - start)
            .min_by(|&a, &b| {
                let cost = |k: usize| prefix[k].sse() + total.minus(&prefix[k]).sse();
                cost(a).total_cmp(&cost(b))
            })
            .unwrap_or(1);
        boxes[i] = box_of(&bins, start, start + cut);
        boxes.push(box_of(&bins, start + cut, end));
    }

    let palette: Vec<[u8; 3]> = boxes
        .iter()
        .map(|b| {
            let m = &b.moments;
            let c = |k: usize| (m.s[k] / m.n).round().clamp(0.0, 255.0) as u8;
            [c(0), c(1), c(2)]
        })
        .collect();
    let mut lut = vec![0u8; BINS];
    for b in &bins {
        let mean = [0, 1, 2].map(|c| b.sum[c] as f64 / b.count as f64);
        let nearest = palette
            .iter()
            .enumerate()
            .min_by(|(_, p), (_, q)| {
                let d = |p: &[u8; 3]| -> f64 {
                    (0..3).map(|c| (mean[c] - f64::from(p[c])).powi(2)).sum()
                };
                d(p).total_cmp(&d(q))
            })
            .map(|(i, _)| i as u8)
            .unwrap_or(0);
        lut[usize::from(b.key)] = nearest;
    }
    Ok((palette, lut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_keeps_the_top_five_bits_of_each_channel() {
        assert_eq!(bin_of(0x00FF_FFFF), BINS - 1);
        assert_eq!(bin_of(0x0008_0000), 1 << 10);
        assert_eq!(bin_of(0x0000_0800), 1 << 5);
        assert_eq!(bin_of(0x0000_0008), 1);
        assert_eq!(bin_of(0x0007_0707), 0);
    }
}
