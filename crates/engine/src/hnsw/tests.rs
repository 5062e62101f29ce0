//! Build and recall tests on real MiniLM embeddings (`data/demo/embeddings.f16`, 10,000 × 384,
//! L2-normalised): rows `0..BASE` are indexed, rows `9900..10000` are held-out queries, and the
//! ground truth is an exact scan with `VectorStore::distance`.
//!
//! Recall@k counts a returned row as a hit when its distance is at most the exact k-th distance
//! plus 1e-6 (ties within 1e-6 are equal), so it is `|returned ∩ exact top-k| / k` up to ties.
//! In debug builds the base shrinks to 1,200 rows to keep the suite fast; the thresholds are the
//! same.

use std::sync::OnceLock;

use half::f16;

use super::*;
use crate::bitset::{Bitset, RowPredicate};
use crate::metric::Metric;
use crate::store::{prepare_rows, Elements, Query, VectorStore};
use crate::topk::Neighbor;

pub(super) const DIMS: usize = 384;
pub(super) const QUERY_START: usize = 9900;
pub(super) const QUERIES: usize = 100;

/// Indexed rows: 9,900 in release builds, 1,200 in debug builds.
pub(super) fn base_rows() -> usize {
    if cfg!(debug_assertions) {
        1200
    } else {
        9900
    }
}

/// The 10,000 demo rows as `f16` and widened to `f32`.
pub(super) fn demo() -> &'static (Vec<f16>, Vec<f32>) {
    static DATA: OnceLock<(Vec<f16>, Vec<f32>)> = OnceLock::new();
    DATA.get_or_init(|| {
        let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/demo/embeddings.f16"))
            .expect("data/demo/embeddings.f16");
        assert_eq!(bytes.len(), 10_000 * DIMS * 2);
        let halves: Vec<f16> = bytes.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])).collect();
        let floats = halves.iter().map(|&h| f16::to_f32(h)).collect();
        (halves, floats)
    })
}

/// Stored rows for `metric` (re-normalised after widening for cosine).
pub(super) fn stored_rows(metric: Metric) -> &'static [f32] {
    static COSINE: OnceLock<Vec<f32>> = OnceLock::new();
    static L2: OnceLock<Vec<f32>> = OnceLock::new();
    let raw = &demo().1;
    match metric {
        Metric::Cosine => COSINE.get_or_init(|| prepare_rows(raw, DIMS, Metric::Cosine).0),
        _ => L2.get_or_init(|| raw.clone()),
    }
}

pub(super) fn base_store(metric: Metric) -> VectorStore<'static> {
    VectorStore::new(Elements::F32(&stored_rows(metric)[..base_rows() * DIMS]), DIMS, metric).unwrap()
}

pub(super) fn queries(metric: Metric) -> Vec<Query> {
    let raw = &demo().1;
    (QUERY_START..QUERY_START + QUERIES).map(|q| Query::new(&raw[q * DIMS..(q + 1) * DIMS], metric)).collect()
}

/// The default-parameter graph over the base for `metric`, built once on 1 thread (the same
/// graph as on any number of threads: `tests_determinism`).
pub(super) fn graph(metric: Metric) -> &'static HnswGraph {
    static COSINE: OnceLock<HnswGraph> = OnceLock::new();
    static L2: OnceLock<HnswGraph> = OnceLock::new();
    let cell = if metric == Metric::Cosine { &COSINE } else { &L2 };
    cell.get_or_init(|| {
        let start = std::time::Instant::now();
        let graph = HnswGraph::build(&base_store(metric), None, &HnswParams::default(), 1).unwrap();
        eprintln!("built {metric:?} graph of {} rows in {:?}", graph.rows(), start.elapsed());
        graph
    })
}

/// Exact top-k among rows the predicate accepts (the oracle).
pub(super) use crate::testdata::brute_force;

/// Hits of `found` against the exact answer `truth` (ties within 1e-6 count).
pub(super) fn hits(found: &[Neighbor], truth: &[Neighbor]) -> usize {
    let Some(kth) = truth.last() else { return 0 };
    found.iter().take(truth.len()).filter(|n| n.distance <= kth.distance + 1e-6).count()
}

