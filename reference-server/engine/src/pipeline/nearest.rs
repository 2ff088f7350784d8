//! Greedy nearest-neighbour order over a fixed set of points, fast with many points: what
//! `sequence` visits regions and pieces by.

use super::fill::Point;

/// Squared distance (no square root needed to compare).
#[inline]
pub(super) fn dist2(a: Point, b: Point) -> i64 {
    let (dx, dy) = (i64::from(a.x - b.x), i64::from(a.y - b.y));
    dx * dx + dy * dy
}

/// Greedy nearest-neighbour over a fixed set of points, with a uniform grid (about two points per
/// cell) rebuilt as points are taken, so a search looks at a few cells rather than every point.
/// A taken point leaves its cell's live prefix at once (swapped past its end), and each entry
/// carries its point, so a search reads only points still in, one cell's contiguously.
pub(super) struct NearestIndex {
    /// Per point: its cell in the current grid, or [`TAKEN`].
    cell: Vec<u32>,
    /// Per point still in: where it is in the grid's `entries`.
    slot: Vec<u32>,
    remaining: usize,
    grid: Grid,
}

/// [`NearestIndex::cell`] of a point already taken.
const TAKEN: u32 = u32::MAX;

struct Grid {
    x0: i64,
    y0: i64,
    cell: i64,
    cols: i64,
    rows: i64,
    /// Entries of cell `c` are `entries[start[c]..start[c + 1]]`, those still in first: the
    /// first `live[c]` of them.
    start: Vec<u32>,
    live: Vec<u32>,
    entries: Vec<Entry>,
    built_with: usize,
}

/// A point in the grid, with its index.
#[derive(Clone, Copy)]
struct Entry {
    at: Point,
    index: u32,
}

impl NearestIndex {
    pub(super) fn new(points: &[Point]) -> Self {
        let mut cell = vec![0; points.len()];
        let mut slot = vec![0; points.len()];
        let all = points.iter().enumerate().map(|(i, &at)| Entry {
            at,
            index: i as u32,
        });
        let grid = Grid::build(all, points.len(), &mut cell, &mut slot);
        NearestIndex {
            cell,
            slot,
            remaining: points.len(),
            grid,
        }
    }

    /// Removes and returns the point nearest to `from` (the lowest index among equals).
    pub(super) fn take_nearest(&mut self, from: Point) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        let g = &self.grid;
        let cx = ((i64::from(from.x) - g.x0) / g.cell).clamp(0, g.cols - 1);
        let cy = ((i64::from(from.y) - g.y0) / g.cell).clamp(0, g.rows - 1);
        let mut best: Option<(i64, u32)> = None;
        let max_ring = g.cols.max(g.rows);
        for ring in 0..=max_ring {
            let mut visit = |x: i64, y: i64| {
                let c = (y * g.cols + x) as usize;
                let first = g.start[c] as usize;
                for e in &g.entries[first..first + g.live[c] as usize] {
                    let d = dist2(from, e.at);
                    if best.is_none_or(|b| (d, e.index) < b) {
                        best = Some((d, e.index));
                    }
                }
            };
            // The cells at Chebyshev distance `ring`, clipped to the grid.
            let (x0, x1) = ((cx - ring).max(0), (cx + ring).min(g.cols - 1));
            let (y0, y1) = ((cy - ring).max(0), (cy + ring).min(g.rows - 1));
            if cy - ring >= 0 {
                (x0..=x1).for_each(|x| visit(x, cy - ring));
            }
            if ring > 0 && cy + ring < g.rows {
                (x0..=x1).for_each(|x| visit(x, cy + ring));
            }
            let (ys, ye) = ((cy - ring + 1).max(y0), (cy + ring - 1).min(y1));
            if ring > 0 && cx - ring >= 0 {
                (ys..=ye).for_each(|y| visit(cx - ring, y));
            }
            if ring > 0 && cx + ring < g.cols {
                (ys..=ye).for_each(|y| visit(cx + ring, y));
            }
            if let Some((d, _)) = best {
                let reach = ring * g.cell;
                if d <= reach * reach {
                    break;
                }
            }
        }
        let (_, i) = best?;
        self.remove(i as usize);
        Some(i as usize)
    }

    /// Takes point `i` out (if it is still in).
    pub(super) fn remove(&mut self, i: usize) {
        let c = self.cell[i];
        if c == TAKEN {
            return;
        }
        self.cell[i] = TAKEN;
        self.remaining -= 1;
        let g = &mut self.grid;
        g.live[c as usize] -= 1;
        let last = g.start[c as usize] + g.live[c as usize];
        let at = self.slot[i];
        let moved = g.entries[last as usize];
        g.entries.swap(at as usize, last as usize);
        self.slot[moved.index as usize] = at;
        if self.remaining > 64 && self.remaining * 4 < g.built_with {
            self.rebuild();
        }
    }

    /// A grid for the points still in, read straight from the old one's live prefixes.
    fn rebuild(&mut self) {
        let old = &self.grid;
        let live = (0..old.live.len()).flat_map(|c| {
            let first = old.start[c] as usize;
            old.entries[first..first + old.live[c] as usize]
                .iter()
                .copied()
        });
        let grid = Grid::build(live, self.remaining, &mut self.cell, &mut self.slot);
        self.grid = grid;
    }
}

