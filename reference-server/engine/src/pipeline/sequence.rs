//! `sequence`: turn the filled pieces into one needle program.
//!
//! One colour block per thread colour, largest area first (background and big fills go down
//! before the details that sit on them). Inside a block, regions are visited nearest-neighbour
//! (greedy, from where the needle is, using a uniform grid so it stays fast with many regions),
//! and inside a region its pieces likewise; a piece may be entered at either end (stitched
//! backwards it is the same fill), whichever is nearer. Travel of up to
//! [`TRIM_THRESHOLD_UNITS`] is stitched (split so no stitch exceeds the maximum); longer travel
//! is a trim and then jumps of at most [`MAX_JUMP_UNITS`] per axis, so every jump fits one record
//! of both DST and EXP. Blocks are separated by a trim and a colour change; the program starts
//! with jumps from the origin and ends with a trim and `end`.

use plimsoll_spec::design::DESIGN_FORMAT;
use plimsoll_spec::{Design, Extents, Stitch, StitchCommand, Thread};

use super::fill::{Filled, Point};
use super::nearest::{NearestIndex, dist2};
use super::{
    DigitizeParams, HeapSize, MAX_JUMP_UNITS, MAX_STITCHES, TRIM_THRESHOLD_UNITS, Ticker,
    UNITS_PER_MM, invalid_parameter, reserve_charged, stitch_steps,
};
use crate::job::{Charge, JobContext, StageError};

/// Sews the filled pieces into one needle program: colour blocks, largest area first.
pub fn sequence(
    ctx: &JobContext,
    filled: Filled,
    params: &DigitizeParams,
) -> Result<Design, StageError> {
    let _input = ctx.charge(filled.heap_bytes())?;
    let pitch = ((params.max_stitch_mm * UNITS_PER_MM).floor() as i64).max(1);
    let mut ticker = Ticker::new(ctx, 16 * 1024);
    let groups = RegionPieces::new(&filled);
    let colors = colour_order(&filled, &groups);
    let mut program = Program::new(ctx, filled.points.len() + filled.pieces.len() * 4 + 16)?;
    let mut threads = Vec::with_capacity(colors.len());
    let sewing = Sewing {
        filled: &filled,
        groups: &groups,
        pitch,
    };
    for (block, &color) in colors.iter().enumerate() {
        let [r, g, b] = filled.palette[color];
        threads.push(Thread {
            color: format!("#{r:02x}{g:02x}{b:02x}"),
        });
        let mut block = Block {
            index: block,
            started: false,
        };
        sewing.block(&mut program, &mut block, color, &mut ticker)?;
    }
    finish(program, &filled, threads)
}

/// Pieces grouped by region (a counting sort; pieces keep their order), so that the pieces of a
/// region are one slice.
struct RegionPieces {
    start: Vec<u32>,
    pieces: Vec<u32>,
}

impl RegionPieces {
    /// Why a counting sort: linear in the pieces, and it keeps each region's pieces in order.
    fn new(filled: &Filled) -> Self {
        let n_regions = filled.regions.len();
        let mut region_piece_start = vec![0u32; n_regions + 1];
        for p in &filled.pieces {
            region_piece_start[p.region as usize + 1] += 1;
        }
        for r in 0..n_regions {
            region_piece_start[r + 1] += region_piece_start[r];
        }
        let mut fill_at = region_piece_start.clone();
        let mut region_pieces = vec![0u32; filled.pieces.len()];
        for (i, p) in filled.pieces.iter().enumerate() {
            let slot = &mut fill_at[p.region as usize];
            region_pieces[*slot as usize] = i as u32;
            *slot += 1;
        }
        drop(fill_at);
        RegionPieces {
            start: region_piece_start,
            pieces: region_pieces,
        }
    }

    /// The pieces of region `r`.
    fn of(&self, r: usize) -> &[u32] {
        &self.pieces[self.start[r] as usize..self.start[r + 1] as usize]
    }
}

