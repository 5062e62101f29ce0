//! One HNSW segment against the same rows split into several, the way the scan searches them:
//! every segment with the full `ef_search`, or with the shared candidate budget of
//! `strata_lsm::scan::budget` (each segment's list scaled by the square root of its share).
//!
//! ```text
//! cargo run --release -p strata-bench --example segment_split [PARTS] [DATA_DIR]
//! ```
//!
//! PARTS (default 5) contiguous segments over `DATA_DIR` (default
//! `../shared/data/pypi-minilm-100k`); prints recall@10 over 500 held-out queries and the mean
//! time of one query's searches on one thread, at `ef_search` 64, 100 and 200. The figures in
//! the budget's documentation come from this program.

use std::path::PathBuf;
use std::time::Instant;

use strata_engine::bitset::RowPredicate;
use strata_engine::cancel::Cancel;
use strata_engine::metric::Metric;
use strata_engine::segment::{build_segment, BuildOptions, IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;
use strata_engine::topk::{Neighbor, TopK};
use strata_lsm::scan::budget;

mod texmex;
use texmex::read_vecs;

fn main() {
    let mut args = std::env::args().skip(1);
    let parts: usize = args.next().map_or(5, |a| a.parse().expect("PARTS is a number"));
    let dir = args.next().map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/pypi-minilm-100k"),
        PathBuf::from,
    );
    let (dims, base) = read_vecs(&dir.join("base.fvecs"), usize::MAX);
    let base: Vec<f32> = base.into_iter().map(f32::from_le_bytes).collect();
    let (_, queries) = read_vecs(&dir.join("query.fvecs"), 500);
    let queries: Vec<f32> = queries.into_iter().map(f32::from_le_bytes).collect();
    let (k_truth, truth) = read_vecs(&dir.join("gt.ivecs"), 500);
    let truth: Vec<Vec<u64>> = truth
        .chunks_exact(k_truth)
        .map(|row| row[..10].iter().map(|w| u64::from(u32::from_le_bytes(*w))).collect())
        .collect();
    let rows = base.len() / dims;
    let options = BuildOptions {
        kind: IndexKind::Hnsw { m: 16, ef_construction: 64 },
        metric: Metric::Cosine,
        element: ElementKind::F32,
        seed: 42,
        threads: 2,
        store_vectors: true,
        cancel: Cancel::default(),
    };
    let build = |from: usize, to: usize| {
        let ids = (from as u64..to as u64).collect();
        let built = build_segment(&options, ids, base[from * dims..to * dims].to_vec(), dims).expect("build");
        Segment::from_bytes(&built.to_bytes()).expect("a segment just built opens")
    };
    let whole = vec![build(0, rows)];
    let chunk = rows.div_ceil(parts);
    let split: Vec<Segment> = (0..parts).map(|p| build(p * chunk, ((p + 1) * chunk).min(rows))).collect();
    let run = |segments: &[Segment], ef_of: &dyn Fn(usize) -> usize, label: &str| {
        let (mut hits, started) = (0usize, Instant::now());
        for (query, truth) in queries.chunks_exact(dims).zip(&truth) {
            let mut top = TopK::new(10);
            for segment in segments {
                let ef = ef_of(segment.len());
                let params = SearchParams { ef_search: ef, ..SearchParams::default() };
                for n in segment.search(query, ef, &params, RowPredicate::default()) {
                    top.push(Neighbor::new(segment.id(n.row as usize), n.distance));
                }
            }
            hits += top.into_sorted().iter().filter(|n| truth.contains(&n.row)).count();
        }
        let n = truth.len();
        println!(
            "{label:<34} recall@10 {:.4}  mean {:.3} ms",
            hits as f64 / (10 * n) as f64,
            started.elapsed().as_secs_f64() * 1e3 / n as f64
        );
    };
    for ef in [64usize, 100, 200] {
        run(&whole, &|_| ef, &format!("1 segment, ef {ef}"));
        run(&split, &|_| ef, &format!("{parts} segments, ef {ef} each"));
        let shared = |len: usize| budget::source_ef(ef, ef, len as u64, rows as u64);
        run(&split, &shared, &format!("{parts} segments, ef {ef} shared"));
    }
}