impl Grid {
    /// A grid of `count` entries, noting each one's cell and slot.
    fn build(
        entries: impl Iterator<Item = Entry> + Clone,
        count: usize,
        cell_of_point: &mut [u32],
        slot: &mut [u32],
    ) -> Grid {
        let (mut x0, mut y0, mut x1, mut y1) = (i64::MAX, i64::MAX, i64::MIN, i64::MIN);
        for Entry { at: p, .. } in entries.clone() {
            x0 = x0.min(i64::from(p.x));
            y0 = y0.min(i64::from(p.y));
            x1 = x1.max(i64::from(p.x));
            y1 = y1.max(i64::from(p.y));
        }
        if x0 > x1 {
            (x0, y0, x1, y1) = (0, 0, 0, 0);
        }
        let (w, h) = (x1 - x0 + 1, y1 - y0 + 1);
        let cells_wanted = (count / 2).max(1) as f64;
        let cell = (((w as f64) * (h as f64) / cells_wanted).sqrt().ceil() as i64).max(1);
        let cols = (w + cell - 1) / cell;
        let rows = (h + cell - 1) / cell;
        let mut grid = Grid {
            x0,
            y0,
            cell,
            cols,
            rows,
            start: vec![0; (cols * rows) as usize + 1],
            live: vec![0; (cols * rows) as usize],
            entries: vec![
                Entry {
                    at: Point { x: 0, y: 0 },
                    index: 0
                };
                count
            ],
            built_with: count,
        };
        for e in entries.clone() {
            let c = grid.cell_of(e.at);
            cell_of_point[e.index as usize] = c as u32;
            grid.live[c] += 1;
        }
        for c in 0..grid.live.len() {
            grid.start[c + 1] = grid.start[c] + grid.live[c];
        }
        let mut at = grid.start.clone();
        for e in entries {
            let c = cell_of_point[e.index as usize] as usize;
            grid.entries[at[c] as usize] = e;
            slot[e.index as usize] = at[c];
            at[c] += 1;
        }
        grid
    }

    fn cell_of(&self, p: Point) -> usize {
        let cx = ((i64::from(p.x) - self.x0) / self.cell).clamp(0, self.cols - 1);
        let cy = ((i64::from(p.y) - self.y0) / self.cell).clamp(0, self.rows - 1);
        (cy * self.cols + cx) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_nearest_matches_a_linear_scan() {
        let mut seed = 12345u64;
        let mut rnd = |m: i32| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % m as u64) as i32
        };
        let scattered: Vec<Point> = (0..500)
            .map(|_| Point {
                x: rnd(5000),
                y: rnd(3000),
            })
            .collect();
        // Degenerate: every point on one line, far apart, plus a tight cluster.
        let mut line: Vec<Point> = (0..300)
            .map(|_| Point {
                x: rnd(1_000_000),
                y: 7,
            })
            .collect();
        for _ in 0..100 {
            line.push(Point {
                x: 500 + rnd(3),
                y: 7 + rnd(3),
            });
        }
        for points in [scattered, line] {
            let mut index = NearestIndex::new(&points);
            let mut alive = vec![true; points.len()];
            let mut at = Point { x: -100, y: 7000 };
            while let Some(i) = index.take_nearest(at) {
                let best = (0..points.len())
                    .filter(|&j| alive[j])
                    .map(|j| dist2(at, points[j]))
                    .min()
                    .unwrap();
                assert_eq!(dist2(at, points[i]), best);
                alive[i] = false;
                at = points[i];
            }
            assert!(alive.iter().all(|a| !a));
        }
    }
}
