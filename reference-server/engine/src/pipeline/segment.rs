//! `segment`: connected regions of one colour, with specks merged into their neighbours.
//!
//! Works on the runs from `quantize`, not on pixels: a run is joined (union-find) to every
//! same-coloured run it overlaps in the row above (4-connectivity), so the cost follows the
//! number of colour changes along rows. Regions smaller than [`MIN_REGION_MM2`] at the design's
//! physical scale are specks: each is merged into the largest region it touches (taking its
//! colour); specks touching nothing but background or other specks are dropped if, together,
//! they still stay under the minimum.

use super::quantize::{ColorRun, Quantized};
use super::{HeapSize, MIN_REGION_MM2, Ticker, vec_bytes};
use crate::job::{JobContext, StageError};

/// A run `[x0, x1)` of one region in one image row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionRun {
    /// First pixel of the run.
    pub x0: u32,
    /// One past its last pixel.
    pub x1: u32,
    /// Region id, an index into [`Segmentation::regions`].
    pub region: u32,
}

/// A connected area of one colour: what `fill` covers with pieces and `sequence` orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Palette index.
    pub color: u8,
    /// Area in pixels, for the speck test and the colour order.
    pub area_px: u64,
}

/// The image as regions: for each row, runs of region ids, left to right; touching runs of one
/// region are merged.
#[derive(Debug)]
pub struct Segmentation {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Thread colours as RGB.
    pub palette: Vec<[u8; 3]>,
    /// The regions, by id.
    pub regions: Vec<Region>,
    /// Runs of row `y` are `runs[row_start[y]..row_start[y + 1]]`.
    pub row_start: Vec<u32>,
    /// The runs of all rows, row after row.
    pub runs: Vec<RegionRun>,
}

impl Segmentation {
    /// The runs of row `y`.
    pub fn row(&self, y: u32) -> &[RegionRun] {
        super::row_runs(&self.runs, &self.row_start, y)
    }
}

impl HeapSize for Segmentation {
    fn heap_bytes(&self) -> u64 {
        vec_bytes(&self.row_start)
            + vec_bytes(&self.runs)
            + vec_bytes(&self.regions)
            + vec_bytes(&self.palette)
    }
}

const NONE: u32 = u32::MAX;

/// Union-find with path halving; the root of a set is its smallest member, so scanning members in
/// order meets every root before the rest of its set.
struct DisjointSets {
    parent: Vec<u32>,
}

impl DisjointSets {
    fn new(n: usize) -> Self {
        DisjointSets {
            parent: (0..n as u32).collect(),
        }
    }

    #[inline]
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    #[inline]
    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent[hi as usize] = lo;
        }
    }
}

/// Calls `f(i, j)` for every pair of runs of `above` and `below` whose x ranges overlap
/// (indices relative to each slice). Both slices are sorted and disjoint, so this is linear.
#[inline]
fn for_each_overlap<A, B>(
    above: &[A],
    below: &[B],
    span_a: impl Fn(&A) -> (u32, u32),
    span_b: impl Fn(&B) -> (u32, u32),
    mut f: impl FnMut(usize, usize),
) {
    let (mut i, mut j) = (0, 0);
    while i < above.len() && j < below.len() {
        let (a0, a1) = span_a(&above[i]);
        let (b0, b1) = span_b(&below[j]);
        if a0 < b1 && b0 < a1 {
            f(i, j);
        }
        if a1 <= b1 {
            i += 1;
        }
        if b1 <= a1 {
            j += 1;
        }
    }
}

/// Segments the quantized image into regions, merging specks into their neighbours.
pub fn segment(
    ctx: &JobContext,
    image: Quantized,
    width_mm: f64,
) -> Result<Segmentation, StageError> {
    let _input = ctx.charge(image.heap_bytes())?;
    let n = image.runs.len();
    let mut ticker = Ticker::new(ctx, 16 * 1024);
    // The union-find and the labels; held until the stage ends.
    let _sets_charge = ctx.charge((n * 2 * size_of::<u32>()) as u64)?;
    let labels = Labels::new(ctx, &image, &mut ticker)?;

    // Specks: regions under the minimum physical area.
    let mm_per_px = width_mm / f64::from(image.width);
    let min_px = (MIN_REGION_MM2 / (mm_per_px * mm_per_px)).ceil().max(1.0) as u64;
    let regions = &labels.regions;
    let is_speck = |r: u32| regions[r as usize].area_px < min_px;
    let final_of = if regions.iter().any(|r| r.area_px < min_px) {
        merge_specks(ctx, &image, &labels.region_of, regions, min_px, &is_speck)?
    } else {
        (0..regions.len() as u32).collect()
    };
    let dense = DenseRegions::new(regions, &final_of, &mut ticker)?;

    let _out_charge = ctx.charge(vec_bytes(&image.runs) + vec_bytes(&image.row_start))?;
    let final_of_run = |i: usize| {
        let f = final_of[labels.region_of[i] as usize];
        (f != NONE).then(|| dense.id[f as usize])
    };
    let (row_start, runs) = relabel_runs(&image, final_of_run, &mut ticker)?;
    Ok(Segmentation {
        width: image.width,
        height: image.height,
        palette: image.palette,
        regions: dense.regions,
        row_start,
        runs,
    })
}

