//! Filtered search through `Segment::search_filtered` (exactness of the exact scan, the report)
//! and, `#[ignore]`d, the measurement behind `filter::plan`: recall@10 and time per query of each
//! strategy on the 100k PyPI MiniLM set at 10 %, 1 % and 0.1 % selectivity, uncorrelated and
//! correlated (the allowed rows are the ones nearest to a random pivot row — a topical tenant).

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::bitset::Bitset;
use crate::filter::plan::Strategy;
use crate::filter::{ColumnValues, FilterColumns, Literal, Predicate};
use crate::hnsw::{FilterStrategy, HnswGraph, HnswParams};
use crate::metric::Metric;
use crate::store::{Elements, VectorStore};

fn brute(store: &VectorStore<'_>, query: &Query, k: usize, allowed: &Bitset) -> Vec<Neighbor> {
    let mut top = crate::topk::TopK::new(k);
    for row in allowed.iter() {
        top.push(Neighbor::new(row as u64, store.distance(query, row)));
    }
    top.into_sorted()
}

/// Exact scans through the segment entry point equal brute force over the allowed rows (ties
/// by row), for a predicate over the FILTER section; the report names the strategy and counts.
#[test]
fn exact_scan_equals_brute_force_and_reports() {
    let (base, queries) = crate::testdata::demo_rows(1200, 10);
    let dims = crate::testdata::DEMO_DIMS;
    let rows = 1200;
    let options = BuildOptions {
        kind: IndexKind::Hnsw { m: 16, ef_construction: 64 },
        metric: Metric::Cosine,
        element: crate::store::ElementKind::F32,
        seed: 3,
        threads: 1,
        store_vectors: true,
        cancel: crate::cancel::Cancel::default(),
    };
    let mut built = build_segment(&options, (0..rows as u64).collect(), base, dims).unwrap();
    let tenant: Vec<Option<i64>> = (0..rows).map(|r| if r % 97 == 0 { None } else { Some((r % 50) as i64) }).collect();
    let columns = FilterColumns::build(rows, &[ColumnValues::Int8(tenant.clone())]).unwrap();
    built.set_filter_columns(&columns).unwrap();
    let segment = Segment::from_bytes(&built.to_bytes()).unwrap();
    let store = segment.store().unwrap();
    let mut deleted = Bitset::new(rows);
    deleted.insert(7);
    for (qi, query) in queries.chunks(dims).enumerate() {
        // Tenant 7: 24 rows minus the NULL ones: the plan scans exactly.
        let predicate = Predicate::Eq { column: 0, value: Literal::Int(7) };
        let found = segment
            .search_filtered(query, 10, &SearchParams::default(), AllowSet::Predicate(&predicate), Some(&deleted))
            .unwrap();
        assert_eq!(found.planned, Strategy::ExactScan);
        assert_eq!(found.ran, Strategy::ExactScan);
        let mut allowed = Bitset::new(rows);
        (0..rows).filter(|&r| tenant[r] == Some(7) && r != 7).for_each(|r| allowed.insert(r));
        assert_eq!(found.allowed, allowed.count());
        assert_eq!(found.rows_checked, Some(allowed.count()));
        let q = Query::new(query, Metric::Cosine);
        assert_eq!(found.results, brute(&store, &q, 10, &allowed), "query {}", q_index(qi));
        // A wide filter goes through the graph, still only allowed rows, exactly 10.
        let wide = Predicate::Not(Box::new(predicate.clone()));
        let found =
            segment.search_filtered(query, 10, &SearchParams::default(), AllowSet::Predicate(&wide), None).unwrap();
        assert_eq!(found.planned, Strategy::PostCheck);
        assert_eq!(found.results.len(), 10);
        assert!(found.results.iter().all(|n| tenant[n.row as usize].is_some_and(|t| t != 7)));
    }
    // A segment without a FILTER section refuses predicates, accepts bitsets.
    let plain =
        Segment::from_bytes(&build_segment(&options, vec![1, 2], vec![1.0; 2 * dims], dims).unwrap().to_bytes())
            .unwrap();
    let p = Predicate::Eq { column: 0, value: Literal::Int(1) };
    assert!(plain
        .search_filtered(&queries[..dims], 1, &SearchParams::default(), AllowSet::Predicate(&p), None)
        .is_err());
}

fn q_index(q: usize) -> usize {
    q
}

fn read_fvecs(path: &str, limit: usize) -> (Vec<f32>, usize) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let dims = i32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let stride = 4 + 4 * dims;
    let rows = (bytes.len() / stride).min(limit);
    let mut out = Vec::with_capacity(rows * dims);
    for r in 0..rows {
        let row = &bytes[r * stride + 4..(r + 1) * stride];
        out.extend(row.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())));
    }
    (out, dims)
}