/// The colours that have pieces, largest stitched area first (ties by palette index), so the
/// background and big fills go down before the details on them.
fn colour_order(filled: &Filled, groups: &RegionPieces) -> Vec<usize> {
    let mut color_area = vec![0u64; filled.palette.len()];
    for (r, region) in filled.regions.iter().enumerate() {
        if !groups.of(r).is_empty() {
            color_area[usize::from(region.color)] += region.area_px;
        }
    }
    let mut colors: Vec<usize> = (0..filled.palette.len())
        .filter(|&c| color_area[c] > 0)
        .collect();
    colors.sort_by_key(|&c| (std::cmp::Reverse(color_area[c]), c));
    colors
}

/// Both ends of every piece of one colour, grouped by region: the points the nearest-region
/// search runs over.
struct BlockEnds {
    /// The regions of the colour that have pieces.
    regions: Vec<u32>,
    /// The ends of region `regions[k]` are `ends[ends_start[k]..ends_start[k + 1]]`.
    ends: Vec<Point>,
    ends_start: Vec<usize>,
    /// The index into `regions` of each end.
    owner: Vec<u32>,
}

impl BlockEnds {
    /// Why both ends: either end of a piece can be its entry (stitched backwards it is the same
    /// fill).
    fn new(filled: &Filled, groups: &RegionPieces, color: usize) -> Self {
        let end_point = |piece: u32, end: usize| {
            let p = filled.pieces[piece as usize];
            filled.points[if end == 0 { p.start } else { p.end - 1 } as usize]
        };
        let regions: Vec<u32> = (0..filled.regions.len() as u32)
            .filter(|&r| {
                usize::from(filled.regions[r as usize].color) == color
                    && !groups.of(r as usize).is_empty()
            })
            .collect();
        let mut ends: Vec<Point> = Vec::new();
        let mut ends_start: Vec<usize> = Vec::with_capacity(regions.len() + 1);
        let mut owner: Vec<u32> = Vec::new();
        for (k, &r) in regions.iter().enumerate() {
            ends_start.push(ends.len());
            for &piece in groups.of(r as usize) {
                ends.extend([end_point(piece, 0), end_point(piece, 1)]);
                owner.extend([k as u32, k as u32]);
            }
        }
        ends_start.push(ends.len());
        BlockEnds {
            regions,
            ends,
            ends_start,
            owner,
        }
    }

    /// The end indices of region `regions[k]`.
    fn of(&self, k: usize) -> std::ops::Range<usize> {
        self.ends_start[k]..self.ends_start[k + 1]
    }
}

/// A colour block being sewn: the first piece of a block is reached by jumps (after a trim and a
/// colour change, but for the first block), later ones by travel.
struct Block {
    index: usize,
    started: bool,
}

impl Block {
    /// Moves the needle to `to`, the entry of the next piece of this block.
    fn enter(
        &mut self,
        program: &mut Program<'_>,
        to: Point,
        pitch: i64,
    ) -> Result<(), StageError> {
        if !self.started {
            if self.index > 0 {
                program.push_here(StitchCommand::Trim)?;
                program.push_here(StitchCommand::ColorChange)?;
            }
            program.jump_to(to)?;
            self.started = true;
            Ok(())
        } else {
            program.travel_to(to, pitch)
        }
    }
}

/// What sewing a block reads: the filled pieces, their grouping by region and the stitch pitch.
struct Sewing<'f> {
    filled: &'f Filled,
    groups: &'f RegionPieces,
    pitch: i64,
}

