//! The search strategy of one segment for one filtered query, as a pure function of sizes.
//!
//! Three strategies (issue 16):
//! - [`Strategy::ExactScan`]: compute the distance of every allowed row (exact, `a` distances
//!   for `a` allowed rows, read in row order);
//! - [`Strategy::FilteredGraph`]: the filter-aware two-hop traversal of the HNSW graph, which
//!   computes distances to allowed nodes only;
//! - [`Strategy::PostCheck`]: the ordinary graph search, whose rejected nodes still route and
//!   whose results are checked against the allow-set (about `ef / s` distances at selectivity `s`).
//!
//! The shape of the rule follows qdrant's segment planner (`lib/segment`, Apache-2.0; read, not
//! copied): it estimates a filter's cardinality as `min ≤ expected ≤ max` from its payload
//! index, scans the filtered points when even `max` is below a full-scan threshold, uses the
//! graph when `min` is above it, and enables its ACORN-style traversal only below a maximum
//! selectivity. Here the estimate comes from [`super::Selectivity`] (usually exact), and the
//! thresholds were measured on pg_strata's own segments — see [`EXACT_SCAN_PER_EF_SQRT`] and
//! [`POST_CHECK_MIN_FRACTION`].

/// The strategy chosen for a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Exact distances of every allowed row.
    ExactScan,
    /// Filter-aware (two-hop) graph traversal over allowed nodes.
    FilteredGraph,
    /// Ordinary graph search, results checked against the allow-set.
    PostCheck,
}

impl Strategy {
    /// The name shown by EXPLAIN.
    pub fn name(self) -> &'static str {
        match self {
            Self::ExactScan => "exact scan",
            Self::FilteredGraph => "filtered graph",
            Self::PostCheck => "post-check",
        }
    }
}

/// Scan exactly when `allowed² ≤ EXACT_SCAN_PER_EF_SQRT · ef · rows` — the existing HNSW rule's
/// shape (an exact scan costs `allowed` distances, a graph search roughly `ef · rows / allowed`),
/// with the constant re-measured against the two-hop traversal. See the module docs of
/// [`crate::filter`] and docs/ARCHITECTURE.md for the measurements.
pub const EXACT_SCAN_PER_EF_SQRT: f64 = 8.0;

/// Use the ordinary search with a post-check at or above this fraction of allowed rows.
pub const POST_CHECK_MIN_FRACTION: f64 = 0.3;

/// Chooses the strategy for a segment of `rows` rows (graph nodes) when about `allowed` rows
/// are accepted, for `k` results with candidate list `ef` (raised to `k`).
///
/// Guarantees: a pure function, monotone in `allowed` (exact scan, then filtered graph, then
/// post-check as `allowed` grows, for fixed `rows`, `k`, `ef`); exact scan whenever
/// `allowed ≤ k` or the segment has no more than `k` rows (a graph search could not do better).
pub fn choose(rows: usize, allowed: f64, k: usize, ef: usize) -> Strategy {
    let ef = ef.max(k) as f64;
    let n = rows as f64;
    let allowed = allowed.clamp(0.0, n);
    if allowed <= k as f64 || rows <= k || allowed * allowed <= EXACT_SCAN_PER_EF_SQRT * ef * n {
        Strategy::ExactScan
    } else if allowed < POST_CHECK_MIN_FRACTION * n {
        Strategy::FilteredGraph
    } else {
        Strategy::PostCheck
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::{prop_assert, proptest};

    use super::*;

    #[test]
    fn bands() {
        assert_eq!(choose(100_000, 50.0, 10, 64), Strategy::ExactScan);
        assert_eq!(choose(100_000, 5.0, 10, 64), Strategy::ExactScan);
        assert_eq!(choose(5, 5.0, 10, 64), Strategy::ExactScan);
        assert_eq!(choose(100_000, 50_000.0, 10, 64), Strategy::PostCheck);
        assert_eq!(choose(100_000, 100_000.0, 10, 64), Strategy::PostCheck);
    }

    proptest! {
        #[test]
        fn monotone_in_allowed(rows in 0usize..2_000_000, a in 0.0f64..1.0, b in 0.0f64..1.0, k in 1usize..100, ef in 1usize..400) {
            let rank = |s: Strategy| match s { Strategy::ExactScan => 0, Strategy::FilteredGraph => 1, Strategy::PostCheck => 2 };
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let n = rows as f64;
            prop_assert!(rank(choose(rows, lo * n, k, ef)) <= rank(choose(rows, hi * n, k, ef)));
        }
    }
}
