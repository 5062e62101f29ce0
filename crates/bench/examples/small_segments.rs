//! What one search of a small segment costs: an HNSW segment walked with a list of `EF` (100,
//! the default `strata.ef_search`) for its 100 nearest rows (what a scan's first round asks),
//! the same segment scanned exactly (a list covering the graph), and a flat segment. Uniform
//! random rows, L2, 200 queries, microseconds per search and the walk's recall@100 of the exact
//! list; the table tells where a graph walk stops paying for itself.
//!
//! ```text
//! cargo run --release -p strata-bench --example small_segments [ROWS,ROWS,…] [DIMS,DIMS,…]
//! EF=40 …   # another list length
//! ```

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use strata_engine::bitset::RowPredicate;
use strata_engine::cancel::Cancel;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, BuildOptions, IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;

const K: usize = 100;
const QUERIES: usize = 200;

fn list(arg: Option<String>, default: &[usize]) -> Vec<usize> {
    arg.map_or_else(|| default.to_vec(), |a| a.split(',').filter_map(|x| x.parse().ok()).collect())
}

fn segment(kind: IndexKind, rows: usize, dims: usize, data: &[f32]) -> Segment {
    let options = BuildOptions {
        kind,
        metric: Metric::L2,
        element: ElementKind::F32,
        seed: 42,
        threads: 2,
        store_vectors: true,
        cancel: Cancel::default(),
    };
    let built = build_segment(&options, (0..rows as u64).collect(), data.to_vec(), dims).unwrap();
    Segment::from_bytes(&built.to_bytes()).unwrap()
}

/// Microseconds per search (best of three passes over the queries) and the lists found.
fn time(segment: &Segment, queries: &[f32], dims: usize, ef: usize) -> (f64, Vec<Vec<u64>>) {
    let params = SearchParams { ef_search: ef, probes: 0, oversample: 4.0 };
    let mut best = f64::INFINITY;
    let mut found = Vec::new();
    for _ in 0..3 {
        found.clear();
        let started = Instant::now();
        for q in queries.chunks_exact(dims) {
            found.push(segment.search(q, K, &params, RowPredicate::default()).iter().map(|n| n.row).collect());
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e6 / (queries.len() / dims) as f64);
    }
    (best, found)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let sizes = list(args.next(), &[500, 1000, 2000, 4000, 8000]);
    let all_dims = list(args.next(), &[8, 50, 384]);
    let ef: usize = std::env::var("EF").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    println!("rows\tdims\thnsw walk µs\thnsw exact µs\tflat µs\twalk recall@{K}");
    for &dims in &all_dims {
        for &rows in &sizes {
            let data: Vec<f32> = (0..rows * dims).map(|_| rng.gen::<f32>()).collect();
            let queries: Vec<f32> = (0..QUERIES * dims).map(|_| rng.gen::<f32>()).collect();
            let hnsw = segment(IndexKind::Hnsw { m: 16, ef_construction: 64 }, rows, dims, &data);
            let flat = segment(IndexKind::Flat, rows, dims, &data);
            let (walk, walked) = time(&hnsw, &queries, dims, ef);
            let (exact, truth) = time(&hnsw, &queries, dims, rows);
            let (flat_us, _) = time(&flat, &queries, dims, ef);
            let hits: usize = walked.iter().zip(&truth).map(|(w, t)| w.iter().filter(|r| t.contains(r)).count()).sum();
            let recall = hits as f64 / truth.iter().map(Vec::len).sum::<usize>() as f64;
            println!("{rows}\t{dims}\t{walk:.1}\t{exact:.1}\t{flat_us:.1}\t{recall:.4}");
        }
    }
}
