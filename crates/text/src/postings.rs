//! The posting-list cursor every source (memtable or segment) offers the query algorithms.
//!
//! Rows are a source's local row numbers `0..rows`, strictly increasing along a list;
//! [`END`] marks an exhausted cursor.

/// The row number of an exhausted cursor (never a real row: sources hold fewer rows).
pub const END: u32 = u32::MAX;

/// Postings per block, in segments and memtables alike.
pub const BLOCK_LEN: usize = 128;

/// Most `(tf, dl)` bound points a block keeps.
pub const BOUND_POINTS: usize = 4;

/// A block's metadata: what block-max pruning bounds a block's scores with.
///
/// Guarantees: every posting `(tf, dl)` of the block is dominated by one of its
/// [`BlockMax::points`] (a point with `tf ≥` and `dl ≤` the posting's). BM25 grows with `tf`
/// and shrinks with `dl` whatever `avgdl`, IDF, `k1` and `b` are, so the largest score of the
/// points bounds every score in the block under any global statistics. The points are the
/// block's Pareto frontier (largest `tf` for each `dl`), capped at [`BOUND_POINTS`] by replacing
/// two neighbours with their corner (their larger `tf`, smaller `dl`); one point is the classic
/// (max `tf`, min `dl`) bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMax {
    /// The block's last row.
    pub last_row: u32,
    points: [(u32, u32); BOUND_POINTS],
    len: u8,
}

impl BlockMax {
    /// The metadata of a block holding one posting.
    pub fn new(row: u32, tf: u32, dl: u32) -> Self {
        let mut points = [(0, 0); BOUND_POINTS];
        points[0] = (tf, dl);
        Self { last_row: row, points, len: 1 }
    }

    /// Metadata read back from stored points (`points` non-empty, at most [`BOUND_POINTS`]).
    pub fn from_points(last_row: u32, stored: &[(u32, u32)]) -> Self {
        let mut points = [(0, 0); BOUND_POINTS];
        points[..stored.len()].copy_from_slice(stored);
        Self { last_row, points, len: stored.len() as u8 }
    }

    /// Adds a posting at `row` (after every posting already in the block).
    pub fn add(&mut self, row: u32, tf: u32, dl: u32) {
        self.last_row = row;
        let mut points: Vec<(u32, u32)> = self.points().to_vec();
        if points.iter().any(|&(t, d)| t >= tf && d <= dl) {
            return;
        }
        points.retain(|&(t, d)| !(tf >= t && dl <= d));
        let at = points.partition_point(|&(t, _)| t < tf);
        points.insert(at, (tf, dl));
        if points.len() > BOUND_POINTS {
            // Sorted by tf and (being a frontier) by dl: merge the closest neighbours.
            let cost = |i: usize| {
                let ((t0, d0), (t1, d1)) = (points[i], points[i + 1]);
                (f64::from(t1) / f64::from(t0.max(1))) * (f64::from(d1) / f64::from(d0.max(1)))
            };
            let i = (0..points.len() - 1).min_by(|&a, &b| cost(a).total_cmp(&cost(b))).expect("two points");
            points[i] = (points[i + 1].0, points[i].1);
            points.remove(i + 1);
        }
        *self = Self::from_points(row, &points);
    }

    /// The bound points, by increasing `tf` (and `dl`).
    pub fn points(&self) -> &[(u32, u32)] {
        &self.points[..self.len as usize]
    }

    /// The largest `tf` in the block.
    pub fn max_tf(&self) -> u32 {
        self.points().iter().map(|p| p.0).max().unwrap_or(0)
    }

    /// The smallest `dl` in the block.
    pub fn min_dl(&self) -> u32 {
        self.points().iter().map(|p| p.1).min().unwrap_or(0)
    }
}

/// A forward-only cursor over one term's postings.
///
/// Contract: [`Postings::row`] starts at the first posting; `next` and `seek` only move forward;
/// once [`END`] is reached the cursor stays there. `block_max(target)` describes the block
/// holding the first posting ≥ `target` without decoding it, and callers pass non-decreasing
/// targets.
pub trait Postings {
    /// The current row, or [`END`].
    fn row(&self) -> u32;
    /// The current posting's term frequency (unspecified at [`END`]).
    fn tf(&self) -> u32;
    /// Moves to the next posting; returns the new row.
    fn next(&mut self) -> u32;
    /// Moves to the first posting ≥ `target` (no move when already there); returns the row.
    fn seek(&mut self, target: u32) -> u32;
    /// The metadata of the block holding the first posting ≥ `target`, `None` past the end.
    fn block_max(&mut self, target: u32) -> Option<BlockMax>;
    /// Calls `f` with every block's metadata, in order.
    fn for_each_block(&self, f: &mut dyn FnMut(BlockMax));
    /// Postings in the list (deleted rows included).
    fn len(&self) -> u32;
    /// Whether the list has no posting (never, for a list a source hands out).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Compressed blocks decoded so far (0 for lists kept uncompressed).
    fn blocks_decoded(&self) -> u32 {
        0
    }
}

/// Appends `value` as a LEB128 variable-length integer.
pub(crate) fn write_vint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a LEB128 integer at `*at`, advancing it; `None` when truncated or over 32 bits.
pub(crate) fn read_vint(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut value: u32 = 0;
    for shift in [0u32, 7, 14, 21, 28] {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if shift == 28 && byte > 0x0F {
            return None;
        }
        value |= u32::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vint_round_trip() {
        let values = [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX - 1, u32::MAX];
        let mut out = Vec::new();
        for &v in &values {
            write_vint(&mut out, v);
        }
        let mut at = 0;
        for &v in &values {
            assert_eq!(read_vint(&out, &mut at), Some(v));
        }
        assert_eq!(read_vint(&out, &mut at), None);
        assert_eq!(read_vint(&[0xFF, 0xFF, 0xFF, 0xFF, 0x7F], &mut 0), None, "over 32 bits");
    }

    #[test]
    fn bound_points_dominate_every_posting() {
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (state >> 33) as u32
        };
        for _ in 0..200 {
            let postings: Vec<(u32, u32)> = (0..128).map(|_| (1 + next() % 20, 1 + next() % 500)).collect();
            let mut block = BlockMax::new(0, postings[0].0, postings[0].1);
            for (row, &(tf, dl)) in postings.iter().enumerate().skip(1) {
                block.add(row as u32, tf, dl);
            }
            assert!(!block.points().is_empty() && block.points().len() <= BOUND_POINTS);
            for &(tf, dl) in &postings {
                assert!(block.points().iter().any(|&(t, d)| t >= tf && d <= dl), "({tf}, {dl}) not covered");
            }
            assert_eq!(block.max_tf(), postings.iter().map(|p| p.0).max().unwrap());
            assert_eq!(block.min_dl(), postings.iter().map(|p| p.1).min().unwrap());
        }
    }
}
