//! Recall@10 of one HNSW segment against `ef_search` as the table grows: the measurement behind
//! `strata_lsm::scan::budget::size_scaled_ef`.
//!
//! ```text
//! cargo run --release -p strata-bench --example ef_growth DATA_DIR [SIZES] [CACHE_DIR] [REPEATS]
//! ```
//!
//! DATA_DIR is a dataset made by `cargo xtask data scale` (`base.fvecs`, `query.fvecs` and one
//! ground truth per size: `gt_{rows}.ivecs`, or `gt.ivecs` for all of its rows). SIZES defaults
//! to `100000,300000,1000000`. For each size it builds one segment (m 16, ef_construction 64,
//! cosine) over the first rows, kept in CACHE_DIR (default `target/ef_growth`) for later runs,
//! and prints recall@10 over the held-out queries and the mean search time on one thread (the
//! best of REPEATS passes, default 1) at
//! several `ef_search` values, and at the size-scaled list a default dial of 100 gets.

use std::path::PathBuf;
use std::time::Instant;

use strata_engine::bitset::RowPredicate;
use strata_engine::cancel::Cancel;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, BuildOptions, IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;
use strata_lsm::scan::budget;

mod texmex;
use texmex::read_vecs;

fn floats(words: Vec<[u8; 4]>) -> Vec<f32> {
    words.into_iter().map(f32::from_le_bytes).collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: ef_growth DATA_DIR [SIZES] [CACHE_DIR] [REPEATS]"));
    let sizes: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "100000,300000,1000000".into())
        .split(',')
        .map(|s| s.parse().expect("SIZES are numbers"))
        .collect();
    let cache = args.next().map_or_else(|| PathBuf::from("target/ef_growth"), PathBuf::from);
    let repeats: usize = args.next().map_or(1, |a| a.parse().expect("REPEATS is a number"));
    std::fs::create_dir_all(&cache).expect("cache directory");
    let largest = *sizes.iter().max().expect("a size");
    let (dims, base) = read_vecs(&dir.join("base.fvecs"), largest);
    let base = floats(base);
    let (_, queries) = read_vecs(&dir.join("query.fvecs"), usize::MAX);
    let queries = floats(queries);
    let options = BuildOptions {
        kind: IndexKind::Hnsw { m: 16, ef_construction: 64 },
        metric: Metric::Cosine,
        element: ElementKind::F32,
        seed: 42,
        threads: 2,
        store_vectors: true,
        cancel: Cancel::default(),
    };
    for rows in sizes {
        let truth_file = dir.join(format!("gt_{rows}.ivecs"));
        let truth_file = if truth_file.exists() { truth_file } else { dir.join("gt.ivecs") };
        let (k_truth, truth) = read_vecs(&truth_file, usize::MAX);
        let truth: Vec<Vec<u64>> = truth
            .chunks_exact(k_truth)
            .map(|row| row[..10].iter().map(|w| u64::from(u32::from_le_bytes(*w))).collect())
            .collect();
        let seg_path = cache.join(format!("{rows}.seg"));
        let segment = if let Ok(bytes) = std::fs::read(&seg_path) {
            Segment::from_bytes(&bytes).expect("a cached segment opens")
        } else {
            let started = Instant::now();
            let ids = (0..rows as u64).collect();
            let built = build_segment(&options, ids, base[..rows * dims].to_vec(), dims).expect("build");
            let bytes = built.to_bytes();
            println!("{rows} rows: built in {:.1} s", started.elapsed().as_secs_f64());
            std::fs::write(&seg_path, &bytes).expect("cache the segment");
            Segment::from_bytes(&bytes).expect("a segment just built opens")
        };
        let run = |ef: usize| {
            let mut best = f64::MAX;
            let mut hits = 0;
            for _ in 0..repeats {
                let started = Instant::now();
                hits = 0usize;
                for (query, truth) in queries.chunks_exact(dims).zip(&truth) {
                    let params = SearchParams { ef_search: ef, ..SearchParams::default() };
                    let found = segment.search(query, 10, &params, RowPredicate::default());
                    hits += found.iter().filter(|n| truth.contains(&segment.id(n.row as usize))).count();
                }
                best = best.min(started.elapsed().as_secs_f64());
            }
            let n = truth.len();
            (hits as f64 / (10 * n) as f64, best * 1e3 / n as f64)
        };
        for ef in [64usize, 100, 125, 150, 175, 200, 250, 300, 400] {
            let (recall, ms) = run(ef);
            println!("{rows:>9} rows  ef {ef:>4}  recall@10 {recall:.4}  mean {ms:.3} ms");
        }
        let scaled = budget::size_scaled_ef(100, rows as u64);
        let (recall, ms) = run(scaled);
        println!("{rows:>9} rows  default dial 100 -> ef {scaled}: recall@10 {recall:.4}  mean {ms:.3} ms");
    }
}
