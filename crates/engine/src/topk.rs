//! Top-k selection and merging of nearest-neighbour candidates.
//!
//! Distances are compared with `f32::total_cmp`, so `NaN` (a zero vector under cosine distance)
//! sorts after every number instead of poisoning the order; ties break on the row offset, which
//! makes every result deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A candidate: a row offset (or any id) and its distance to the query. Smaller is nearer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbor {
    /// Row offset inside a segment (or a global id after merging).
    pub row: u64,
    /// Distance to the query under the search's metric.
    pub distance: f32,
}

impl Neighbor {
    /// Creates a neighbour.
    pub fn new(row: u64, distance: f32) -> Self {
        Self { row, distance }
    }

    /// Total order: by distance (`total_cmp`), then by row.
    #[inline]
    pub fn order(&self, other: &Self) -> Ordering {
        self.distance.total_cmp(&other.distance).then(self.row.cmp(&other.row))
    }
}

/// Heap entry ordered so that the *farthest* candidate is on top.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Farthest(Neighbor);

impl Eq for Farthest {}
impl PartialOrd for Farthest {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Farthest {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.order(&other.0)
    }
}

/// Keeps the `k` nearest candidates pushed into it.
#[derive(Debug, Clone)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Farthest>,
}

impl TopK {
    /// An empty collector for the `k` nearest.
    pub fn new(k: usize) -> Self {
        Self { k, heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1 << 16)) }
    }

    /// The number of candidates held (at most `k`).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Whether `k` candidates are held.
    pub fn is_full(&self) -> bool {
        self.heap.len() >= self.k
    }

    /// The distance a new candidate must beat to enter, `+∞` until full.
    #[inline]
    pub fn threshold(&self) -> f32 {
        if self.is_full() {
            self.heap.peek().map_or(f32::INFINITY, |top| top.0.distance)
        } else {
            f32::INFINITY
        }
    }

    /// Offers a candidate; returns whether it was kept.
    #[inline]
    pub fn push(&mut self, candidate: Neighbor) -> bool {
        if self.k == 0 {
            return false;
        }
        if self.heap.len() < self.k {
            self.heap.push(Farthest(candidate));
            return true;
        }
        let top = self.heap.peek().expect("a full heap with k > 0 is non-empty").0;
        if candidate.order(&top).is_lt() {
            self.heap.pop();
            self.heap.push(Farthest(candidate));
            true
        } else {
            false
        }
    }

    /// The held candidates, nearest first.
    pub fn into_sorted(self) -> Vec<Neighbor> {
        let mut out: Vec<Neighbor> = self.heap.into_iter().map(|f| f.0).collect();
        out.sort_by(Neighbor::order);
        out
    }
}

/// Merges lists that are each sorted nearest-first into the `k` nearest overall, nearest first.
pub fn merge_sorted(lists: &[Vec<Neighbor>], k: usize) -> Vec<Neighbor> {
    let mut top = TopK::new(k);
    for list in lists {
        for &candidate in list {
            if !top.push(candidate) && top.is_full() {
                // Later entries of a sorted list are no nearer: skip the rest of it.
                break;
            }
        }
    }
    top.into_sorted()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn oracle(mut all: Vec<Neighbor>, k: usize) -> Vec<Neighbor> {
        all.sort_by(Neighbor::order);
        all.truncate(k);
        all
    }

    proptest! {
        #[test]
        fn topk_equals_sort_and_truncate(distances in prop::collection::vec(-100.0f32..100.0, 0..200), k in 0usize..50) {
            let all: Vec<Neighbor> = distances.iter().enumerate().map(|(i, &d)| Neighbor::new(i as u64, d)).collect();
            let mut top = TopK::new(k);
            for &n in &all {
                top.push(n);
            }
            prop_assert_eq!(top.into_sorted(), oracle(all, k));
        }

        #[test]
        fn merge_equals_global_sort(lists in prop::collection::vec(prop::collection::vec(0.0f32..10.0, 0..40), 0..6), k in 0usize..30) {
            let mut next_row = 0u64;
            let mut sorted_lists = Vec::new();
            let mut all = Vec::new();
            for list in &lists {
                let mut l: Vec<Neighbor> = list.iter().map(|&d| { next_row += 1; Neighbor::new(next_row, d) }).collect();
                l.sort_by(Neighbor::order);
                all.extend(l.iter().copied());
                sorted_lists.push(l);
            }
            prop_assert_eq!(merge_sorted(&sorted_lists, k), oracle(all, k));
        }
    }

    #[test]
    fn nan_sorts_last_and_ties_break_on_row() {
        let mut top = TopK::new(3);
        for n in [Neighbor::new(1, f32::NAN), Neighbor::new(3, 0.5), Neighbor::new(2, 0.5), Neighbor::new(0, 1.0)] {
            top.push(n);
        }
        let rows: Vec<u64> = top.into_sorted().iter().map(|n| n.row).collect();
        assert_eq!(rows, vec![2, 3, 0]);
    }
}