/// The measurement behind `filter::plan` (run in release; about 3 minutes on 2 cores):
/// `cargo test -p strata-engine --release -- --ignored --nocapture filtered_strategies_on_pypi`.
/// Asserts recall@10 ≥ 0.95 for the strategy the plan picks at every point, and prints every
/// strategy's recall and microseconds per query.
#[test]
#[ignore = "needs ../shared/data/pypi-minilm-100k and a release build; ~3 min"]
fn filtered_strategies_on_pypi() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/pypi-minilm-100k");
    let rows: usize = std::env::var("FILTER_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let (raw, dims) = read_fvecs(&format!("{data}/base.fvecs"), rows);
    let (queries, _) = read_fvecs(&format!("{data}/query.fvecs"), 50);
    let (stored, _) = crate::store::prepare_rows(&raw, dims, Metric::Cosine);
    let store = VectorStore::new(Elements::F32(&stored), dims, Metric::Cosine).unwrap();
    let start = Instant::now();
    let graph = HnswGraph::build(&store, None, &HnswParams::default(), 2).unwrap();
    eprintln!("graph over {rows} rows built in {:?}", start.elapsed());
    let view = graph.view();
    let k = 10;
    let ef: usize = std::env::var("FILTER_BENCH_EF").ok().and_then(|v| v.parse().ok()).unwrap_or(128);
    eprintln!("k = {k}, ef = {ef}");
    let mut failures = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut scratch = crate::hnsw::SearchScratch::new();
    eprintln!("| filter | selectivity | plan | exact µs | two-hop µs / recall | graph µs / recall |");
    for fraction in [0.3, 0.1, 0.03, 0.01, 0.003, 0.001] {
        let allowed_rows = ((rows as f64 * fraction) as usize).max(1);
        for correlated in [false, true] {
            let mut times = [0f64; 3];
            let mut hits = [0usize; 3];
            let mut total = 0;
            let mut planned = None;
            for query in queries.chunks(dims) {
                let q = Query::new(query, Metric::Cosine);
                let mut allowed = Bitset::new(rows);
                if correlated {
                    let pivot = rng.gen_range(0..rows);
                    let p = Query::new(&raw[pivot * dims..(pivot + 1) * dims], Metric::Cosine);
                    let near = brute(&store, &p, allowed_rows, &Bitset::full(rows));
                    for n in &near {
                        allowed.insert(n.row as usize);
                    }
                } else {
                    while allowed.count() < allowed_rows {
                        allowed.insert(rng.gen_range(0..rows));
                    }
                }
                let predicate = RowPredicate { filter: Some(&allowed), deleted: None };
                let truth = brute(&store, &q, k, &allowed);
                total += truth.len();
                planned = Some(crate::filter::plan::choose(rows, allowed_rows as f64, k, ef));
                for (i, strategy) in
                    [FilterStrategy::Exact, FilterStrategy::TwoHop, FilterStrategy::Graph].into_iter().enumerate()
                {
                    let params = crate::hnsw::SearchParams { ef_search: ef, strategy, accepted: Some(allowed_rows) };
                    let t = Instant::now();
                    let (found, _) = view.search_reported(&mut scratch, &store, &q, k, &params, predicate);
                    times[i] += t.elapsed().as_secs_f64();
                    let worst = truth.last().map_or(f32::INFINITY, |n| n.distance);
                    hits[i] += found.iter().filter(|n| n.distance <= worst + 1e-6).count();
                }
            }
            let n = (queries.len() / dims) as f64;
            let recall = |i: usize| hits[i] as f64 / total as f64;
            let planned = planned.unwrap();
            eprintln!(
                "| {} | {:.1} % | {} | {:.0} | {:.0} / {:.3} | {:.0} / {:.3} |",
                if correlated { "correlated" } else { "uncorrelated" },
                fraction * 100.0,
                planned.name(),
                times[0] / n * 1e6,
                times[1] / n * 1e6,
                recall(1),
                times[2] / n * 1e6,
                recall(2),
            );
            let chosen = match planned {
                Strategy::ExactScan => 0,
                Strategy::FilteredGraph => 1,
                Strategy::PostCheck => 2,
            };
            assert!((recall(0) - 1.0).abs() < 1e-12, "the exact scan is exact");
            if recall(chosen) < 0.95 {
                failures.push((fraction, correlated, planned, recall(chosen)));
            }
        }
    }
    assert!(failures.is_empty(), "planned strategies under recall 0.95: {failures:?}");
}
