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

use super::segment::{Region, RegionRun, Segmentation};
use super::{
    DigitizeParams, HeapSize, MAX_STITCHES, Ticker, UNITS_PER_MM, invalid_parameter,
    reserve_charged, stitch_steps, vec_bytes,
};
use crate::job::{Charge, JobContext, StageError};

/// A needle position in 0.1 mm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Across, from the image's left edge.
    pub x: i32,
    /// Down, from the image's top edge.
    pub y: i32,
}

/// A serpentine block of one region: its stitches are `points[start..end]`, all needle-down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The region it fills.
    pub region: u32,
    /// Its first stitch in [`Filled::points`].
    pub start: u32,
    /// One past its last stitch.
    pub end: u32,
}

/// The product of `fill`: every region as serpentine pieces of needle points, what `sequence`
/// orders into one program.
#[derive(Debug)]
pub struct Filled {
    /// The design's physical width.
    pub width_mm: f64,
    /// The design's physical height (from the image's aspect ratio).
    pub height_mm: f64,
    /// Thread colours as RGB.
    pub palette: Vec<[u8; 3]>,
    /// The regions, by id, with their colour and area.
    pub regions: Vec<Region>,
    /// In order of their first row.
    pub pieces: Vec<Piece>,
    /// The stitches of all pieces, piece after piece.
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

/// The fill's scale, derived once from the parameters and the image size: every phase maps
/// pixels, rows and millimetres the same way.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    mm_per_px: f64,
    height_mm: f64,
    density: f64,
    pitch: i32,
    units_per_px: f64,
}

impl Geometry {
    /// Why: one place derives the scale, so both passes agree on it bit for bit.
    fn new(seg: &Segmentation, params: &DigitizeParams) -> Self {
        let mm_per_px = params.width_mm / f64::from(seg.width);
        Geometry {
            mm_per_px,
            height_mm: mm_per_px * f64::from(seg.height),
            density: params.density_mm,
            pitch: ((params.max_stitch_mm * UNITS_PER_MM).floor() as i32).max(1),
            units_per_px: mm_per_px * UNITS_PER_MM,
        }
    }

    /// A pixel x coordinate in needle units.
    fn units(&self, px: u32) -> i32 {
        (f64::from(px) * self.units_per_px).round() as i32
    }
}

/// Pass 1's product: every piece as a linked list of its row segments, with the segments' charge
/// (held until the stage ends, as the segments are needed by pass 2).
struct Chains<'a> {
    segments: Vec<Segment>,
    pieces: Vec<PieceLinks>,
    charge: Charge<'a>,
}

/// Pass 2's product: the needle points and the pieces that index them, with their charge.
struct Stitched<'a> {
    pieces: Vec<Piece>,
    points: Vec<Point>,
    _charge: Charge<'a>,
}

/// Tatami-fills every region of `seg`: refuse by area, chain rows into pieces, stitch them.
pub fn fill(
    ctx: &JobContext,
    seg: Segmentation,
    params: &DigitizeParams,
) -> Result<Filled, StageError> {
    let _input = ctx.charge(seg.heap_bytes())?;
    let geo = Geometry::new(&seg, params);
    refuse_by_area(&seg, &geo, params)?;
    let mut ticker = Ticker::new(ctx, 4096);
    let chains = chain_rows(ctx, &seg, &geo, &mut ticker)?;
    let mut stitched = stitch_pieces(ctx, &chains, &geo, &mut ticker)?;
    // The segments go; their charge stays until the stage ends.
    drop(chains.segments);
    stitched.points.shrink_to_fit();
    Ok(Filled {
        width_mm: params.width_mm,
        height_mm: geo.height_mm,
        palette: seg.palette,
        regions: seg.regions,
        pieces: stitched.pieces,
        points: stitched.points,
    })
}

/// Refuses early what would exceed the design limit (from the area, before any work).
fn refuse_by_area(
    seg: &Segmentation,
    geo: &Geometry,
    params: &DigitizeParams,
) -> Result<(), StageError> {
    let mm_per_px = geo.mm_per_px;
    let area_mm2: f64 =
        seg.regions.iter().map(|r| r.area_px as f64).sum::<f64>() * mm_per_px * mm_per_px;
    let estimate = area_mm2 / (geo.density * params.max_stitch_mm);
    if estimate > MAX_STITCHES as f64 * 1.2 {
        return Err(too_many_stitches(estimate as u64));
    }
    Ok(())
}

/// Pass 1's scratch: the runs open on the previous and current stitch row, and how the runs of
/// the current row overlap those of the previous one.
#[derive(Default)]
struct RowLinks {
    prev: Vec<Open>,
    cur: Vec<Open>,
    up: Vec<u32>,
    partner: Vec<u32>,
    down: Vec<u32>,
}

impl RowLinks {
    /// Counts, for the runs of a new row, their same-region overlaps with the previous row (both
    /// ways), and each new run's last overlapping partner.
    fn overlap(&mut self, runs: &[RegionRun]) {
        self.cur.clear();
        self.up.clear();
        self.partner.clear();
        self.up.resize(runs.len(), 0);
        self.partner.resize(runs.len(), NONE);
        self.down.clear();
        self.down.resize(self.prev.len(), 0);
        let (mut i, mut j) = (0, 0);
        while i < self.prev.len() && j < runs.len() {
            let (a, b) = (&self.prev[i], &runs[j]);
            if a.px0 < b.x1 && b.x0 < a.px1 && a.region == b.region {
                self.down[i] += 1;
                self.up[j] += 1;
                self.partner[j] = i as u32;
            }
            if a.px1 <= b.x1 {
                i += 1;
            }
            if b.x1 <= a.px1 {
                j += 1;
            }
        }
    }