impl Sewing<'_> {
    /// Sews the regions of one colour, nearest region first from where the needle is.
    fn block(
        &self,
        program: &mut Program<'_>,
        block: &mut Block,
        color: usize,
        ticker: &mut Ticker<'_>,
    ) -> Result<(), StageError> {
        let block_ends = BlockEnds::new(self.filled, self.groups, color);
        let mut nearest_region = NearestIndex::new(&block_ends.ends);
        while let Some(e) = nearest_region.take_nearest(program.position()) {
            let k = block_ends.owner[e] as usize;
            for other in block_ends.of(k) {
                nearest_region.remove(other);
            }
            let pieces = self.groups.of(block_ends.regions[k] as usize);
            let region_ends = &block_ends.ends[block_ends.of(k)];
            self.region(program, block, pieces, region_ends, ticker)?;
        }
        Ok(())
    }

    /// Sews the pieces of one region, each entered at its end nearest the needle.
    fn region(
        &self,
        program: &mut Program<'_>,
        block: &mut Block,
        pieces: &[u32],
        region_ends: &[Point],
        ticker: &mut Ticker<'_>,
    ) -> Result<(), StageError> {
        let mut order = PieceOrder::new(region_ends);
        while let Some(e) = order.next(program.position()) {
            let p = self.filled.pieces[pieces[e / 2] as usize];
            let stitches = &self.filled.points[p.start as usize..p.end as usize];
            let reversed = e % 2 == 1;
            let to = if reversed {
                stitches[stitches.len() - 1]
            } else {
                stitches[0]
            };
            block.enter(program, to, self.pitch)?;
            program.stitch_all(stitches, reversed)?;
            ticker.tick(stitches.len() as u64 + 16)?;
        }
        Ok(())
    }
}

/// Ends the program (a trim if anything was stitched, then `end`), checks the stitch limit and
/// builds the design.
fn finish(
    mut program: Program<'_>,
    filled: &Filled,
    threads: Vec<Thread>,
) -> Result<Design, StageError> {
    if program.stitch_count > 0 {
        program.push_here(StitchCommand::Trim)?;
    }
    program.push_here(StitchCommand::End)?;
    if program.stitch_count > MAX_STITCHES {
        return Err(invalid_parameter(format!(
            "the design needs {} stitches, more than the limit of {MAX_STITCHES}",
            program.stitch_count
        )));
    }
    Ok(Design {
        format: DESIGN_FORMAT.to_owned(),
        width_mm: filled.width_mm,
        height_mm: filled.height_mm,
        threads,
        extents: program.extents(),
        stitch_count: program.stitch_count,
        stitches: program.out,
    })
}

/// The needle program being written, with its charge and running extents.
struct Program<'a> {
    out: Vec<Stitch>,
    charge: Charge<'a>,
    at: Point,
    stitch_count: u64,
    min: Point,
    max: Point,
}

impl<'a> Program<'a> {
    fn new(ctx: &'a JobContext, capacity: usize) -> Result<Self, StageError> {
        let mut charge = ctx.charge(0)?;
        let mut out = Vec::new();
        reserve_charged(&mut out, capacity, &mut charge, 0)?;
        Ok(Program {
            out,
            charge,
            at: Point { x: 0, y: 0 },
            stitch_count: 0,
            min: Point {
                x: i32::MAX,
                y: i32::MAX,
            },
            max: Point {
                x: i32::MIN,
                y: i32::MIN,
            },
        })
    }

    fn position(&self) -> Point {
        self.at
    }

    #[inline]
    fn push(&mut self, to: Point, cmd: StitchCommand) -> Result<(), StageError> {
        reserve_charged(&mut self.out, 1, &mut self.charge, 0)?;
        self.out.push(Stitch {
            x: to.x,
            y: to.y,
            cmd,
        });
        self.at = to;
        self.min.x = self.min.x.min(to.x);
        self.min.y = self.min.y.min(to.y);
        self.max.x = self.max.x.max(to.x);
        self.max.y = self.max.y.max(to.y);
        if cmd == StitchCommand::Stitch {
            self.stitch_count += 1;
        }
        Ok(())
    }

    fn push_here(&mut self, cmd: StitchCommand) -> Result<(), StageError> {
        self.push(self.at, cmd)
    }