/// Mean recall@k of `view` over the held-out queries.
pub(super) fn recall(view: &HnswView<'_>, metric: Metric, k: usize, ef: usize) -> f64 {
    let store = base_store(metric);
    let (mut hit, mut total) = (0, 0);
    for query in &queries(metric) {
        let truth = brute_force(&store, query, k, RowPredicate::default());
        let found = view.search(&store, query, k, ef, RowPredicate::default());
        assert_eq!(found.len(), k);
        for pair in found.windows(2) {
            assert!(pair[0].order(&pair[1]).is_lt(), "results sorted and distinct");
        }
        for n in &found {
            assert_eq!(n.distance.to_bits(), store.distance(query, n.row as usize).to_bits(), "exact distances");
        }
        hit += hits(&found, &truth);
        total += truth.len();
    }
    hit as f64 / total as f64
}

#[test]
fn params_are_validated() {
    assert!(HnswParams::default().validate().is_ok());
    assert_eq!(HnswParams { m: 1, ..HnswParams::default() }.validate(), Err(HnswError::InvalidM(1)));
    assert_eq!(HnswParams { m: 129, ef_construction: 200, seed: 0 }.validate(), Err(HnswError::InvalidM(129)));
    assert!(matches!(
        HnswParams { m: 16, ef_construction: 15, seed: 0 }.validate(),
        Err(HnswError::InvalidEfConstruction { ef_construction: 15, m: 16, .. })
    ));
    assert!(HnswParams { m: 16, ef_construction: 5000, seed: 0 }.validate().is_err());
    let raw = [0.0f32; 8];
    let store = VectorStore::new(Elements::F32(&raw), 2, Metric::L2).unwrap();
    let bad = HnswParams { m: 0, ..HnswParams::default() };
    assert_eq!(HnswGraph::build(&store, None, &bad, 1).unwrap_err(), HnswError::InvalidM(0));
    let params = HnswParams::default();
    assert_eq!(
        HnswGraph::build(&store, Some(&[0, 4]), &params, 1).unwrap_err(),
        HnswError::RowOutOfRange { row: 4, rows: 4 }
    );
    assert_eq!(HnswGraph::build(&store, Some(&[1, 2, 1]), &params, 1).unwrap_err(), HnswError::DuplicateRow(1));
}

#[test]
fn tiny_and_empty_graphs() {
    let raw = [0.0f32, 0.0, 1.0, 0.0, 0.0, 1.0, 5.0, 5.0];
    let store = VectorStore::new(Elements::F32(&raw), 2, Metric::L2).unwrap();
    let query = Query::new(&[0.9, 0.1], Metric::L2);
    let params = HnswParams { m: 2, ef_construction: 2, seed: 7 };
    for rows in [None, Some(&[][..]), Some(&[3][..]), Some(&[2, 1][..])] {
        let graph = HnswGraph::build(&store, rows, &params, 1).unwrap();
        let view = graph.view();
        let expected = match rows {
            None => brute_force(&store, &query, 3, RowPredicate::default()),
            Some(list) => {
                let mut filter = Bitset::new(4);
                for &r in list {
                    filter.insert(r);
                }
                brute_force(&store, &query, 3, RowPredicate { filter: Some(&filter), deleted: None })
            }
        };
        assert_eq!(view.node_count(), rows.map_or(4, <[usize]>::len));
        assert_eq!(view.search(&store, &query, 3, 10, RowPredicate::default()), expected, "rows {rows:?}");
        assert!(view.search(&store, &query, 0, 10, RowPredicate::default()).is_empty());
        let back = tests_format::round_trip(&graph);
        assert_eq!(back, graph);
    }
    let empty = VectorStore::new(Elements::F32(&[]), 2, Metric::L2).unwrap();
    let graph = HnswGraph::build(&empty, None, &params, 2).unwrap();
    assert_eq!(graph.view().entry_point(), None);
    assert!(graph.view().search(&empty, &query, 5, 10, RowPredicate::default()).is_empty());
    assert_eq!(tests_format::round_trip(&graph), graph);
}

