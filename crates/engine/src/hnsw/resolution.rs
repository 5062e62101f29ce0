//! Whether scalar codes resolve a segment's rows finely enough to walk a graph on.
//!
//! Builds walk on 4-bit codes ([`super::nibble_codes`]) and searches on 8-bit traversal codes
//! ([`super::codes`]): each dimension's range in 15 or 255 steps. On real text embeddings
//! (hundreds of dimensions, neighbours far apart compared with one step) the estimates rank a
//! walk's candidates as the rows would. Where neighbours lie closer together than the codes can
//! tell apart — a few dimensions (3-d rows under cosine: the true top 10 within 3·10⁻⁵ of each
//! other), tight clusters, near-duplicates, norms spread over orders of magnitude under L2 — a
//! walk on estimates stops in the right region but keeps the wrong rows, and the graph a build
//! makes that way is poorer still: recall@10 fell to 0.46–0.87 on such rows where a walk on the
//! rows reached 0.95–1.0 (`cargo run --release -p strata-bench --example shapes`).
//!
//! The test: a sample of rows, each taken as a query, gets its exact 64 nearest rows by brute
//! force ([`NeighbourSample::take`]). For a grid of codes, the estimation error of those 64
//! distances (root mean square) is compared with the spread of the query's own first 10
//! (`d₁₀ − d₁`, the gaps a top-10 answer must tell apart). The codes *resolve* the rows when
//! the median of that ratio over the sample is at most [`RESOLVING_RATIO`]. Measured (10,000
//! rows; ratio medians at 15 steps / 255 steps): MiniLM text embeddings 0.07–0.11 / 0.004,
//! 16-d uniform 0.15–0.55 / 0.01–0.03, 3-d uniform under cosine 85 / 4.8, a 32-d mixture of
//! tight clusters 14–2,260 / 1.3–206, near-duplicates (50 copies at 10⁻⁴) 75 and more.
//! Where the codes do not resolve the rows, the build walks on the rows and the segment
//! keeps no traversal codes: searches then walk on the stored rows (a row of a few dimensions
//! is no larger than its codes would be).

use std::cmp::Ordering;

use rayon::prelude::*;

use super::codes::ScalarGrid;
use crate::metric::Metric;
use crate::store::{ElementKind, Query, VectorStore};

/// Rows sampled as queries.
const SAMPLE_ROWS: usize = 32;
/// Nearest rows whose estimates are checked for each sampled query.
const CHECKED_NEIGHBOURS: usize = 64;
/// The top of the list whose spread the error is compared with.
const RANKED: usize = 10;
/// The largest median ratio of estimation error to the top-10 spread at which codes resolve the
/// rows (see the module docs for the measured ratios it separates).
pub(super) const RESOLVING_RATIO: f64 = 0.5;

/// Which codes resolve a store's rows (see the module docs): what a segment build walks on and
/// whether the segment keeps traversal codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeResolution {
    /// The build may walk on 4-bit walk codes.
    pub walk_codes: bool,
    /// The segment keeps 8-bit traversal codes for its searches to walk on.
    pub traversal_codes: bool,
    /// The rows were sampled (dense `f32` rows under L2, inner product or cosine, more than 10
    /// of them), so `walk_codes` says how tight their neighbourhoods are.
    pub sampled: bool,
}

impl CodeResolution {
    /// Tests `store`'s rows (in stored form, as a segment keeps them) against both grids with one
    /// sample: `SAMPLE_ROWS · rows` exact distances, in parallel on the current rayon pool. Rows
    /// that get no codes (not dense `f32`, another metric than L2, inner product and cosine)
    /// resolve neither.
    pub fn of(store: &VectorStore<'_>) -> Self {
        let none = Self { walk_codes: false, traversal_codes: false, sampled: false };
        if !super::codes::coded_metric(store.metric()) {
            return none;
        }
        let Some(sample) = NeighbourSample::take(store) else {
            // Too few rows to sample: codes cost nothing worth saving there either way.
            return Self {
                walk_codes: false,
                traversal_codes: ScalarGrid::over(store, 255.0).is_some(),
                sampled: false,
            };
        };
        let resolved =
            |levels: f32| ScalarGrid::over(store, levels).is_some_and(|g| sample.resolved_by(&g, store.metric()));
        Self {
            walk_codes: resolved(super::nibble_codes::LEVELS),
            traversal_codes: resolved(super::codes::LEVELS),
            sampled: true,
        }
    }

    /// Whether the sampled rows' nearest neighbours lie closer together than 4-bit codes tell
    /// apart (tight clusters, near-duplicates, a few dimensions): false for rows not sampled.
    pub fn tight_neighbourhoods(&self) -> bool {
        self.sampled && !self.walk_codes
    }
}

/// Sampled rows with their exact nearest rows (see the module docs).
struct NeighbourSample {
    /// Per sampled row: the row, and its nearest other rows with exact distances, nearest first.
    lists: Vec<(usize, Vec<(usize, f32)>)>,
}

