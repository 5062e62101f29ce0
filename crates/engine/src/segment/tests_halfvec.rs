//! `halfvec` rows under cosine: stored as given, so a search that says it is exact returns the
//! exact answer over the `f16` values (a normalised row rounded to `f16` moved distances by more
//! than the top 10's gaps on uniform 16-d rows: every IVF list probed gave recall@10 0.9935).

use half::f16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::metric::Metric;

const DIMS: usize = 16;

/// Uniform rows in `[0, 1)` rounded to `f16`, as a `halfvec` column holds them.
fn halfvec_rows(rows: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..rows * DIMS).map(|_| f16::from_f32(rng.gen::<f32>()).to_f32()).collect()
}

fn build(kind: IndexKind, rows: &[f32]) -> Segment {
    let options = BuildOptions {
        kind,
        metric: Metric::Cosine,
        element: ElementKind::F16,
        seed: 5,
        threads: 1,
        store_vectors: true,
        cancel: crate::cancel::Cancel::default(),
    };
    let built = build_segment(&options, (0..(rows.len() / DIMS) as u64).collect(), rows.to_vec(), DIMS).unwrap();
    Segment::from_bytes(&built.to_bytes()).unwrap()
}

/// Cosine distance in `f64` over the values as given (the oracle).
fn exact(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        dot += f64::from(x) * f64::from(y);
        na += f64::from(x) * f64::from(x);
        nb += f64::from(y) * f64::from(y);
    }
    1.0 - dot / (na * nb).sqrt()
}

/// Recall@10 over 100 `halfvec` queries against the `f64` oracle; a row within `1e-7` of the
/// 10th exact distance (`f32` rounding of the kernels' sums) counts as a hit.
fn recall(segment: &Segment, rows: &[f32], params: &SearchParams) -> f64 {
    let queries = halfvec_rows(100, 77);
    let mut hits = 0;
    for query in queries.chunks_exact(DIMS) {
        let mut all: Vec<f64> = rows.chunks_exact(DIMS).map(|r| exact(query, r)).collect();
        all.sort_by(f64::total_cmp);
        let bound = all[9] + 1e-7;
        let found = segment.search(query, 10, params, RowPredicate::default());
        assert_eq!(found.len(), 10);
        hits += found.iter().filter(|n| exact(query, &rows[n.row as usize * DIMS..][..DIMS]) <= bound).count();
    }
    hits as f64 / 1000.0
}

#[test]
#[allow(clippy::float_cmp)] // exactly every neighbour is the point
fn exact_searches_of_halfvec_rows_under_cosine_are_exact() {
    let rows = halfvec_rows(10_000, 1);
    let lists = 100;
    let ivf = build(IndexKind::Ivf { lists, bits: 4 }, &rows);
    let every_list = SearchParams { probes: lists as usize, ..SearchParams::default() };
    assert!(ivf.search_is_exact(10, &every_list));
    assert_eq!(recall(&ivf, &rows, &every_list), 1.0, "ivf, every list probed");
    let flat = build(IndexKind::Flat, &rows);
    assert_eq!(recall(&flat, &rows, &SearchParams::default()), 1.0, "flat");
}

#[test]
fn halfvec_rows_keep_their_own_values_under_cosine() {
    let rows = halfvec_rows(50, 2);
    let segment = build(IndexKind::Flat, &rows);
    let store = segment.store().unwrap();
    for row in 0..50 {
        let id = segment.id(row) as usize;
        assert_eq!(&*store.stored_row_f32(row), &rows[id * DIMS..(id + 1) * DIMS], "stored as given");
        let unit: f32 = store.row_f32(row).iter().map(|v| v * v).sum();
        assert!((unit - 1.0).abs() < 1e-5, "handed to encoders normalised: {unit}");
    }
}
