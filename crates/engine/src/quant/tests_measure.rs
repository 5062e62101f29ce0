//! Measurements behind the design choices (printed, run with `--release -- --nocapture`):
//! codebook comparison, recall against oversampling, scan throughput. Only the facts the
//! choices rely on are asserted; the numbers are reported in the module docs.

use std::time::Instant;

use super::encode::Scheme;
use super::fastscan::{self, BLOCK};
use super::testdata::{self, brute_force, recall};
use super::*;
use crate::bitset::RowPredicate;
use crate::metric::Metric;
use crate::store::{Query, VectorStore};

/// Mean recall@10 of `flat` over the held-out queries at `oversample`, and mean relative
/// estimation error `|est − exact| / exact-distance spread` over all rows.
fn evaluate(store: &VectorStore<'_>, flat: &QuantizedFlat, oversamples: &[f32]) -> (Vec<f64>, f64) {
    let queries = testdata::queries();
    let mut recalls = vec![0.0; oversamples.len()];
    let mut err = 0.0;
    for q in &queries {
        let query = Query::new(q, store.metric());
        let truth = brute_force(store, &query, 10, RowPredicate::default());
        for (r, &o) in recalls.iter_mut().zip(oversamples) {
            let found = flat.search(store, &query, 10, o, RowPredicate::default()).unwrap();
            *r += recall(&found, &truth);
        }
        let est = flat.view().estimates(&query);
        let exact: Vec<f32> = (0..store.len()).map(|r| store.distance(&query, r)).collect();
        let mean = exact.iter().map(|&e| f64::from(e)).sum::<f64>() / exact.len() as f64;
        let spread = (exact.iter().map(|&e| (f64::from(e) - mean).powi(2)).sum::<f64>() / exact.len() as f64).sqrt();
        err +=
            est.iter().zip(&exact).map(|(&a, &b)| f64::from((a - b).abs())).sum::<f64>() / exact.len() as f64 / spread;
    }
    let n = queries.len() as f64;
    (recalls.iter().map(|r| r / n).collect(), err / n)
}

#[test]
#[cfg_attr(debug_assertions, ignore = "measurement: run with --release")]
fn compare_codebooks_and_oversampling() {
    let oversamples = [1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 20.0, 32.0];
    println!("oversample: {oversamples:?}");
    for metric in [Metric::Cosine, Metric::L2] {
        let store = testdata::base_store(metric);
        for bits in [4u8, 2, 1] {
            for scheme in [Scheme::RaBitQ, Scheme::Lloyd { corrected: true }, Scheme::Lloyd { corrected: false }] {
                let params = QuantizerParams { bits, ..QuantizerParams::default() };
                let start = Instant::now();
                let quantizer = Quantizer::train_with(&store, &params, scheme).unwrap();
                let flat = QuantizedFlat::with_quantizer(&store, quantizer).unwrap();
                let build = start.elapsed();
                let (recalls, err) = evaluate(&store, &flat, &oversamples);
                let recalls: Vec<String> = recalls.iter().map(|r| format!("{r:.3}")).collect();
                println!(
                    "{metric:?} {bits}-bit {scheme:?}: build {build:.2?}, mean |err|/spread {err:.4}, recall@10 {}",
                    recalls.join(" ")
                );
            }
        }
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "measurement: run with --release")]
fn scan_throughput_against_a_streaming_read() {
    // 300,000 synthetic 384-d 4-bit codes (57.6 MB, beyond the caches).
    let (dims, bits, rows) = (384usize, 4u8, 300_000usize);
    let pairs = fastscan::nibbles(dims, bits) / 2;
    let codes: Vec<u8> =
        (0..rows.div_ceil(BLOCK) * pairs * BLOCK).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let factors = vec![0.5f32; 2 * rows];
    let view = CodesView::new(dims, bits, rows, &codes, &factors, None, 0, 0, 0).unwrap();
    let q: Vec<f32> = (0..dims).map(|i| ((i * 37) % 11) as f32 / 11.0 - 0.5).collect();
    let quantizer = Quantizer::from_parts(dims, bits, 1, Metric::L2, Scheme::RaBitQ, vec![0.0; dims]);
    let prepared = quantizer.prepare(&Query::new(&q, Metric::L2));
    let gb = codes.len() as f64 / 1e9;
    let best = |f: &mut dyn FnMut() -> f64| (0..5).map(|_| f()).fold(f64::INFINITY, f64::min);
    // Streaming read: sum every byte of the same buffer as u64 words.
    let words: &[u64] = bytemuck::cast_slice(&codes[..codes.len() / 8 * 8]);
    let mut sink = 0u64;
    let read = best(&mut || {
        let t = Instant::now();
        sink = sink.wrapping_add(words.iter().fold(0u64, |a, &w| a.wrapping_add(w)));
        t.elapsed().as_secs_f64()
    });
    for (name, kernel) in fastscan::supported_kernels() {
        let mut sums = [0u32; BLOCK];
        let kernel_only = best(&mut || {
            let t = Instant::now();
            for block in codes.chunks_exact(pairs * BLOCK) {
                kernel(block, &prepared.lut.bytes, pairs, &mut sums);
                sink = sink.wrapping_add(u64::from(sums[0]));
            }
            t.elapsed().as_secs_f64()
        });
        println!("{name}: block kernel {:.1} GB/s", gb / kernel_only);
    }
    let mut min = f32::INFINITY;
    let scan = best(&mut || {
        let t = Instant::now();
        view.scan(&prepared, 0.0, 0..rows, |_, e| min = min.min(e));
        t.elapsed().as_secs_f64()
    });
    println!(
        "streaming read {:.1} GB/s; full scan with estimates {:.1} GB/s ({:.0} % of the read) ({sink} {min})",
        gb / read,
        gb / scan,
        100.0 * read / scan
    );
}

