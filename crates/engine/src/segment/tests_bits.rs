//! Packed bit rows (`ElementKind::Bits`) through flat and HNSW segments: the neighbours pgvector's
//! `hamming_distance` / `jaccard_distance` give by brute force.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::bit_rows::{pack, row_words};
use crate::bit_value::{hamming_distance, jaccard_distance, Bits};
use crate::metric::Metric;

const BITS: u32 = 300;

fn strings(rng: &mut ChaCha8Rng, rows: usize) -> Vec<Vec<u8>> {
    (0..rows)
        .map(|_| {
            let mut bytes: Vec<u8> = (0..BITS.div_ceil(8)).map(|_| rng.gen::<u8>() & rng.gen::<u8>()).collect();
            *bytes.last_mut().unwrap() &= 0xf0; // padding bits zero, as PostgreSQL keeps them
            bytes
        })
        .collect()
}

fn build(kind: IndexKind, metric: Metric, rows: &[Vec<u8>]) -> Segment {
    let options = BuildOptions {
        kind,
        metric,
        element: ElementKind::Bits,
        seed: 5,
        threads: 1,
        store_vectors: true,
        cancel: crate::cancel::Cancel::default(),
    };
    let packed: Vec<f32> = rows.iter().flat_map(|r| pack(Bits::new(BITS, r).unwrap())).collect();
    let built = build_segment(&options, (0..rows.len() as u64).collect(), packed, row_words(BITS)).unwrap();
    Segment::from_bytes(&built.to_bytes()).unwrap()
}

/// Flat segments return the exact distances' top 10 (compared as distances: bit distances tie
/// often); HNSW at ef 100 finds at least 90 % of it on random strings (a hard case: their
/// distances concentrate).
#[test]
fn packed_bit_rows_search_like_the_bit_functions() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let rows = strings(&mut rng, 1200);
    let queries = strings(&mut rng, 20);
    for metric in [Metric::Hamming, Metric::Jaccard] {
        let distance = |a: &[u8], b: &[u8]| {
            let (a, b) = (Bits::new(BITS, a).unwrap(), Bits::new(BITS, b).unwrap());
            if metric == Metric::Hamming { hamming_distance(a, b) } else { jaccard_distance(a, b) }.unwrap()
        };
        let flat = build(IndexKind::Flat, metric, &rows);
        let hnsw = build(IndexKind::Hnsw { m: 16, ef_construction: 64 }, metric, &rows);
        let mut within = 0;
        for q in &queries {
            let mut truth: Vec<f64> = rows.iter().map(|r| distance(q, r)).collect();
            truth.sort_by(f64::total_cmp);
            truth.truncate(10);
            let query = pack(Bits::new(BITS, q).unwrap());
            let params = SearchParams { ef_search: 100, ..SearchParams::default() };
            let found = |segment: &Segment| -> Vec<f64> {
                segment
                    .search(&query, 10, &params, RowPredicate::default())
                    .iter()
                    .map(|n| distance(q, &rows[n.row as usize]))
                    .collect()
            };
            let close = |a: &[f64]| a.len() == 10 && a.iter().zip(&truth).all(|(x, y)| (x - y).abs() < 1e-6);
            assert!(close(&found(&flat)), "{metric:?}: flat is exact");
            // Rows HNSW returns within the exact 10th distance (ties count as found).
            within += found(&hnsw).iter().filter(|&&d| d <= truth[9] + 1e-9).count();
        }
        let recall = within as f64 / 200.0;
        assert!(recall >= 0.9, "{metric:?}: HNSW recall@10 {recall} (random bit strings, ef 100)");
    }
}
