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
/// A taken point leaves its cell's live prefix at once (swapped past its end), so a search reads
/// only points still in.
pub(super) struct NearestIndex<'a> {
    points: &'a [Point],
    alive: Vec<bool>,
    remaining: usize,
    grid: Grid,
}

struct Grid {
    x0: i64,
    y0: i64,
    cell: i64,
    cols: i64,
    rows: i64,
    /// Points of cell `c` are `items[start[c]..start[c + 1]]`, those still in first: the first
    /// `live[c]` of them.
    start: Vec<u32>,
    items: Vec<u32>,
    live: Vec<u32>,
    /// Where each point is in `items` (points not in the grid: unused).
    slot: Vec<u32>,
    built_with: usize,
}

impl<'a> NearestIndex<'a> {
    pub(super) fn new(points: &'a [Point]) -> Self {
        let alive = vec![true; points.len()];
        let grid = Grid::build(points, &alive, points.len());
        NearestIndex {
            points,
            alive,
            remaining: points.len(),
            grid,
        }
    }

    /// Removes and returns the point nearest to `from`.
    pub(super) fn take_nearest(&mut self, from: Point) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        let g = &self.grid;
        let cx = ((i64::from(from.x) - g.x0) / g.cell).clamp(0, g.cols - 1);
        let cy = ((i64::from(from.y) - g.y0) / g.cell).clamp(0, g.rows - 1);
        let mut best: Option<(i64, usize)> = None;
        let max_ring = g.cols.max(g.rows);
        for ring in 0..=max_ring {
            let mut visit = |x: i64, y: i64| {
                let c = (y * g.cols + x) as usize;
                let first = g.start[c] as usize;
                for &i in &g.items[first..first + g.live[c] as usize] {
                    let d = dist2(from, self.points[i as usize]);
                    if best.is_none_or(|(bd, bi)| (d, i as usize) < (bd, bi)) {
                        best = Some((d, i as usize));
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
        self.remove(i);
        Some(i)
    }

    /// Takes point `i` out (if it is still in).
    pub(super) fn remove(&mut self, i: usize) {
        if !self.alive[i] {
            return;
        }
        self.alive[i] = false;
        self.remaining -= 1;
        self.grid.take(i, self.points[i]);
        if self.remaining > 64 && self.remaining * 4 < self.grid.built_with {
            self.grid = Grid::build(self.points, &self.alive, self.remaining);
        }
    }
}

impl Grid {
    fn build(points: &[Point], alive: &[bool], live_count: usize) -> Grid {
        let live = || {
            points
                .iter()
                .zip(alive)
                .filter(|(_, a)| **a)
                .map(|(p, _)| p)
        };
        let (mut x0, mut y0, mut x1, mut y1) = (i64::MAX, i64::MAX, i64::MIN, i64::MIN);
        for p in live() {
            x0 = x0.min(i64::from(p.x));
            y0 = y0.min(i64::from(p.y));
            x1 = x1.max(i64::from(p.x));
            y1 = y1.max(i64::from(p.y));
        }
        if x0 > x1 {
            (x0, y0, x1, y1) = (0, 0, 0, 0);
        }
        let (w, h) = (x1 - x0 + 1, y1 - y0 + 1);
        let cells_wanted = (live_count / 2).max(1) as f64;
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
            items: vec![0; live_count],
            live: vec![0; (cols * rows) as usize],
            slot: vec![0; points.len()],
            built_with: live_count,
        };
        for p in live() {
            let c = grid.cell_of(*p);
            grid.live[c] += 1;
        }
        for c in 0..grid.live.len() {
            grid.start[c + 1] = grid.start[c] + grid.live[c];
        }
        let mut at = grid.start.clone();
        for (i, p) in points.iter().enumerate() {
            if alive[i] {
                let c = grid.cell_of(*p);
                grid.items[at[c] as usize] = i as u32;
                grid.slot[i] = at[c];
                at[c] += 1;
            }
        }
        grid
    }

    /// Moves point `i` (at `p`, in the grid) past the end of its cell's live prefix.
    fn take(&mut self, i: usize, p: Point) {
        let c = self.cell_of(p);
        self.live[c] -= 1;
        let last = (self.start[c] + self.live[c]) as usize;
        let at = self.slot[i] as usize;
        let moved = self.items[last];
        self.items.swap(at, last);
        self.slot[moved as usize] = at as u32;
        self.slot[i] = last as u32;
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
