//! What a memtable's codes save: exact scan of N rows vs a BITS-bit estimate + rerank of
//! OVERSAMPLE · depth (depth 100, the scan's first round at the default `ef_search`), with the
//! coded list's recall of the exact top 10 and top 100.
//! `cargo run --release -p strata-bench --example memtable_codes_cost [ROWS] [DIMS] [BITS] [OVERSAMPLE]`
//! Rows are random unless `VECS` names an `.fvecs` file (its first ROWS rows, the next 50 as
//! queries; DIMS is then the file's).

use std::time::Instant;

use strata_engine::metric::Metric;
use strata_engine::quant::{QuantizedFlat, QuantizerParams};
use strata_engine::store::{Elements, Query, VectorStore};
use strata_engine::topk::{Neighbor, TopK};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (rows, mut dims) = (args.first().copied().unwrap_or(10_000), args.get(1).copied().unwrap_or(384));
    let bits = args.get(2).copied().unwrap_or(4) as u8;
    let oversample = args.get(3).copied().unwrap_or(4);
    let mut state = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 2001) as f32 / 1000.0 - 1.0
    };
    let (vectors, queries): (Vec<f32>, Vec<Vec<f32>>) = if let Ok(path) = std::env::var("VECS") {
        let bytes = std::fs::read(&path).expect("VECS file");
        dims = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        let record = 4 + 4 * dims;
        let row = |i: usize| -> Vec<f32> {
            bytes[i * record + 4..(i + 1) * record]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect()
        };
        ((0..rows).flat_map(row).collect(), (rows..rows + 50).map(row).collect())
    } else {
        let mut vectors: Vec<f32> = (0..rows * dims).map(|_| next()).collect();
        for row in vectors.chunks_exact_mut(dims) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            for x in row.iter_mut() {
                *x /= norm;
            }
        }
        (vectors, (0..50).map(|_| (0..dims).map(|_| next()).collect()).collect())
    };
    let store = VectorStore::new(Elements::F32(&vectors), dims, Metric::Cosine).unwrap();
    let started = Instant::now();
    let codes = QuantizedFlat::build(&store, &QuantizerParams { bits, ..QuantizerParams::default() }).unwrap();
    let encode = started.elapsed().as_secs_f64() * 1e3;
    let (mut exact_ms, mut coded_ms, mut estimate_ms) = (0.0, 0.0, 0.0);
    let (mut found10, mut found100) = (0usize, 0usize);
    for q in &queries {
        let query = Query::new(q, Metric::Cosine);
        let t = Instant::now();
        let mut top = TopK::new(100);
        for (i, row) in vectors.chunks_exact(dims).enumerate() {
            top.push(Neighbor::new(i as u64, query.distance_f32(row)));
        }
        let exact = top.into_sorted();
        exact_ms += t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let estimates = codes.estimate_nearest(&query, 100 * oversample).unwrap();
        estimate_ms += t.elapsed().as_secs_f64() * 1e3;
        let mut top = TopK::new(100);
        for n in &estimates {
            let r = n.row as usize;
            top.push(Neighbor::new(n.row, query.distance_f32(&vectors[r * dims..(r + 1) * dims])));
        }
        let coded = top.into_sorted();
        coded_ms += t.elapsed().as_secs_f64() * 1e3;
        let rows_of = |list: &[Neighbor], k: usize| list.iter().take(k).map(|n| n.row).collect::<Vec<u64>>();
        let (exact10, exact100) = (rows_of(&exact, 10), rows_of(&exact, 100));
        found10 += rows_of(&coded, 10).iter().filter(|r| exact10.contains(r)).count();
        found100 += rows_of(&coded, 100).iter().filter(|r| exact100.contains(r)).count();
    }
    let n = queries.len() as f64;
    println!(
        "{rows} rows x {dims}, {bits}-bit, oversample {oversample}: encode {encode:.1} ms; per query: exact {:.3} ms, \
         codes {:.3} ms (estimates {:.3} ms); recall@10 {:.4}, recall@100 {:.4}",
        exact_ms / n,
        coded_ms / n,
        estimate_ms / n,
        found10 as f64 / (10.0 * n),
        found100 as f64 / (100.0 * n)
    );
}