#[test]
#[cfg_attr(debug_assertions, ignore = "measurement: run with --release")]
fn compare_codebooks_leave_one_out() {
    // 1,000 base rows as queries, each excluded from its own search (deleted bitmap).
    let store = testdata::base_store(Metric::Cosine);
    for (bits, oversamples) in
        [(4u8, [1.0f32, 1.5, 2.0, 3.0, 4.0]), (2, [2.0, 3.0, 4.0, 6.0, 8.0]), (1, [8.0, 10.0, 12.0, 16.0, 20.0])]
    {
        for scheme in [Scheme::RaBitQ, Scheme::Lloyd { corrected: true }] {
            let params = QuantizerParams { bits, ..QuantizerParams::default() };
            let start = Instant::now();
            let flat =
                QuantizedFlat::with_quantizer(&store, Quantizer::train_with(&store, &params, scheme).unwrap()).unwrap();
            let build = start.elapsed();
            let mut recalls = [0.0f64; 5];
            let n = 1000.min(store.len());
            for row in 0..n {
                let mut deleted = crate::bitset::Bitset::new(store.len());
                deleted.insert(row);
                let predicate = RowPredicate { filter: None, deleted: Some(&deleted) };
                let query = Query::new(&store.row_f32(row), Metric::Cosine);
                let truth = brute_force(&store, &query, 10, predicate);
                for (r, &o) in recalls.iter_mut().zip(&oversamples) {
                    *r += recall(&flat.search(&store, &query, 10, o, predicate).unwrap(), &truth) / n as f64;
                }
            }
            println!("{bits}-bit {scheme:?}: build {build:.2?}; recall@10 at {oversamples:?}: {recalls:.4?}");
        }
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "measurement: run with --release")]
fn query_latency_on_demo_data() {
    let store = testdata::base_store(Metric::Cosine);
    let queries: Vec<Query> = testdata::queries().iter().map(|q| Query::new(q, Metric::Cosine)).collect();
    for bits in [4u8, 2, 1] {
        let flat = QuantizedFlat::build(&store, &QuantizerParams { bits, ..QuantizerParams::default() }).unwrap();
        let t = Instant::now();
        for _ in 0..5 {
            for q in &queries {
                std::hint::black_box(
                    flat.search(&store, q, 10, default_oversample(bits), RowPredicate::default()).unwrap(),
                );
            }
        }
        let per = t.elapsed().as_secs_f64() / (5 * queries.len()) as f64;
        println!(
            "quantized flat {bits}-bit over {} rows: {:.0} µs/query; {} bytes/vector",
            store.len(),
            per * 1e6,
            flat.size_bytes() / store.len()
        );
    }
    let t = Instant::now();
    for q in &queries {
        std::hint::black_box(brute_force(&store, q, 10, RowPredicate::default()));
    }
    println!("exact f16 scan: {:.0} µs/query", t.elapsed().as_secs_f64() / queries.len() as f64 * 1e6);
}