#[test]
fn same_seed_is_deterministic() {
    let rows = 1000.min(base_rows());
    let data = &stored_rows(Metric::Cosine)[..rows * DIMS];
    let store = VectorStore::new(Elements::F32(data), DIMS, Metric::Cosine).unwrap();
    let params = HnswParams { m: 8, ef_construction: 32, seed: 42 };
    let a = HnswGraph::build(&store, None, &params, 1).unwrap();
    let b = HnswGraph::build(&store, None, &params, 1).unwrap();
    assert_eq!(a, b);
    let c = HnswGraph::build(&store, None, &HnswParams { seed: 43, ..params }, 1).unwrap();
    assert_ne!(a, c, "another seed draws other levels");
    // Parallel builds make the same graph (more cases in `tests_determinism`).
    assert_eq!(HnswGraph::build(&store, None, &params, 2).unwrap(), a);
}

#[test]
fn graph_shape_is_sound() {
    let graph = graph(Metric::Cosine);
    let view = graph.view();
    let m = view.m();
    let mut reached = vec![false; view.rows()];
    let mut stack = vec![view.entry_point().unwrap()];
    reached[stack[0] as usize] = true;
    let mut degree_sum = 0usize;
    while let Some(node) = stack.pop() {
        for n in view.neighbors(node as usize, 0) {
            degree_sum += 1;
            if !std::mem::replace(&mut reached[n as usize], true) {
                stack.push(n);
            }
        }
    }
    let reached = reached.iter().filter(|&&r| r).count();
    eprintln!(
        "layer 0: {reached} of {} nodes reachable, mean degree {:.1}",
        view.node_count(),
        degree_sum as f64 / reached as f64
    );
    assert!(reached * 100 >= view.node_count() * 99, "layer 0 is (almost) connected");
    for row in 0..view.rows() {
        assert!(view.neighbors(row, 0).count() <= 2 * m);
        let level = usize::from(view.level(row).unwrap());
        for layer in 1..=level {
            assert!(view.neighbors(row, layer).count() <= m);
            assert!(view.neighbors(row, layer).all(|n| usize::from(view.level(n as usize).unwrap()) >= layer));
        }
    }
    let top = usize::from(view.max_level());
    assert!((2..=6).contains(&top), "max level {top} for {} rows at m = 16", view.rows());
}

#[test]
fn recall_cosine() {
    let view = graph(Metric::Cosine).view();
    let mut previous = 0.0;
    for ef in [10, 20, 40, DEFAULT_EF_SEARCH, 100, 200] {
        let r = recall(&view, Metric::Cosine, 10, ef);
        eprintln!("cosine recall@10 at ef {ef}: {r:.4}");
        assert!(r >= previous - 0.01, "recall roughly monotone in ef");
        previous = r;
        if ef == DEFAULT_EF_SEARCH {
            assert!(r >= 0.95, "recall@10 {r} at the default ef_search");
        }
        if ef == 200 {
            assert!(r >= 0.99, "recall@10 {r} at ef 200");
        }
    }
    let r1 = recall(&view, Metric::Cosine, 1, DEFAULT_EF_SEARCH);
    eprintln!("cosine recall@1 at ef {DEFAULT_EF_SEARCH}: {r1:.4}");
    assert!(r1 >= 0.95);
}

#[test]
fn recall_l2() {
    let view = graph(Metric::L2).view();
    let at_default = recall(&view, Metric::L2, 10, DEFAULT_EF_SEARCH);
    let at_200 = recall(&view, Metric::L2, 10, 200);
    eprintln!("L2 recall@10: {at_default:.4} at ef {DEFAULT_EF_SEARCH}, {at_200:.4} at ef 200");
    assert!(at_default >= 0.95);
    assert!(at_200 >= 0.99 && at_200 >= at_default - 0.01);
}

