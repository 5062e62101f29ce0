//! Packed sparse rows (`ElementKind::SparseF32`) through flat and HNSW segments: the same
//! neighbours as brute force over the dense vectors the rows stand for.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::metric::Metric;
use crate::sparse_rows::{pack, row_words};

const SPARSE_DIMS: u32 = 30_522;
const CAP: usize = 48;

/// `rows` random sparse vectors of up to 40 non-zero elements over a vocabulary with a popular
/// head (so rows share indices, as SPLADE vectors do), packed.
fn packed_rows(rng: &mut ChaCha8Rng, rows: usize) -> Vec<Vec<f32>> {
    (0..rows)
        .map(|_| {
            let mut pairs = std::collections::BTreeMap::new();
            for _ in 0..rng.gen_range(1..40) {
                let index = if rng.gen_bool(0.7) { rng.gen_range(0..300) } else { rng.gen_range(0..SPARSE_DIMS) };
                pairs.insert(index, rng.gen_range(0.05f32..2.0));
            }
            let (indices, values): (Vec<u32>, Vec<f32>) = pairs.into_iter().unzip();
            pack(&indices, &values, CAP).unwrap()
        })
        .collect()
}

fn dense(row: &[f32]) -> std::collections::HashMap<u32, f32> {
    let (indices, values) = crate::sparse_rows::pairs(row);
    indices.zip(values.iter().copied()).collect()
}

/// Brute force over the dense meaning of the rows (distances from hash maps, not the packed
/// kernel), normalised for cosine.
fn brute_force(rows: &[Vec<f32>], query: &[f32], metric: Metric, k: usize) -> Vec<u64> {
    let norm = |m: &std::collections::HashMap<u32, f32>| m.values().map(|v| v * v).sum::<f32>().sqrt();
    let q = dense(query);
    let mut scored: Vec<(f32, u64)> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let r = dense(row);
            let dot: f32 = q.iter().map(|(k, v)| v * r.get(k).copied().unwrap_or(0.0)).sum();
            let distance = match metric {
                Metric::InnerProduct => -dot,
                Metric::Cosine => 1.0 - dot / (norm(&q) * norm(&r)),
                Metric::L2 => {
                    let keys: std::collections::BTreeSet<&u32> = q.keys().chain(r.keys()).collect();
                    keys.iter()
                        .map(|k| (q.get(k).copied().unwrap_or(0.0) - r.get(k).copied().unwrap_or(0.0)).powi(2))
                        .sum()
                }
                _ => unreachable!(),
            };
            (distance, i as u64 * 3)
        })
        .collect();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, id)| id).collect()
}

fn build(kind: IndexKind, metric: Metric, rows: &[Vec<f32>]) -> Segment {
    let options = BuildOptions {
        kind,
        metric,
        element: ElementKind::SparseF32,
        seed: 3,
        threads: 1,
        store_vectors: true,
        cancel: crate::cancel::Cancel::default(),
    };
    let ids = (0..rows.len() as u64).map(|i| i * 3).collect();
    let built = build_segment(&options, ids, rows.concat(), row_words(CAP)).unwrap();
    Segment::from_bytes(&built.to_bytes()).unwrap()
}

/// Flat segments are exact; HNSW (ef 200) finds at least 90 % of the exact top 10 by inner product
/// and cosine, 75 % by L2; queries are packed at their own capacity.
#[test]
fn packed_sparse_rows_search_like_their_dense_vectors() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let rows = packed_rows(&mut rng, 1500);
    let queries: Vec<Vec<f32>> = packed_rows(&mut rng, 20)
        .into_iter()
        .map(|q| {
            let (indices, values) = crate::sparse_rows::pairs(&q);
            let indices: Vec<u32> = indices.collect();
            pack(&indices, values, indices.len()).unwrap()
        })
        .collect();
    for metric in [Metric::InnerProduct, Metric::Cosine, Metric::L2] {
        let flat = build(IndexKind::Flat, metric, &rows);
        let hnsw = build(IndexKind::Hnsw { m: 16, ef_construction: 64 }, metric, &rows);
        let (mut found, mut wanted) = (0, 0);
        for query in &queries {
            let truth = brute_force(&rows, query, metric, 10);
            let params = SearchParams { ef_search: 200, ..SearchParams::default() };
            let exact: Vec<u64> = flat
                .search(query, 10, &params, RowPredicate::default())
                .iter()
                .map(|n| flat.id(n.row as usize))
                .collect();
            assert_eq!(exact, truth, "{metric:?}: flat is exact");
            let approx = hnsw.search(query, 10, &params, RowPredicate::default());
            found += approx.iter().filter(|n| truth.contains(&hnsw.id(n.row as usize))).count();
            wanted += truth.len();
        }
        let recall = found as f64 / wanted as f64;
        // L2 over sparse rows is dominated by the rows' norms (rows with few, small values are
        // near every query), which leaves the graph's neighbourhoods less telling: 0.84 here.
        let floor = if metric == Metric::L2 { 0.75 } else { 0.9 };
        assert!(recall >= floor, "{metric:?}: HNSW recall@10 {recall} below {floor}");
    }
}

/// META refuses packed rows in kinds that cannot hold them, or of a width no capacity gives.
#[test]
fn packed_rows_only_in_flat_and_hnsw_segments() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let rows = packed_rows(&mut rng, 50);
    let built = build_segment(
        &BuildOptions {
            kind: IndexKind::Flat,
            metric: Metric::InnerProduct,
            element: ElementKind::SparseF32,
            seed: 1,
            threads: 1,
            store_vectors: true,
            cancel: crate::cancel::Cancel::default(),
        },
        (0..50).collect(),
        rows.concat(),
        row_words(CAP),
    )
    .unwrap();
    let mut meta = built.meta();
    meta.kind = IndexKind::Ivf { lists: 2, bits: 4 };
    assert!(SegmentMeta::decode(&meta.encode()).is_err());
    let mut meta = built.meta();
    meta.dims = 10;
    assert!(SegmentMeta::decode(&meta.encode()).is_err(), "an even width is no packed row");
    assert!(SegmentMeta::decode(&built.meta().encode()).is_ok());
}