    /// Bytes of the scratch and the piece list, charged alongside the growing segment list.
    fn others(&self, pieces: &Vec<PieceLinks>) -> u64 {
        vec_bytes(pieces) + vec_bytes(&self.prev) * 2 + vec_bytes(&self.up) * 3
    }

    /// The open piece run `j` continues, if each is the other's only same-region overlap.
    fn continued(&self, j: usize) -> Option<u32> {
        let continued = self.up[j] == 1 && self.down[self.partner[j] as usize] == 1;
        continued.then(|| self.prev[self.partner[j] as usize].piece)
    }
}

/// Pass 1: chains the runs of successive stitch rows into pieces.
fn chain_rows<'c>(
    ctx: &'c JobContext,
    seg: &Segmentation,
    geo: &Geometry,
    ticker: &mut Ticker<'_>,
) -> Result<Chains<'c>, StageError> {
    let mut chains = Chains {
        segments: Vec::new(),
        pieces: Vec::new(),
        charge: ctx.charge(0)?,
    };
    let mut links = RowLinks::default();
    let mut row = 0u32;
    loop {
        let y_mm = (f64::from(row) + 0.5) * geo.density;
        if y_mm >= geo.height_mm {
            break;
        }
        let py = ((y_mm / geo.mm_per_px) as u32).min(seg.height - 1);
        let runs = seg.row(py);
        links.overlap(runs);
        let others = links.others(&chains.pieces);
        reserve_charged(&mut chains.segments, runs.len(), &mut chains.charge, others)?;
        for (j, run) in runs.iter().enumerate() {
            let piece = chains.push(row, run, geo, links.continued(j));
            links.cur.push(Open {
                px0: run.x0,
                px1: run.x1,
                region: run.region,
                piece,
            });
        }
        std::mem::swap(&mut links.prev, &mut links.cur);
        ticker.tick(runs.len() as u64 + 256)?;
        row += 1;
    }
    Ok(chains)
}

impl Chains<'_> {
    /// Appends the segment of `run` on stitch row `row` to piece `continued`, or starts a new
    /// piece with it; returns the piece.
    fn push(&mut self, row: u32, run: &RegionRun, geo: &Geometry, continued: Option<u32>) -> u32 {
        let id = self.segments.len() as u32;
        self.segments.push(Segment {
            row,
            x0: geo.units(run.x0),
            x1: geo.units(run.x1),
            next: NONE,
        });
        if let Some(p) = continued {
            let links = &mut self.pieces[p as usize];
            self.segments[links.last as usize].next = id;
            links.last = id;
            p
        } else {
            self.pieces.push(PieceLinks {
                region: run.region,
                first: id,
                last: id,
            });
            (self.pieces.len() - 1) as u32
        }
    }
}

/// Pass 2: the needle points of every piece, serpentine.
fn stitch_pieces<'c>(
    ctx: &'c JobContext,
    chains: &Chains<'_>,
    geo: &Geometry,
    ticker: &mut Ticker<'_>,
) -> Result<Stitched<'c>, StageError> {
    let mut points: Vec<Point> = Vec::new();
    let mut pieces: Vec<Piece> = Vec::with_capacity(chains.pieces.len());
    let mut charge = ctx.charge(vec_bytes(&pieces))?;
    // One allocation for the stage: every row's worst case (as `stitch_piece` reserves it),
    // summed from the segments, so the buffer is not copied as it grows (0.7 ms of a 4 MP job).
    let worst: usize = (chains.segments.iter())
        .map(|s| ((s.x1 - s.x0) / geo.pitch) as usize + 4)
        .sum();
    let worst = worst.min(MAX_STITCHES as usize + 1);
    reserve_charged(&mut points, worst, &mut charge, vec_bytes(&pieces))?;
    for links in &chains.pieces {
        let start = points.len();
        stitch_piece(
            &mut points,
            &mut charge,
            links,
            &chains.segments,
            geo,
            ticker,
        )?;
        if points.len() as u64 > MAX_STITCHES {
            return Err(too_many_stitches(points.len() as u64));
        }
        pieces.push(Piece {
            region: links.region,
            start: start as u32,
            end: points.len() as u32,
        });
    }
    Ok(Stitched {
        pieces,
        points,
        _charge: charge,
    })
}

/// Stitches the rows of one piece, turning at alternate ends, onto the end of `points`.
fn stitch_piece(
    points: &mut Vec<Point>,
    charge: &mut Charge<'_>,
    links: &PieceLinks,
    segments: &[Segment],
    geo: &Geometry,
    ticker: &mut Ticker<'_>,
) -> Result<(), StageError> {
    let (pitch, start) = (geo.pitch, points.len());
    let mut id = links.first;
    let mut k = 0u32;
    loop {
        let s = segments[id as usize];
        let y = ((f64::from(s.row) + 0.5) * geo.density * UNITS_PER_MM).round() as i32;
        let (a, b) = if k.is_multiple_of(2) {
            (s.x0, s.x1)
        } else {
            (s.x1, s.x0)
        };
        // Worst case for this row: the turn plus the row itself.
        let row_points = ((s.x1 - s.x0) / pitch) as usize + 4;
        reserve_charged(points, row_points + 64, charge, 0)?;
        if let Some(&from) = points[start..].last() {
            connect(points, from, Point { x: a, y }, pitch, charge)?;
        }
        points.push(Point { x: a, y });
        row_stitches(points, a, b, y, phase(s.row, pitch), pitch);
        if b != a {
            points.push(Point { x: b, y });
        }
        ticker.tick(row_points as u64)?;
        k += 1;
        if id == links.last {
            return Ok(());
        }
        id = s.next;
    }
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
    charge: &mut Charge<'_>,
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
