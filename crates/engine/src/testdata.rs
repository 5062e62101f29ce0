//! Real embeddings for tests: the demo sample in `data/demo` (10,000 × 384 MiniLM vectors stored
//! as f16, L2-normalised), widened to f32.

/// Dimensions of the demo embeddings.
pub const DEMO_DIMS: usize = 384;
/// Rows in the demo sample.
pub const DEMO_ROWS: usize = 10_000;

/// All demo rows, row-major f32.
pub fn demo_vectors() -> Vec<f32> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/demo/embeddings.f16");
    let bytes = std::fs::read(path).expect("data/demo/embeddings.f16 is part of the repository");
    bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
}

/// `base` rows from the start of the sample and `queries` held-out rows from its end
/// (never overlapping), row-major f32.
pub fn demo_rows(base: usize, queries: usize) -> (Vec<f32>, Vec<f32>) {
    assert!(base + queries <= DEMO_ROWS, "the demo sample has {DEMO_ROWS} rows");
    let all = demo_vectors();
    let base_rows = all[..base * DEMO_DIMS].to_vec();
    let query_rows = all[(DEMO_ROWS - queries) * DEMO_DIMS..].to_vec();
    (base_rows, query_rows)
}

/// Exact top-`k` among the rows `predicate` accepts, by [`VectorStore::distance`] over every
/// row: the oracle the approximate kinds are tested against.
pub fn brute_force(
    store: &crate::store::VectorStore<'_>,
    query: &crate::store::Query,
    k: usize,
    predicate: crate::bitset::RowPredicate<'_>,
) -> Vec<crate::topk::Neighbor> {
    let mut top = crate::topk::TopK::new(k);
    for row in 0..store.len() {
        if predicate.accepts(row) {
            top.push(crate::topk::Neighbor::new(row as u64, store.distance(query, row)));
        }
    }
    top.into_sorted()
}