    /// Jumps to `to` in moves of at most [`MAX_JUMP_UNITS`] per axis.
    fn jump_to(&mut self, to: Point) -> Result<(), StageError> {
        let from = self.at;
        let (dx, dy) = (i64::from(to.x - from.x), i64::from(to.y - from.y));
        let n =
            (dx.abs().max(dy.abs()) + i64::from(MAX_JUMP_UNITS) - 1) / i64::from(MAX_JUMP_UNITS);
        for i in 1..=n {
            let p = Point {
                x: from.x + (dx * i / n) as i32,
                y: from.y + (dy * i / n) as i32,
            };
            self.push(p, StitchCommand::Jump)?;
        }
        Ok(())
    }

    /// Short travel is stitched (in stitches no longer than `pitch`), long travel trimmed and
    /// jumped. Either way the needle ends at `to` without stitching it.
    fn travel_to(&mut self, to: Point, pitch: i64) -> Result<(), StageError> {
        let d2 = dist2(self.at, to);
        if d2 > TRIM_THRESHOLD_UNITS * TRIM_THRESHOLD_UNITS {
            self.push_here(StitchCommand::Trim)?;
            return self.jump_to(to);
        }
        let from = self.at;
        let (dx, dy) = (i64::from(to.x - from.x), i64::from(to.y - from.y));
        let n = stitch_steps(dx, dy, pitch);
        for i in 1..n {
            let p = Point {
                x: from.x + (dx * i / n) as i32,
                y: from.y + (dy * i / n) as i32,
            };
            self.push(p, StitchCommand::Stitch)?;
        }
        Ok(())
    }

    /// Stitches `points` in order: written in one pass, then the extents and the count
    /// updated from the slice once, not per stitch (the stage's hottest loop).
    fn stitch_all(&mut self, points: &[Point], reversed: bool) -> Result<(), StageError> {
        let Some(&last) = (if reversed {
            points.first()
        } else {
            points.last()
        }) else {
            return Ok(());
        };
        reserve_charged(&mut self.out, points.len(), &mut self.charge, 0)?;
        let stitch = |&Point { x, y }: &Point| Stitch {
            x,
            y,
            cmd: StitchCommand::Stitch,
        };
        if reversed {
            self.out.extend(points.iter().rev().map(stitch));
        } else {
            self.out.extend(points.iter().map(stitch));
        }
        for p in points {
            self.min.x = self.min.x.min(p.x);
            self.min.y = self.min.y.min(p.y);
            self.max.x = self.max.x.max(p.x);
            self.max.y = self.max.y.max(p.y);
        }
        self.stitch_count += points.len() as u64;
        self.at = last;
        Ok(())
    }

    fn extents(&self) -> Extents {
        if self.out.is_empty() || self.min.x > self.max.x {
            return Extents::default();
        }
        Extents {
            min_x: self.min.x,
            min_y: self.min.y,
            max_x: self.max.x,
            max_y: self.max.y,
        }
    }
}

/// The pieces of one region, nearest end first. Most regions are one piece: that needs no index.
enum PieceOrder<'a> {
    Single { ends: &'a [Point], done: bool },
    Many(NearestIndex),
}

impl<'a> PieceOrder<'a> {
    /// `ends` holds both ends of every piece: `2i` its start, `2i + 1` its end.
    fn new(ends: &'a [Point]) -> Self {
        if ends.len() == 2 {
            PieceOrder::Single { ends, done: false }
        } else {
            PieceOrder::Many(NearestIndex::new(ends))
        }
    }

    /// The next end to enter by (its piece is then done).
    fn next(&mut self, from: Point) -> Option<usize> {
        match self {
            PieceOrder::Single { done: true, .. } => None,
            PieceOrder::Single { ends, done } => {
                *done = true;
                Some(usize::from(dist2(from, ends[1]) < dist2(from, ends[0])))
            }
            PieceOrder::Many(index) => {
                let e = index.take_nearest(from)?;
                index.remove(e ^ 1);
                Some(e)
            }
        }
    }
}
