//! How a build links its nodes and how searches descend the upper layers, chosen from the rows.
//!
//! The defaults (HNSW's heuristic as hnswlib applies it, greedy upper layers) make the best
//! graph for text embeddings: neighbours spread over hundreds of dimensions, norms equal. Two
//! kinds of rows need more, and [`GraphPolicy::for_rows`] recognises both.
//!
//! **Tight neighbourhoods** (the rows' 10 nearest neighbours closer together than 4-bit codes
//! tell apart: tight clusters, near-duplicates, a few dimensions; [`CodeResolution`]). There the
//! heuristic's test — keep a candidate only when it is nearer to the new node than to every
//! neighbour kept — is a coin toss between candidates that all lie at one distance, and it drops
//! the few links that leave a cluster: whole clusters became islands that a search entering
//! elsewhere never reached. The build then relaxes the test by [`TIGHT_RELAX`] (a candidate is
//! passed over only when a kept neighbour is nearer to it by that factor, DiskANN's `α`) and
//! searches the upper layers with a list of [`UPPER_LIST`] instead of greedily, as do the
//! segment's searches (so that the descent enters the right cluster). Measured on the recall
//! matrix's rows (`cargo xtask bench --recall-matrix`, 50,000 rows × 32, written out as fvecs and
//! run through `cargo run --release -p strata-bench --example hnsw_shapes`; m 16,
//! ef_construction 64, ef_search 64, 200 queries): 100 tight Gaussian clusters under cosine
//! 0.9705 → 1.0 and under L2 0.9485 → 1.0; 1,000 rows with 50 copies each at 10⁻⁴ noise under
//! cosine 0.8975 → 0.994 (0.979 with upper lists of 8, 0.988 with 16: the queries left were
//! those whose descent ended in another cluster). On MiniLM text embeddings the relaxation alone
//! lowered recall@10 by 0.004–0.007 (ef_search 64–100) and about doubled the build time, which
//! is why it is kept to such rows.
//!
//! **Inner product over rows of different norms** (maximum inner-product search). Negative
//! inner products are no metric: a row of large norm is "near" every row, the heuristic keeps
//! few links, and lists that lost links are never filled again. The build then keeps lists full
//! as pgvector does (Algorithm 4's `keepPrunedConnections`: a pruned list keeps the candidates
//! the heuristic passed over, nearest first, up to its size) and links every chosen neighbour
//! back with that pruning. Measured on the recall matrix's 50,000 uniform 16-d rows (graph
//! search, ef_search 64, 200 queries): 0.821 → 0.916. The pruning costs build time (100,000
//! uniform 3-d rows: 4 s → 20 s on two threads). Normalised rows (inner product equal to cosine)
//! keep the defaults.

use super::CodeResolution;
use crate::metric::Metric;
use crate::store::VectorStore;

/// The candidate list of an upper-layer search under [`GraphPolicy::upper_list`].
pub const UPPER_LIST: usize = 32;
/// The heuristic's relaxation on rows of tight neighbourhoods (see the module docs).
pub const TIGHT_RELAX: f32 = 1.2;

/// How a graph is built and searched (see the module docs). [`Default`] is the policy every
/// graph had before policies: plain heuristic, lists pruned to what it keeps, greedy upper layers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphPolicy {
    /// The heuristic's relaxation `α ≥ 1`: a candidate `c` is passed over when some kept
    /// neighbour `n` has `α · d(n, c) < d(base, c)` (1 is HNSW's test). Applies to non-negative
    /// distances; negative ones (inner product) take the plain test.
    pub relax: f32,
    /// Lists stay full: pruning keeps the passed-over candidates up to the list's size, and every
    /// neighbour a new node links to links back to it with that pruning.
    pub full_lists: bool,
    /// Inserts and searches descend the upper layers with a list of [`UPPER_LIST`] (stored in the
    /// graph's header, so searches of the segment follow the build).
    pub upper_list: bool,
}

impl Default for GraphPolicy {
    fn default() -> Self {
        Self { relax: 1.0, full_lists: false, upper_list: false }
    }
}

impl GraphPolicy {
    /// The policy for `store`'s rows, given how codes resolve them (see the module docs).
    pub fn for_rows(store: &VectorStore<'_>, resolution: CodeResolution) -> Self {
        let tight = resolution.tight_neighbourhoods();
        Self {
            relax: if tight { TIGHT_RELAX } else { 1.0 },
            full_lists: store.metric() == Metric::InnerProduct && store.norms_differ(),
            upper_list: tight,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Elements;

    #[test]
    fn inner_product_over_rows_of_different_norms_keeps_lists_full() {
        let rows: Vec<f32> = (0..64).flat_map(|i| [1.0 + i as f32, 0.5]).collect();
        let store = VectorStore::new(Elements::F32(&rows), 2, Metric::InnerProduct).unwrap();
        assert!(store.norms_differ());
        assert!(GraphPolicy::for_rows(&store, CodeResolution::of(&store)).full_lists);
        let unit: Vec<f32> = (0..64).flat_map(|i| [(i as f32).cos(), (i as f32).sin()]).collect();
        let store = VectorStore::new(Elements::F32(&unit), 2, Metric::InnerProduct).unwrap();
        assert!(!store.norms_differ());
        assert!(!GraphPolicy::for_rows(&store, CodeResolution::of(&store)).full_lists, "normalised rows");
    }
}