#[test]
fn recall_f16_store_and_row_subset() {
    // An f16 store, indexing every third row only: the others must never come back.
    let rows = base_rows();
    let halves = &demo().0[..rows * DIMS];
    let store = VectorStore::new(Elements::F16(halves), DIMS, Metric::InnerProduct).unwrap();
    let subset: Vec<usize> = (0..rows).filter(|r| r % 3 != 1).collect();
    let graph = HnswGraph::build(&store, Some(&subset), &HnswParams::default(), 2).unwrap();
    let view = graph.view();
    assert_eq!(view.node_count(), subset.len());
    let mut indexed = Bitset::new(rows);
    for &r in &subset {
        indexed.insert(r);
    }
    let (mut hit, mut total) = (0, 0);
    for query in &queries(Metric::InnerProduct) {
        let truth = brute_force(&store, query, 10, RowPredicate { filter: Some(&indexed), deleted: None });
        let found = view.search(&store, query, 10, DEFAULT_EF_SEARCH, RowPredicate::default());
        assert_eq!(found.len(), 10);
        assert!(found.iter().all(|n| n.row % 3 != 1));
        hit += hits(&found, &truth);
        total += truth.len();
    }
    let r = hit as f64 / total as f64;
    eprintln!("f16 inner-product recall@10 over a 2/3 subset: {r:.4}");
    assert!(r >= 0.95);
}

#[test]
fn row_distances_equal_the_store_oracle() {
    let halves = &demo().0[..50 * DIMS];
    for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
        let f32_store = VectorStore::new(Elements::F32(&stored_rows(metric)[..50 * DIMS]), DIMS, metric).unwrap();
        let f16_store = VectorStore::new(Elements::F16(halves), DIMS, metric).unwrap();
        for store in [f32_store, f16_store] {
            let dist = build::RowDistance::new(&store);
            for (a, b) in [(0u32, 1u32), (7, 3), (49, 0), (12, 12)] {
                let want = store.distance_between(a as usize, b as usize);
                assert_eq!(dist.between(a, b).to_bits(), want.to_bits(), "{metric:?} {:?}", store.element_kind());
            }
        }
    }
}

#[test]
fn extending_a_graph_keeps_its_nodes_and_reaches_the_recall_of_a_full_build() {
    let metric = Metric::Cosine;
    let store = base_store(metric);
    let half = base_rows() / 2;
    let first = VectorStore::new(Elements::F32(&stored_rows(metric)[..half * DIMS]), DIMS, metric).unwrap();
    let params = HnswParams::default();
    let base = HnswGraph::build(&first, None, &params, 2).unwrap();
    let extended = HnswGraph::extend(&store, &base.view(), None, &params, 2).unwrap();
    assert_eq!(extended.node_count(), base_rows());
    let view = extended.view();
    for row in 0..half {
        assert_eq!(view.level(row), base.view().level(row), "base levels kept");
    }
    // Round trip through the stored form: every invariant of from_sections holds.
    let sections = extended.sections();
    let reopened =
        HnswView::from_sections(|tag| sections.iter().find(|(t, _)| *t == tag).map(|(_, b)| b.as_slice()), base_rows())
            .unwrap();
    reopened.verify_links().unwrap();
    // Tolerance: the same bar as a full build at the default ef_search (0.95), and within 0.02 of it.
    let (extended_recall, full_recall) = (
        recall(&reopened, metric, 10, DEFAULT_EF_SEARCH),
        recall(&graph(metric).view(), metric, 10, DEFAULT_EF_SEARCH),
    );
    eprintln!("recall@10 extended {extended_recall:.4}, full build {full_recall:.4}");
    assert!(extended_recall >= 0.95 && extended_recall >= full_recall - 0.02, "{extended_recall} vs {full_recall}");

    let other_m = HnswParams { m: params.m + 2, ..params };
    assert!(matches!(HnswGraph::extend(&store, &base.view(), None, &other_m, 1), Err(HnswError::BaseMismatch { .. })));
    assert!(matches!(
        HnswGraph::extend(&first, &extended.view(), None, &params, 1),
        Err(HnswError::BaseMismatch { .. })
    ));
    assert!(
        HnswGraph::extend(&store, &base.view(), Some(&[0]), &params, 1).is_err(),
        "base rows cannot be inserted again"
    );
}
