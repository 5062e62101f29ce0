//! The progressive ranked scan behind an ordered bm25 index scan (`ORDER BY body <@> query`):
//! which rows come out, in which order, and when the scan stops.
//!
//! Each round asks for the `k` best rows of the index ([`crate::search`]); the first round asks
//! for [`FIRST_ROUND`] (the usual `LIMIT 10` takes one round, and Block-Max WAND prunes best
//! when `k` is small), and while the executor keeps asking (a WHERE clause rejecting rows, a
//! larger LIMIT, none) each further round asks for [`GROWTH`] times as many and returns those
//! not returned yet, so the rounds together cost about 4/3 of the last. A scan ends when a round
//! finds fewer rows than it asked for (every matching row was found), or at the row cap
//! (`strata.max_scan_tuples`, as for vector scans): no round asks for more rows than the cap,
//! and no row comes out once the cap was returned.

use std::collections::{HashSet, VecDeque};

/// Rows the first round asks for.
pub const FIRST_ROUND: usize = 10;
/// How much each further round asks for more.
pub const GROWTH: usize = 4;

/// The state of one ranked scan: rows found and not yet returned, rows returned, the next
/// round's size.
///
/// Guarantees, for rounds that return their `k` best rows best first: every row comes out at
/// most once; the rows of one round come out in its order; at most `max_tuples` rows come out
/// (at least 1 is used), and no round asks for more than `max_tuples`; the scan ends after a
/// round that found fewer rows than it asked for.
#[derive(Debug)]
pub struct RankedScan {
    queue: VecDeque<(u64, f64)>,
    returned: HashSet<u64>,
    k: usize,
    exhausted: bool,
}

impl Default for RankedScan {
    fn default() -> Self {
        Self { queue: VecDeque::new(), returned: HashSet::new(), k: FIRST_ROUND, exhausted: false }
    }
}

impl RankedScan {
    /// A scan that has returned nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets everything: the next [`RankedScan::next`] starts over with the first round.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Rows returned since the last reset.
    pub fn returned(&self) -> usize {
        self.returned.len()
    }

    /// The next row and its score, or `None` at the end. `round(k)` runs one round: the `k`
    /// best rows, best first (fewer when fewer match; none when the query has no lexeme).
    pub fn next(&mut self, max_tuples: usize, mut round: impl FnMut(usize) -> Vec<(u64, f64)>) -> Option<(u64, f64)> {
        let cap = max_tuples.max(1);
        loop {
            if self.returned.len() >= cap {
                return None;
            }
            if let Some(next) = self.queue.pop_front() {
                if self.returned.insert(next.0) {
                    return Some(next);
                }
                continue;
            }
            if self.exhausted {
                return None;
            }
            let k = self.k.min(cap);
            let hits = round(k);
            // A round that asked for the cap found every row the scan may still return.
            self.exhausted = hits.len() < k || k >= cap;
            self.k = k.saturating_mul(GROWTH);
            let returned = &self.returned;
            self.queue.extend(hits.into_iter().filter(|(id, _)| !returned.contains(id)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rounds over `rows` matching rows with ids 0.. and scores falling with the id; records the
    /// `k` of each round.
    fn rounds_over(rows: u64, asked: &mut Vec<usize>) -> impl FnMut(usize) -> Vec<(u64, f64)> + '_ {
        move |k| {
            asked.push(k);
            (0..rows).take(k).map(|id| (id, 1.0 / (1.0 + id as f64))).collect()
        }
    }

    fn drain(scan: &mut RankedScan, cap: usize, rows: u64, asked: &mut Vec<usize>) -> Vec<u64> {
        let mut round = rounds_over(rows, asked);
        std::iter::from_fn(|| scan.next(cap, &mut round)).map(|(id, _)| id).collect()
    }

    #[test]
    fn rounds_grow_fourfold_until_a_round_comes_back_short() {
        let (mut scan, mut asked) = (RankedScan::new(), Vec::new());
        let out = drain(&mut scan, usize::MAX, 100, &mut asked);
        assert_eq!(out, (0..100).collect::<Vec<_>>(), "every matching row once, best first");
        assert_eq!(asked, [10, 40, 160]);
    }

    #[test]
    fn the_row_cap_bounds_rows_returned_and_rounds_asked() {
        for cap in [1, 5, 10, 11, 39, 40, 41, 1000] {
            for rows in [0, 3, 10, 40, 500] {
                let (mut scan, mut asked) = (RankedScan::new(), Vec::new());
                let out = drain(&mut scan, cap, rows, &mut asked);
                let expected: Vec<u64> = (0..rows).take(cap).collect();
                assert_eq!(out, expected, "cap {cap}, {rows} rows");
                assert!(asked.iter().all(|&k| k <= cap), "cap {cap}: rounds asked {asked:?}");
                assert!(asked.len() <= 6, "cap {cap}: {} rounds", asked.len());
            }
        }
        let (mut scan, mut asked) = (RankedScan::new(), Vec::new());
        assert_eq!(drain(&mut scan, 0, 5, &mut asked), [0], "a cap of 0 counts as 1");
    }

    #[test]
    fn a_reset_starts_over() {
        let (mut scan, mut asked) = (RankedScan::new(), Vec::new());
        assert_eq!(drain(&mut scan, 3, 20, &mut asked), [0, 1, 2]);
        assert_eq!(scan.returned(), 3);
        scan.reset();
        assert_eq!(scan.returned(), 0);
        asked.clear();
        assert_eq!(drain(&mut scan, 20, 20, &mut asked), (0..20).collect::<Vec<_>>());
        assert_eq!(asked, [10, 20]);
    }
}
