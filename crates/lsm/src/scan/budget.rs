//! How deep a round searches each segment: a candidate budget shared by the segments in
//! proportion to the square root of their share of the index's rows.
//!
//! A round `depth` deep asked every segment for its `depth` nearest rows with an HNSW candidate
//! list of `ef_search`, whatever its size. An index in five segments then paid five searches,
//! and its recall at a given `strata.ef_search` was higher than the same rows' in one segment
//! (0.987 against 0.960 on 100k MiniLM rows at `ef_search = 100`): the dial's meaning depended
//! on what the background merges had done.
//!
//! A segment holding a share `s` of the rows holds about `s · k` of a query's `k` nearest rows,
//! and finding them in a smaller graph takes a shorter candidate list. Measured on 100k × 384
//! MiniLM rows split into 5 and 20 HNSW segments (m 16, ef_construction 64), a list of
//! `ef_search · √s` (at least [`MIN_SOURCE_DEPTH`]) gives the recall@10 of one segment holding
//! every row within 0.008 at `ef_search` 64, 100 and 200, at 0.53× (5 segments) to 0.30×
//! (20 segments) the cost of full-length lists. A linear share (`2 · s`) lost recall on many
//! small segments (0.90 against 0.96 with 20), hence the square root
//! (`cargo run --release -p strata-bench --example segment_split [PARTS]`).
//!
//! Segments asked for fewer rows than the round's depth are *shallow*: the scan only returns
//! rows no farther than the last row of each shallow list that is not exhausted (its
//! frontier), so rows come out in distance order from exact sources whatever the shares.

/// The index size at which `strata.ef_search` is the HNSW candidate list itself; larger indexes
/// get [`size_scaled_ef`].
pub const REFERENCE_ROWS: u64 = 100_000;

/// The exponent of the growth of the candidate list with the index's rows past
/// [`REFERENCE_ROWS`] (see [`size_scaled_ef`]).
///
/// A graph search finds a smaller share of the true neighbours at the same list length as the
/// graph grows. Measured on one HNSW segment (m 16, ef_construction 64) over the first 100k,
/// 300k and 1M rows of the 1M MiniLM dataset (`cargo xtask data scale`), 1,000 held-out queries
/// (`cargo run --release -p strata-bench --example ef_growth DIR`): recall@10 at a list of 100
/// was 0.955, 0.944 and 0.919; the list that keeps 0.955 was about 130 at 300k and 290 at 1M
/// (growth exponents 0.24 and 0.46 from 100k), and the list that keeps ef 64's 0.935 about 87
/// and 170. 0.45 keeps the recall of the dial at 100k up to 1M (0.958 at 300k, list 164; about
/// 0.955 at 1M, list 282), at most 1.2× the cost of the list that just reaches it at 300k.
pub const EF_GROWTH_EXPONENT: f64 = 0.45;

/// The longest list [`size_scaled_ef`] makes of a dial: this many times the dial (reached at
/// about 10M rows).
const MAX_EF_GROWTH: f64 = 8.0;

/// The candidate list a dial of `ef_search` means over an index of `rows` live rows:
/// `ef_search` up to [`REFERENCE_ROWS`], then `⌈ef_search · (rows / REFERENCE_ROWS)^`
/// [`EF_GROWTH_EXPONENT`]`⌉`, at most 8 × `ef_search`, so that a dial keeps about the recall it
/// has at 100k rows as the index grows. Non-decreasing in both arguments and never below
/// `ef_search`.
pub fn size_scaled_ef(ef_search: usize, rows: u64) -> usize {
    if rows <= REFERENCE_ROWS {
        return ef_search;
    }
    let growth = (rows as f64 / REFERENCE_ROWS as f64).powf(EF_GROWTH_EXPONENT).min(MAX_EF_GROWTH);
    ((ef_search as f64 * growth).ceil() as usize).max(ef_search)
}

/// The fewest rows a round asks of a segment (unless the round itself is shallower).
pub const MIN_SOURCE_DEPTH: usize = 10;

/// Whether a round may give segments less than its depth (see the module docs). The scan asks
/// for [`Sharing::Uniform`] in its last possible round (at the tuple cap), which must see every
/// source to its full depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Segments get `√share` of the depth and of the candidate list.
    Proportional,
    /// Every source gets the round's full depth and candidate list.
    Uniform,
}

