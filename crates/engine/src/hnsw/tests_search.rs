//! Search contract tests: filters at several selectivities, deletions, result counts.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::tests::{base_store, brute_force, graph, hits, queries};
use super::*;
use crate::bitset::{Bitset, RowPredicate};
use crate::metric::Metric;
use crate::store::{Elements, Query, VectorStore};

fn random_bitset(len: usize, fraction: f64, seed: u64) -> Bitset {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut set = Bitset::new(len);
    for row in 0..len {
        if rng.gen_bool(fraction) {
            set.insert(row);
        }
    }
    set
}

/// Checks the contract for every held-out query and returns the mean recall@k against the
/// filtered exact answer.
fn filtered_recall(predicate: RowPredicate<'_>, k: usize, strategy: FilterStrategy) -> f64 {
    let view = graph(Metric::Cosine).view();
    let store = base_store(Metric::Cosine);
    let accepted = predicate.count_accepted(store.len());
    let params = SearchParams { strategy, ..SearchParams::default() };
    let mut scratch = SearchScratch::new();
    let (mut hit, mut total) = (0, 0);
    for query in &queries(Metric::Cosine) {
        let found = view.search_with(&mut scratch, &store, query, k, &params, predicate);
        assert_eq!(found.len(), k.min(accepted), "exactly min(k, accepted) results");
        assert!(found.iter().all(|n| predicate.accepts(n.row as usize)), "only accepted rows");
        for pair in found.windows(2) {
            assert!(pair[0].order(&pair[1]).is_lt(), "sorted, no duplicates");
        }
        let truth = brute_force(&store, query, k, predicate);
        hit += hits(&found, &truth);
        total += truth.len();
    }
    if total == 0 {
        1.0
    } else {
        hit as f64 / total as f64
    }
}

#[test]
fn filters_at_several_selectivities() {
    let rows = base_store(Metric::Cosine).len();
    for (fraction, min_recall) in [(0.5, 0.9), (0.1, 0.9), (0.01, 1.0), (0.001, 1.0)] {
        let filter = random_bitset(rows, fraction, 11);
        let predicate = RowPredicate { filter: Some(&filter), deleted: None };
        let auto = filtered_recall(predicate, 10, FilterStrategy::Auto);
        let graph_only = filtered_recall(predicate, 10, FilterStrategy::Graph);
        eprintln!(
            "filter {:>5.1} % ({} rows): recall@10 auto {auto:.4}, graph only {graph_only:.4}",
            fraction * 100.0,
            filter.count()
        );
        assert!(auto >= min_recall, "auto recall {auto} at {fraction}");
        if fraction >= 0.1 {
            assert!(graph_only >= 0.9, "graph recall {graph_only} at {fraction}");
        }
        assert!((filtered_recall(predicate, 10, FilterStrategy::Exact) - 1.0).abs() < 1e-12);
    }
}

#[test]
fn deleted_rows_never_come_back() {
    let store = base_store(Metric::Cosine);
    let view = graph(Metric::Cosine).view();
    // Delete the exact top 5 of every query, plus 30 % of all rows at random.
    let mut deleted = random_bitset(store.len(), 0.3, 5);
    for query in &queries(Metric::Cosine) {
        for n in brute_force(&store, query, 5, RowPredicate::default()) {
            deleted.insert(n.row as usize);
        }
    }
    let predicate = RowPredicate { filter: None, deleted: Some(&deleted) };
    let r = filtered_recall(predicate, 10, FilterStrategy::Auto);
    eprintln!("30 % deleted + every query's top 5: recall@10 {r:.4}");
    assert!(r >= 0.9);
    // Deletions combined with a filter.
    let filter = random_bitset(store.len(), 0.2, 6);
    let both = RowPredicate { filter: Some(&filter), deleted: Some(&deleted) };
    assert!(filtered_recall(both, 10, FilterStrategy::Graph) >= 0.9);
    // Everything deleted: nothing comes back.
    let all = Bitset::full(store.len());
    let query = &queries(Metric::Cosine)[0];
    assert!(view.search(&store, query, 10, 40, RowPredicate { filter: None, deleted: Some(&all) }).is_empty());
}