/// The connected components of same-coloured runs: a region per component, before specks are
/// merged.
struct Labels {
    /// The region of every run.
    region_of: Vec<u32>,
    regions: Vec<Region>,
}

impl Labels {
    /// Joins overlapping same-coloured runs of adjacent rows, then numbers the sets in run order.
    fn new(
        ctx: &JobContext,
        image: &Quantized,
        ticker: &mut Ticker<'_>,
    ) -> Result<Self, StageError> {
        let n = image.runs.len();
        let span = |r: &ColorRun| (r.x0, r.x1);
        let mut sets = DisjointSets::new(n);
        for y in 1..image.height {
            let base_a = image.row_start[y as usize - 1] as usize;
            let base_b = image.row_start[y as usize] as usize;
            let (above, below) = (image.row(y - 1), image.row(y));
            for_each_overlap(above, below, span, span, |i, j| {
                if above[i].color == below[j].color {
                    sets.union((base_a + i) as u32, (base_b + j) as u32);
                }
            });
            ticker.tick((above.len() + below.len()) as u64 + 64)?;
        }
        let mut region_of = vec![NONE; n];
        let mut regions: Vec<Region> = Vec::new();
        for i in 0..n {
            let root = sets.find(i as u32) as usize;
            let run = &image.runs[i];
            if root == i {
                region_of[i] = regions.len() as u32;
                regions.push(Region {
                    color: run.color,
                    area_px: 0,
                });
            } else {
                region_of[i] = region_of[root];
            }
            regions[region_of[i] as usize].area_px += u64::from(run.x1 - run.x0);
            if i % 16384 == 0 {
                ctx.checkpoint()?;
            }
        }
        Ok(Labels { region_of, regions })
    }
}

/// The final regions: dense ids for the sets that survive, each with its set's colour and area.
struct DenseRegions {
    /// The dense id of every set representative (`NONE` for the rest).
    id: Vec<u32>,
    regions: Vec<Region>,
}

impl DenseRegions {
    /// Why dense: dropped specks and merged regions leave gaps the later stages need not carry.
    fn new(
        regions: &[Region],
        final_of: &[u32],
        ticker: &mut Ticker<'_>,
    ) -> Result<Self, StageError> {
        let mut dense = vec![NONE; regions.len()];
        let mut out_regions: Vec<Region> = Vec::new();
        for (r, &f) in final_of.iter().enumerate() {
            ticker.tick(1)?;
            if f == NONE {
                continue;
            }
            if dense[f as usize] == NONE {
                dense[f as usize] = out_regions.len() as u32;
                out_regions.push(Region {
                    color: regions[f as usize].color,
                    area_px: 0,
                });
            }
            out_regions[dense[f as usize] as usize].area_px += regions[r].area_px;
        }
        Ok(DenseRegions {
            id: dense,
            regions: out_regions,
        })
    }
}

/// Relabels the runs with their final region (`region_of_run` of a run's index; `None` drops
/// it), joining touching runs of one region; returns the row starts and the runs.
fn relabel_runs(
    image: &Quantized,
    region_of_run: impl Fn(usize) -> Option<u32>,
    ticker: &mut Ticker<'_>,
) -> Result<(Vec<u32>, Vec<RegionRun>), StageError> {
    let mut runs: Vec<RegionRun> = Vec::with_capacity(image.runs.len());
    let mut row_start: Vec<u32> = Vec::with_capacity(image.height as usize + 1);
    row_start.push(0);
    for y in 0..image.height {
        let row_begin = runs.len();
        let base = image.row_start[y as usize] as usize;
        for (k, run) in image.row(y).iter().enumerate() {
            let Some(region) = region_of_run(base + k) else {
                continue;
            };
            if runs.len() > row_begin
                && let Some(last) = runs.last_mut()
                && last.region == region
                && last.x1 == run.x0
            {
                last.x1 = run.x1;
            } else {
                runs.push(RegionRun {
                    x0: run.x0,
                    x1: run.x1,
                    region,
                });
            }
        }
        row_start.push(runs.len() as u32);
        ticker.tick(image.row(y).len() as u64 + 64)?;
    }
    runs.shrink_to_fit();
    Ok((row_start, runs))
}

