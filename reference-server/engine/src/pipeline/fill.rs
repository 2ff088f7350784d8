//! `fill`: tatami fill of every region.
//!
//! Rows are placed in physical millimetres — row `r` at `(r + ½)·density_mm` — and each is mapped
//! to the image row under it, so the number of rows (and of stitches) follows the design's area
//! in mm², not the image's pixel count. Along a row every run of a region is stitched from end
//! to end with needle points on a global grid of pitch `max_stitch_mm` whose phase shifts by a
//! third of the pitch from row to row (the staggered brick pattern that gives tatami its look
//! and keeps penetrations from lining up into a groove), plus a point at each run end.
//!
//! Consecutive rows are chained into serpentine *pieces*: a run continues the piece of the run
//! above when each is the other's only same-region overlap; a split or a merge (a hole, a fork)
//! starts new pieces. Inside a piece the needle turns at the run ends with short stitches, so
//! only travel between pieces needs trims and jumps (decided by `sequence`).
//!
//! Stitches along a row may be shorter than the pitch at run ends (never longer).

use super::segment::{Region, Segmentation};
use super::{
    DigitizeParams, HeapSize, MAX_STITCHES, Ticker, UNITS_PER_MM, invalid_parameter,
    reserve_charged, stitch_steps, vec_bytes,
};
use crate::job::{JobContext, StageError};

/// A needle position in 0.1 mm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

/// A serpentine block of one region: its stitches are `points[start..end]`, all needle-down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub region: u32,
    pub start: u32,
    pub end: u32,
}

#[derive(Debug)]
pub struct Filled {
    pub width_mm: f64,
    pub height_mm: f64,
    pub palette: Vec<[u8; 3]>,
    pub regions: Vec<Region>,
    /// In order of their first row.
    pub pieces: Vec<Piece>,
    pub points: Vec<Point>,
}

impl HeapSize for Filled {
    fn heap_bytes(&self) -> u64 {
        vec_bytes(&self.palette)
            + vec_bytes(&self.regions)
            + vec_bytes(&self.pieces)
            + vec_bytes(&self.points)
    }
}

const NONE: u32 = u32::MAX;

/// One run of one region on one stitch row.
#[derive(Debug, Clone, Copy)]
struct Segment {
    row: u32,
    x0: i32,
    x1: i32,
    next: u32,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    /// Pixel span, for the overlap test.
    px0: u32,
    px1: u32,
    region: u32,
    piece: u32,
}

#[derive(Debug, Clone, Copy)]
struct PieceLinks {
    region: u32,
    first: u32,
    last: u32,
}

pub fn fill(
    ctx: &JobContext,
    seg: Segmentation,
    params: &DigitizeParams,
) -> Result<Filled, StageError> {
    let _input = ctx.charge(seg.heap_bytes())?;
    let mm_per_px = params.width_mm / f64::from(seg.width);
    let height_mm = mm_per_px * f64::from(seg.height);
    let density = params.density_mm;
    let pitch = ((params.max_stitch_mm * UNITS_PER_MM).floor() as i32).max(1);
    let units_per_px = mm_per_px * UNITS_PER_MM;
    let to_units = |px: u32| (f64::from(px) * units_per_px).round() as i32;

    // Refuse early what would exceed the design limit (from the area, before any work).
    let area_mm2: f64 =
        seg.regions.iter().map(|r| r.area_px as f64).sum::<f64>() * mm_per_px * mm_per_px;
    let estimate = area_mm2 / (density * params.max_stitch_mm);
    if estimate > MAX_STITCHES as f64 * 1.2 {
        return Err(too_many_stitches(estimate as u64));
    }

    // Pass 1: chain the runs of successive stitch rows into pieces.
    let mut charge = ctx.charge(0)?;
    let mut segments: Vec<Segment> = Vec::new();
    let mut pieces: Vec<PieceLinks> = Vec::new();
    let mut prev: Vec<Open> = Vec::new();
    let mut cur: Vec<Open> = Vec::new();
    let mut up: Vec<u32> = Vec::new();
    let mut partner: Vec<u32> = Vec::new();
    let mut down: Vec<u32> = Vec::new();
    let mut ticker = Ticker::new(ctx, 4096);
    let mut row = 0u32;
    loop {
        let y_mm = (f64::from(row) + 0.5) * density;
        if y_mm >= height_mm {
            break;
        }
        let py = ((y_mm / mm_per_px) as u32).min(seg.height - 1);
        let runs = seg.row(py);
        cur.clear();
        up.clear();
        partner.clear();
        up.resize(runs.len(), 0);
        partner.resize(runs.len(), NONE);
        down.clear();
        down.resize(prev.len(), 0);
        {
            let (mut i, mut j) = (0, 0);
            while i < prev.len() && j < runs.len() {
                let (a, b) = (&prev[i], &runs[j]);
                if a.px0 < b.x1 && b.x0 < a.px1 && a.region == b.region {
                    down[i] += 1;
                    up[j] += 1;
                    partner[j] = i as u32;
                }
                if a.px1 <= b.x1 {
                    i += 1;
                }
                if b.x1 <= a.px1 {
                    j += 1;
                }
            }
        }
        let others = vec_bytes(&pieces) + vec_bytes(&prev) * 2 + vec_bytes(&up) * 3;
        reserve_charged(&mut segments, runs.len(), &mut charge, others)?;
        for (j, run) in runs.iter().enumerate() {
            let (x0, x1) = (to_units(run.x0), to_units(run.x1));
            let id = segments.len() as u32;
            segments.push(Segment {
                row,
                x0,
                x1,
                next: NONE,
            });
            let continued = up[j] == 1 && down[partner[j] as usize] == 1;
            let piece = if continued {
                let p = prev[partner[j] as usize].piece;
                let links = &mut pieces[p as usize];
                segments[links.last as usize].next = id;
                links.last = id;
                p
            } else {
                pieces.push(PieceLinks {
                    region: run.region,
                    first: id,
                    last: id,
                });
                (pieces.len() - 1) as u32
            };
            cur.push(Open {
                px0: run.x0,
                px1: run.x1,
                region: run.region,
                piece,
            });
        }
        std::mem::swap(&mut prev, &mut cur);
        ticker.tick(runs.len() as u64 + 256)?;
        row += 1;
    }
    drop((prev, cur, up, partner, down));

    // Pass 2: the needle points of every piece, serpentine.
    let mut points: Vec<Point> = Vec::new();
    let mut out_pieces: Vec<Piece> = Vec::with_capacity(pieces.len());
    let mut points_charge = ctx.charge(vec_bytes(&out_pieces))?;
    for links in &pieces {
        let start = points.len();
        let mut id = links.first;
        let mut k = 0u32;
        loop {
            let s = segments[id as usize];
            let y = ((f64::from(s.row) + 0.5) * density * UNITS_PER_MM).round() as i32;
            let (a, b) = if k.is_multiple_of(2) {
                (s.x0, s.x1)
            } else {
                (s.x1, s.x0)
            };
            // Worst case for this row: the turn plus the row itself.
            let row_points = ((s.x1 - s.x0) / pitch) as usize + 4;
            reserve_charged(&mut points, row_points + 64, &mut points_charge, 0)?;
            if let Some(&from) = points[start..].last() {
                connect(
                    &mut points,
                    from,
                    Point { x: a, y },
                    pitch,
                    &mut points_charge,
                )?;
            }
            points.push(Point { x: a, y });
            row_stitches(&mut points, a, b, y, phase(s.row, pitch), pitch);
            if b != a {
                points.push(Point { x: b, y });
            }
            ticker.tick(row_points as u64)?;
            k += 1;
            if id == links.last {
                break;
            }
            id = s.next;
        }
        if points.len() as u64 > MAX_STITCHES {
            return Err(too_many_stitches(points.len() as u64));
        }
        out_pieces.push(Piece {
            region: links.region,
            start: start as u32,
            end: points.len() as u32,
        });
    }
    drop(segments);
    points.shrink_to_fit();
    Ok(Filled {
        width_mm: params.width_mm,
        height_mm,
        palette: seg.palette,
        regions: seg.regions,
        pieces: out_pieces,
        points,
    })
}