#[test]
fn result_counts_follow_k_and_accepted_rows() {
    let store = base_store(Metric::Cosine);
    let view = graph(Metric::Cosine).view();
    let query = &queries(Metric::Cosine)[3];
    // k above ef_search: still exactly k, and a strict superset-prefix of smaller k.
    let big = view.search(&store, query, 300, 10, RowPredicate::default());
    assert_eq!(big.len(), 300);
    let small = view.search(&store, query, 10, 300, RowPredicate::default());
    assert_eq!(&big[..10], &small[..]);
    // Fewer accepted rows than k: all of them.
    let mut filter = Bitset::new(store.len());
    for row in [3, 500, 1199, 7] {
        filter.insert(row);
    }
    let predicate = RowPredicate { filter: Some(&filter), deleted: None };
    for strategy in [FilterStrategy::Auto, FilterStrategy::Graph, FilterStrategy::Exact] {
        let params = SearchParams { strategy, ..SearchParams::default() };
        let found = view.search_with(&mut SearchScratch::new(), &store, query, 10, &params, predicate);
        let mut rows: Vec<u64> = found.iter().map(|n| n.row).collect();
        rows.sort_unstable();
        assert_eq!(rows, vec![3, 7, 500, 1199], "{strategy:?}");
    }
    // A wrong accepted-count hint changes the strategy, never the contract.
    let params = SearchParams { accepted: Some(store.len()), ..SearchParams::default() };
    assert_eq!(view.search_with(&mut SearchScratch::new(), &store, query, 10, &params, predicate).len(), 4);
    // A zero query under cosine: distances are NaN, k results all the same.
    let zero = Query::new(&vec![0.0; store.dims()], Metric::Cosine);
    let found = view.search(&store, &zero, 5, 20, RowPredicate::default());
    assert_eq!(found.len(), 5);
    assert!(found.iter().all(|n| n.distance.is_nan()));
}

#[test]
fn disconnected_graph_falls_back_to_a_scan() {
    // Two clusters linked only inside themselves: from the entry point the graph reaches 3 rows.
    let raw: Vec<f32> = vec![0.0, 0.0, 0.1, 0.0, 0.0, 0.1, 10.0, 10.0, 10.1, 10.0, 10.0, 10.1];
    let store = VectorStore::new(Elements::F32(&raw), 2, Metric::L2).unwrap();
    let m = 2usize;
    let mut layer0 = vec![NO_NODE; 6 * 2 * m];
    for (row, links) in [(0usize, [1u32, 2]), (1, [0, 2]), (2, [0, 1]), (3, [4, 5]), (4, [3, 5]), (5, [3, 4])] {
        layer0[row * 2 * m..row * 2 * m + 2].copy_from_slice(&links);
    }
    let header = [FORMAT_VERSION, m as u32, 6, 6, 0, 0, 4, 0];
    let words = |w: &[u32]| w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let stored = super::tests_format::Stored::new(vec![
        (TAG_HEADER, words(&header)),
        (TAG_LEVELS, vec![0; 6]),
        (TAG_LAYER0, words(&layer0)),
        (TAG_UPPER_OFFSETS, words(&[0; 7])),
        (TAG_UPPER, Vec::new()),
    ]);
    let view = stored.view(6).unwrap();
    let query = Query::new(&[10.0, 10.0], Metric::L2);
    let params = SearchParams { strategy: FilterStrategy::Graph, ..SearchParams::default() };
    let found = view.search_with(&mut SearchScratch::new(), &store, &query, 4, &params, RowPredicate::default());
    let rows: Vec<u64> = found.iter().map(|n| n.row).collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(&rows[..3], &[3, 4, 5], "the unreachable cluster is found by the scan");
}
