//! What a memtable's codes save: exact scan of N rows vs 4-bit estimate + rerank of 4·depth.
//! `cargo run --release -p strata-bench --example memtable_codes_cost [ROWS] [DIMS]`

use std::time::Instant;

use strata_engine::metric::Metric;
use strata_engine::quant::{QuantizedFlat, QuantizerParams};
use strata_engine::store::{Elements, Query, VectorStore};
use strata_engine::topk::{Neighbor, TopK};

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (rows, dims) = (args.first().copied().unwrap_or(10_000), args.get(1).copied().unwrap_or(384));
    let mut state = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 2001) as f32 / 1000.0 - 1.0
    };
    let mut vectors: Vec<f32> = (0..rows * dims).map(|_| next()).collect();
    for row in vectors.chunks_exact_mut(dims) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
    let queries: Vec<Vec<f32>> = (0..50).map(|_| (0..dims).map(|_| next()).collect()).collect();
    let store = VectorStore::new(Elements::F32(&vectors), dims, Metric::Cosine).unwrap();
    let started = Instant::now();
    let codes = QuantizedFlat::build(&store, &QuantizerParams::default()).unwrap();
    let encode = started.elapsed().as_secs_f64() * 1e3;
    let (mut exact_ms, mut coded_ms, mut estimate_ms) = (0.0, 0.0, 0.0);
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
        let estimates = codes.estimate_nearest(&query, 400).unwrap();
        estimate_ms += t.elapsed().as_secs_f64() * 1e3;
        let mut top = TopK::new(100);
        for n in &estimates {
            let r = n.row as usize;
            top.push(Neighbor::new(n.row, query.distance_f32(&vectors[r * dims..(r + 1) * dims])));
        }
        let coded = top.into_sorted();
        coded_ms += t.elapsed().as_secs_f64() * 1e3;
        std::hint::black_box((exact, coded));
    }
    let n = queries.len() as f64;
    println!(
        "{rows} rows x {dims}: encode {encode:.1} ms; per query: exact {:.3} ms, codes {:.3} ms (estimates {:.3} ms)",
        exact_ms / n,
        coded_ms / n,
        estimate_ms / n
    );
}