fn too_many_stitches(n: u64) -> StageError {
    invalid_parameter(format!(
        "the design would need about {n} stitches, more than the limit of {MAX_STITCHES}; \
         use a smaller width_mm or a larger density_mm"
    ))
}

/// Grid phase of stitch row `row`: shifted by a third of the pitch per row.
#[inline]
pub fn phase(row: u32, pitch: i32) -> i32 {
    (row % 3) as i32 * pitch / 3
}

/// Pushes the grid points strictly between `a` and `b` (in the direction a → b).
#[inline]
fn row_stitches(points: &mut Vec<Point>, a: i32, b: i32, y: i32, phase: i32, pitch: i32) {
    if a < b {
        let mut g = a - (a - phase).rem_euclid(pitch) + pitch;
        while g < b {
            points.push(Point { x: g, y });
            g += pitch;
        }
    } else if a > b {
        let mut g = a - (a - phase).rem_euclid(pitch);
        if g == a {
            g -= pitch;
        }
        while g > b {
            points.push(Point { x: g, y });
            g -= pitch;
        }
    }
}

/// Adds the intermediate points of a stitched move `from → to` so no stitch exceeds `pitch`.
fn connect(
    points: &mut Vec<Point>,
    from: Point,
    to: Point,
    pitch: i32,
    charge: &mut crate::job::Charge<'_>,
) -> Result<(), StageError> {
    let (dx, dy) = (i64::from(to.x - from.x), i64::from(to.y - from.y));
    let n = stitch_steps(dx, dy, i64::from(pitch));
    if n > 1 {
        reserve_charged(points, n as usize, charge, 0)?;
        for i in 1..n {
            points.push(Point {
                x: from.x + (dx * i / n) as i32,
                y: from.y + (dy * i / n) as i32,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_points_are_on_the_staggered_grid_and_never_farther_apart_than_the_pitch() {
        for (a, b) in [(0, 100), (7, 93), (100, 0), (93, 7), (5, 5), (-41, 77)] {
            for row in 0..3 {
                let mut pts = vec![Point { x: a, y: 0 }];
                row_stitches(&mut pts, a, b, 0, phase(row, 30), 30);
                if a != b {
                    pts.push(Point { x: b, y: 0 });
                }
                for w in pts.windows(2) {
                    let d = (w[1].x - w[0].x).abs();
                    assert!(d > 0 && d <= 30, "{a}->{b} row {row}: {pts:?}");
                }
                let interior = pts.len().saturating_sub(2);
                for p in pts.iter().skip(1).take(interior) {
                    assert_eq!((p.x - phase(row, 30)).rem_euclid(30), 0);
                }
            }
        }
    }
}
