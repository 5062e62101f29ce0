//! Reusable per-thread search state: a generation-stamped visited set and candidate heaps.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A candidate node with its distance stored as a totally ordered integer key (the order of
/// `f32::total_cmp`), so heap comparisons are integer comparisons and `NaN` cannot break them.
/// Ties break on the node id, which keeps every search deterministic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Cand {
    /// [`key`] of the distance.
    pub key: i32,
    /// Node id (row offset).
    pub id: u32,
}

/// Maps a distance to an `i32` whose order is `f32::total_cmp`'s.
#[inline]
pub(crate) fn key(distance: f32) -> i32 {
    let bits = distance.to_bits() as i32;
    bits ^ ((((bits >> 31) as u32) >> 1) as i32)
}

/// Inverse of [`key`].
#[inline]
pub(crate) fn distance_of(key: i32) -> f32 {
    f32::from_bits((key ^ ((((key >> 31) as u32) >> 1) as i32)) as u32)
}

impl Cand {
    #[inline]
    pub fn new(id: u32, distance: f32) -> Self {
        Self { key: key(distance), id }
    }

    #[inline]
    pub fn distance(self) -> f32 {
        distance_of(self.key)
    }
}

/// Scratch memory for searches: reuse one per thread to avoid allocating per query.
///
/// Guarantees: holds no results between calls (every search starts by resetting it), so one
/// scratch may serve any number of graphs of any size, one search at a time. Resetting costs
/// `O(1)` except once every 2³² − 1 searches (and when a larger graph is searched), when the
/// visited stamps are cleared. Memory: 4 bytes per row of the largest graph searched with it,
/// plus `O(ef)` for the candidate lists; it is kept (not shrunk) for reuse.
#[derive(Debug, Default)]
pub struct SearchScratch {
    /// Visited stamps.
    pub(crate) visited: Visited,
    /// Nearest-first candidates still to expand.
    pub(crate) candidates: BinaryHeap<Reverse<Cand>>,
    /// Farthest-first best results found so far.
    pub(crate) top: BinaryHeap<Cand>,
    /// Sorted output buffer.
    pub(crate) sorted: Vec<Cand>,
    /// Neighbours selected by the heuristic (build only).
    pub(crate) selected: Vec<Cand>,
    /// Neighbour-list buffer (build only).
    pub(crate) links: Vec<Cand>,
}

impl SearchScratch {
    /// An empty scratch; it grows on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a new search over `rows` rows: nothing is visited afterwards.
    #[inline]
    pub(crate) fn begin(&mut self, rows: usize) {
        self.visited.begin(rows);
        self.candidates.clear();
        self.top.clear();
    }

    /// Moves the results of the last layer search into `sorted`, nearest first.
    pub(crate) fn drain_sorted(&mut self) {
        self.sorted.clear();
        self.sorted.extend(self.top.drain());
        self.sorted.sort_unstable();
    }
}

/// A set of node ids that is emptied in `O(1)`: a node is visited when its stamp equals the
/// current generation.
#[derive(Debug, Default)]
pub(crate) struct Visited {
    stamps: Vec<u32>,
    generation: u32,
}

impl Visited {
    /// Empties the set and makes room for ids below `rows`.
    #[inline]
    pub fn begin(&mut self, rows: usize) {
        if self.stamps.len() < rows {
            self.stamps.resize(rows, 0);
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamps.fill(0);
            self.generation = 1;
        }
    }

    /// Hints that `id`'s stamp will be read soon.
    #[inline]
    pub fn prefetch(&self, id: u32) {
        super::prefetch::prefetch_row(&self.stamps, id as usize, 1);
    }

    /// Marks `id` visited; returns whether it was not visited before in this search.
    ///
    /// # Panics
    /// When `id` is not below the `rows` passed to [`begin`](Self::begin) (callers only pass
    /// validated node ids).
    #[inline]
    pub fn visit(&mut self, id: u32) -> bool {
        let slot = &mut self.stamps[id as usize];
        if *slot == self.generation {
            false
        } else {
            *slot = self.generation;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_total_cmp_and_invert() {
        let values = [f32::NEG_INFINITY, -2.5, -0.0, 0.0, 1e-30, 0.25, 3.0, f32::INFINITY, f32::NAN];
        for &a in &values {
            assert_eq!(distance_of(key(a)).to_bits(), a.to_bits());
            for &b in &values {
                assert_eq!(key(a).cmp(&key(b)), a.total_cmp(&b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn visited_resets_per_search() {
        let mut visited = Visited::default();
        visited.begin(10);
        assert!(visited.visit(3));
        assert!(!visited.visit(3));
        visited.begin(20);
        assert!(visited.visit(3));
        assert!(visited.visit(19));
        assert!(!visited.visit(19));
        visited.generation = u32::MAX;
        visited.begin(20);
        assert!(visited.visit(3) && visited.visit(19));
    }
}