/// Returns, for every region, the region whose set it ends in (`NONE` if dropped).
fn merge_specks(
    ctx: &JobContext,
    image: &Quantized,
    region_of: &[u32],
    regions: &[Region],
    min_px: u64,
    is_speck: &impl Fn(u32) -> bool,
) -> Result<Vec<u32>, StageError> {
    let _charge = ctx.charge((regions.len() * 16) as u64)?;
    let mut ticker = Ticker::new(ctx, 16 * 1024);
    let best = largest_neighbours(image, region_of, regions, is_speck, &mut ticker)?;
    let merged = Merged::new(regions, &best, &mut ticker)?;
    merged.final_of(min_px, &mut ticker)
}

/// The largest neighbour of every speck (`NONE` for the rest), from the runs that touch along a
/// row or overlap between rows.
fn largest_neighbours(
    image: &Quantized,
    region_of: &[u32],
    regions: &[Region],
    is_speck: &impl Fn(u32) -> bool,
    ticker: &mut Ticker<'_>,
) -> Result<Vec<u32>, StageError> {
    let mut best = vec![NONE; regions.len()];
    let mut consider = |a: u32, b: u32| {
        if a == b {
            return;
        }
        for (s, other) in [(a, b), (b, a)] {
            if is_speck(s) {
                let cur = best[s as usize];
                if cur == NONE || regions[other as usize].area_px > regions[cur as usize].area_px {
                    best[s as usize] = other;
                }
            }
        }
    };
    let span = |r: &ColorRun| (r.x0, r.x1);
    for y in 0..image.height {
        let base_b = image.row_start[y as usize] as usize;
        let below = image.row(y);
        for k in 1..below.len() {
            if below[k - 1].x1 == below[k].x0 {
                consider(region_of[base_b + k - 1], region_of[base_b + k]);
            }
        }
        if y > 0 {
            let base_a = image.row_start[y as usize - 1] as usize;
            let above = image.row(y - 1);
            for_each_overlap(above, below, span, span, |i, j| {
                consider(region_of[base_a + i], region_of[base_b + j]);
            });
        }
        ticker.tick(below.len() as u64 + 64)?;
    }
    Ok(best)
}

/// The regions after each speck is merged into its best neighbour: sets whose representative is
/// their largest member, with their total area.
struct Merged {
    sets: DisjointSets,
    area: Vec<u64>,
    rep: Vec<u32>,
}

impl Merged {
    /// Merges every speck into its best neighbour's set, keeping the set's largest member.
    fn new(regions: &[Region], best: &[u32], ticker: &mut Ticker<'_>) -> Result<Self, StageError> {
        let r = regions.len();
        let mut sets = DisjointSets::new(r);
        let mut area: Vec<u64> = regions.iter().map(|g| g.area_px).collect();
        let mut rep: Vec<u32> = (0..r as u32).collect();
        for s in 0..r as u32 {
            ticker.tick(4)?;
            let b = best[s as usize];
            if b == NONE {
                continue;
            }
            let (rs, rb) = (sets.find(s), sets.find(b));
            if rs == rb {
                continue;
            }
            let (ra, rr) = (rep[rs as usize], rep[rb as usize]);
            let winner = if regions[ra as usize].area_px >= regions[rr as usize].area_px {
                ra
            } else {
                rr
            };
            let total = area[rs as usize] + area[rb as usize];
            sets.union(rs, rb);
            let root = sets.find(rs) as usize;
            area[root] = total;
            rep[root] = winner;
        }
        Ok(Merged { sets, area, rep })
    }

    /// For every region, its set's representative, or `NONE` if the set is still a speck.
    fn final_of(mut self, min_px: u64, ticker: &mut Ticker<'_>) -> Result<Vec<u32>, StageError> {
        let mut out = vec![NONE; self.area.len()];
        for (g, slot) in out.iter_mut().enumerate() {
            ticker.tick(1)?;
            let root = self.sets.find(g as u32) as usize;
            if self.area[root] >= min_px {
                *slot = self.rep[root];
            }
        }
        Ok(out)
    }
}