impl NeighbourSample {
    /// Samples up to [`SAMPLE_ROWS`] rows of `store`, evenly strided, and finds each one's
    /// [`CHECKED_NEIGHBOURS`] nearest other rows exactly (`SAMPLE_ROWS · rows` distances, in
    /// parallel on the current rayon pool). `None` when the store's rows get no codes (not
    /// dense `f32`) or there are too few rows to tell.
    fn take(store: &VectorStore<'_>) -> Option<Self> {
        let rows = store.len();
        if !matches!(store.elements(), crate::store::Elements::F32(_)) || rows <= RANKED {
            return None;
        }
        let take = rows.min(SAMPLE_ROWS);
        let lists = (0..take)
            .into_par_iter()
            .map(|i| {
                let row = i * rows / take;
                let query = Query::new_for(&store.row_f32(row), store.metric(), ElementKind::F32);
                let mut nearest = crate::topk::TopK::new(CHECKED_NEIGHBOURS.min(rows - 1));
                for other in (0..rows).filter(|&other| other != row) {
                    nearest.push(crate::topk::Neighbor::new(other as u64, store.distance(&query, other)));
                }
                (row, nearest.into_sorted().into_iter().map(|n| (n.row as usize, n.distance)).collect())
            })
            .collect();
        Some(Self { lists })
    }

    /// Whether `grid`'s codes resolve the sampled rows: the median, over sampled rows whose top
    /// 10 is not all one distance, of the estimates' root-mean-square error over their nearest
    /// rows divided by the spread of their top 10, is at most [`RESOLVING_RATIO`]. True when no
    /// sampled row has such a spread (exact duplicates: nothing for codes to misorder).
    fn resolved_by(&self, grid: &ScalarGrid<'_>, metric: Metric) -> bool {
        let mut ratios: Vec<f64> = self
            .lists
            .iter()
            .filter_map(|(row, nearest)| {
                let spread = f64::from(nearest[RANKED.min(nearest.len()) - 1].1 - nearest[0].1);
                if spread <= 0.0 {
                    return None;
                }
                let query = grid.row(*row);
                let squared: f64 = nearest
                    .iter()
                    .map(|&(other, exact)| {
                        let error = estimate(grid, query, other, metric) - f64::from(exact);
                        error * error
                    })
                    .sum();
                Some((squared / nearest.len() as f64).sqrt() / spread)
            })
            .collect();
        if ratios.is_empty() {
            return true;
        }
        ratios.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
        ratios[ratios.len() / 2] <= RESOLVING_RATIO
    }
}

/// The estimate a walk on `grid`'s codes makes of the distance from `query` (a stored row) to
/// row `row`: the formulas of [`super::codes`] on the decoded row `x̂`.
fn estimate(grid: &ScalarGrid<'_>, query: &[f32], row: usize, metric: Metric) -> f64 {
    let values = grid.row(row);
    let (mut dot, mut decoded_norm, mut query_norm) = (0f64, 0f64, 0f64);
    for (j, (&q, &x)) in query.iter().zip(values).enumerate() {
        let decoded = grid.decoded(j, grid.code(j, x));
        dot += f64::from(q) * decoded;
        decoded_norm += decoded * decoded;
        query_norm += f64::from(q) * f64::from(q);
    }
    match metric {
        Metric::L2 => query_norm - 2.0 * dot + decoded_norm,
        Metric::Cosine => 1.0 - dot,
        _ => -dot,
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::store::Elements;
    use crate::testdata::demo_rows;

    fn decide(rows: &[f32], dims: usize, metric: Metric) -> CodeResolution {
        let mut stored = rows.to_vec();
        if metric == Metric::Cosine {
            stored.chunks_exact_mut(dims).for_each(|r| {
                crate::vector_math::normalize_in_place(r);
            });
        }
        CodeResolution::of(&VectorStore::new(Elements::F32(&stored), dims, metric).unwrap())
    }

    fn uniform(rows: usize, dims: usize, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..rows * dims).map(|_| rng.gen::<f32>()).collect()
    }

    #[test]
    fn text_embeddings_keep_both_codes() {
        let (rows, _) = demo_rows(4_000, 0);
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            let decided = decide(&rows, crate::testdata::DEMO_DIMS, metric);
            assert_eq!(
                decided,
                CodeResolution { walk_codes: true, traversal_codes: true, sampled: true },
                "{metric:?}"
            );
            assert!(!decided.tight_neighbourhoods());
        }
    }

    #[test]
    fn three_dimensional_rows_under_cosine_get_no_codes() {
        let rows = uniform(4_000, 3, 1);
        let decided = decide(&rows, 3, Metric::Cosine);
        assert_eq!(decided, CodeResolution { walk_codes: false, traversal_codes: false, sampled: true });
        assert!(decided.tight_neighbourhoods());
    }

    #[test]
    fn tight_clusters_and_near_duplicates_get_no_traversal_codes() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let dims = 32;
        let centres: Vec<f32> = (0..20 * dims).map(|_| rng.gen_range(-10.0..10.0)).collect();
        let clusters: Vec<f32> = (0..4_000)
            .flat_map(|i| {
                let c = (i % 20) * dims;
                centres[c..c + dims].iter().map(|x| x + rng.gen_range(-0.05..0.05)).collect::<Vec<_>>()
            })
            .collect();
        for metric in [Metric::L2, Metric::Cosine] {
            assert!(!decide(&clusters, dims, metric).traversal_codes, "{metric:?}");
        }
        let base = uniform(80, 8, 3);
        let copies: Vec<f32> = (0..4_000)
            .flat_map(|i| base[(i / 50) * 8..(i / 50 + 1) * 8].to_vec())
            .map(|x| x + rng.gen_range(-1e-4..1e-4))
            .collect();
        assert!(!decide(&copies, 8, Metric::L2).walk_codes);
    }

    #[test]
    fn rows_without_codes_resolve_neither() {
        let rows = uniform(100, 4, 4);
        let store = VectorStore::new(Elements::F32(&rows), 4, Metric::L1).unwrap();
        assert_eq!(
            CodeResolution::of(&store),
            CodeResolution { walk_codes: false, traversal_codes: false, sampled: false }
        );
    }
}