/// `value · √(rows / total)`, rounded up, at least `floor.min(value)`, at most `value`. With
/// `total` 0 or `rows ≥ total`: `value`.
fn scaled(value: usize, rows: u64, total: u64, floor: usize) -> usize {
    if total == 0 || rows >= total {
        return value;
    }
    let share = (rows as f64 / total as f64).sqrt();
    ((value as f64 * share).ceil() as usize).clamp(floor.min(value), value)
}

/// The rows a round `depth` deep asks of a segment holding `rows` of the index's `total` live
/// rows: between `min(depth, MIN_SOURCE_DEPTH)` and `depth`, non-decreasing in `rows` and in
/// `depth`.
pub fn source_depth(depth: usize, rows: u64, total: u64) -> usize {
    scaled(depth, rows, total, MIN_SOURCE_DEPTH)
}

/// The HNSW candidate list for that segment, given the round's `ef_search` (already at least
/// the round's depth): scaled like [`source_depth`] and never shorter than the segment's depth.
pub fn source_ef(ef_search: usize, depth: usize, rows: u64, total: u64) -> usize {
    scaled(ef_search, rows, total, MIN_SOURCE_DEPTH).max(source_depth(depth, rows, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_holding_everything_gets_the_full_depth() {
        assert_eq!(source_depth(100, 1000, 1000), 100);
        assert_eq!(source_depth(100, 5, 0), 100, "no rows counted: the full depth");
        assert_eq!(source_ef(100, 100, 1000, 1000), 100);
    }

    #[test]
    fn shares_scale_with_the_square_root() {
        // A fifth of the rows: ⌈100 · √0.2⌉ = 45; a twentieth: ⌈100 · √0.05⌉ = 23.
        assert_eq!(source_depth(100, 20_000, 100_000), 45);
        assert_eq!(source_depth(100, 5_000, 100_000), 23);
        assert_eq!(source_ef(200, 100, 20_000, 100_000), 90);
        // Tiny segments keep the floor, shallow rounds are not raised above their depth.
        assert_eq!(source_depth(100, 1, 100_000), MIN_SOURCE_DEPTH);
        assert_eq!(source_depth(4, 1, 100_000), 4);
        assert_eq!(source_ef(100, 400, 1, 100_000), MIN_SOURCE_DEPTH);
        // A later, deeper round: the list is as long as the segment's depth (⌈400 · √0.5⌉ = 283).
        assert_eq!(source_ef(100, 400, 50_000, 100_000), 283);
    }

    #[test]
    fn the_list_grows_with_the_index_past_the_reference_size() {
        assert_eq!(size_scaled_ef(100, 0), 100);
        assert_eq!(size_scaled_ef(100, REFERENCE_ROWS), 100, "the dial is the list at the reference size");
        let at = |rows: u64| (100.0 * (rows as f64 / REFERENCE_ROWS as f64).powf(EF_GROWTH_EXPONENT)).ceil() as usize;
        assert_eq!(size_scaled_ef(100, 300_000), at(300_000));
        assert_eq!(size_scaled_ef(100, 1_000_000), at(1_000_000));
        assert!(size_scaled_ef(100, 300_000) > 100 && size_scaled_ef(100, 1_000_000) > size_scaled_ef(100, 300_000));
        assert_eq!(size_scaled_ef(100, u64::MAX), 800, "at most 8 × the dial");
        let mut previous = 0;
        for rows in [0, 1, 50_000, 100_001, 250_000, 1_000_000, 10_000_000, 1 << 40] {
            let ef = size_scaled_ef(40, rows);
            assert!(ef >= 40 && ef >= previous && size_scaled_ef(41, rows) >= ef, "{rows}: {ef}");
            previous = ef;
        }
    }

    #[test]
    fn depths_are_bounded_and_monotone() {
        for total in [1u64, 7, 1000, 1_000_000] {
            for depth in [1usize, 3, 10, 64, 100, 1000] {
                let mut previous = 0;
                let mut shares = [0, 1, total / 3, total / 2, total];
                shares.sort_unstable();
                for rows in shares {
                    let d = source_depth(depth, rows, total);
                    assert!(d >= depth.min(MIN_SOURCE_DEPTH) && d <= depth, "{depth} {rows}/{total}: {d}");
                    assert!(d >= previous, "non-decreasing in rows");
                    assert!(source_depth(depth * 2, rows, total) >= d, "non-decreasing in depth");
                    assert!(source_ef(depth.max(100), depth, rows, total) >= d, "the list covers the depth");
                    previous = d;
                }
            }
        }
    }
}
