//! Measurements behind the design choices (run with `--release -- --nocapture`; ignored in
//! debug builds): codebook comparison, recall against oversampling, scan throughput, latency.
//! Each test prints its numbers (reported in the module docs) and asserts the facts the choices
//! rely on, with the tolerance stated at each assertion: quality facts within sampling noise,
//! speed facts as ratios measured in the same run, with wide margins for a shared machine.

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
            // Mean |err| / spread of RaBitQ, Lloyd–Max + correction, plain Lloyd–Max.
            let mut errors = Vec::new();
            for scheme in [Scheme::RaBitQ, Scheme::Lloyd { corrected: true }, Scheme::Lloyd { corrected: false }] {
                let params = QuantizerParams { bits, ..QuantizerParams::default() };
                let start = Instant::now();
                let quantizer = Quantizer::train_with(&store, &params, scheme).unwrap();
                let flat = QuantizedFlat::with_quantizer(&store, quantizer).unwrap();
                let build = start.elapsed();
                let (recalls, err) = evaluate(&store, &flat, &oversamples);
                let shown: Vec<String> = recalls.iter().map(|r| format!("{r:.3}")).collect();
                println!(
                    "{metric:?} {bits}-bit {scheme:?}: build {build:.2?}, mean |err|/spread {err:.4}, recall@10 {}",
                    shown.join(" ")
                );
                // More candidates never lose neighbours (0.005: one neighbour in 20 queries' 200).
                for pair in recalls.windows(2) {
                    assert!(pair[1] >= pair[0] - 0.005, "{metric:?} {bits}-bit {scheme:?}: recall fell {recalls:?}");
                }
                if scheme == (Scheme::Lloyd { corrected: true }) {
                    // The chosen codebook at the default oversampling: recall@10 ≥ 0.99 (measured
                    // 1.000, 1.000, 0.999 at 4, 2, 1 bits).
                    let at = oversamples.iter().position(|&o| (o - default_oversample(bits)).abs() < 1e-6).unwrap();
                    assert!(recalls[at] >= 0.99, "{metric:?} {bits}-bit at the default oversampling: {recalls:?}");
                }
                errors.push(err);
            }
            // The chosen codebook estimates at least as well as RaBitQ (measured 7 % better at
            // 4 bits, 0.5 % at 2, equal at 1): within 2 %.
            assert!(
                errors[1] <= errors[0] * 1.02,
                "{metric:?} {bits}-bit: Lloyd–Max {} vs RaBitQ {}",
                errors[1],
                errors[0]
            );
            // The correction matters at 1 and 2 bits (plain measured 6–7 % worse): at least 2 %.
            if bits < 4 {
                assert!(
                    errors[2] >= errors[1] * 1.02,
                    "{metric:?} {bits}-bit: plain {} vs corrected {}",
                    errors[2],
                    errors[1]
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
    let mut kernel_speeds = Vec::new();
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
        kernel_speeds.push(gb / kernel_only);
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
    // A SIMD block kernel, where the CPU has one, beats the scalar reference (measured ~10×):
    // at least 2×.
    if let [scalar, .., best] = kernel_speeds[..] {
        assert!(best >= 2.0 * scalar, "SIMD kernel {best:.1} GB/s vs scalar {scalar:.1} GB/s");
        // The full scan runs near memory speed (measured 62–95 % of a streaming read): at least
        // a quarter of it, a margin for a machine shared with other jobs.
        assert!(read / scan >= 0.25, "full scan at {:.0} % of a streaming read", 100.0 * read / scan);
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "measurement: run with --release")]
fn compare_codebooks_leave_one_out() {
    // 1,000 base rows as queries, each excluded from its own search (deleted bitmap).
    let store = testdata::base_store(Metric::Cosine);
    for (bits, oversamples) in
        [(4u8, [1.0f32, 1.5, 2.0, 3.0, 4.0]), (2, [2.0, 3.0, 4.0, 6.0, 8.0]), (1, [8.0, 10.0, 12.0, 16.0, 20.0])]
    {
        let mut by_scheme = Vec::new();
        for scheme in [Scheme::RaBitQ, Scheme::Lloyd { corrected: true }] {
            let params = QuantizerParams { bits, ..QuantizerParams::default() };
            let start = Instant::now();
            let flat =
                QuantizedFlat::with_quantizer(&store, Quantizer::train_with(&store, &params, scheme).unwrap()).unwrap();
            let build = start.elapsed();
            let mut recalls = [0.0f64; 5];
            let default_at = oversamples.iter().position(|&o| (o - default_oversample(bits)).abs() < 1e-6).unwrap_or(4);
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
            // Leave-one-out recall@10 at the default oversampling (measured 1.0000 at 4, 2 and 1
            // bits with the certified rerank; 1.0000, 0.9998, 0.9988 with a fixed pool): at least 0.995.
            assert!(recalls[default_at] >= 0.995, "{bits}-bit {scheme:?}: {recalls:?}");
            by_scheme.push(recalls);
        }
        // RaBitQ and the chosen codebook recall the same (measured differences ≤ 0.0013, the
        // sampling noise of 10,000 neighbours is ±0.002): within 0.004 at every oversampling.
        for (a, b) in by_scheme[0].iter().zip(&by_scheme[1]) {
            assert!((a - b).abs() <= 0.004, "{bits}-bit: RaBitQ {:?} vs Lloyd–Max {:?}", by_scheme[0], by_scheme[1]);
        }
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "measurement: run with --release")]
fn query_latency_on_demo_data() {
    let store = testdata::base_store(Metric::Cosine);
    let queries: Vec<Query> = testdata::queries().iter().map(|q| Query::new(q, Metric::Cosine)).collect();
    // Best of 5 passes over the queries, per query in seconds.
    let per_query = |search: &dyn Fn(&Query)| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                queries.iter().for_each(search);
                t.elapsed().as_secs_f64() / queries.len() as f64
            })
            .fold(f64::INFINITY, f64::min)
    };
    let exact = per_query(&|q| {
        std::hint::black_box(brute_force(&store, q, 10, RowPredicate::default()));
    });
    println!("exact f16 scan: {:.0} µs/query", exact * 1e6);
    for bits in [4u8, 2, 1] {
        let flat = QuantizedFlat::build(&store, &QuantizerParams { bits, ..QuantizerParams::default() }).unwrap();
        let per = per_query(&|q| {
            std::hint::black_box(
                flat.search(&store, q, 10, default_oversample(bits), RowPredicate::default()).unwrap(),
            );
        });
        let per_vector = flat.size_bytes() as f64 / store.len() as f64;
        println!(
            "quantized flat {bits}-bit over {} rows: {:.0} µs/query; {per_vector:.1} bytes/vector",
            store.len(),
            per * 1e6
        );
        // The module docs' sizes at 384 dimensions: ⌈dims·bits/8⌉ code bytes + 8 bytes of factors
        // + 4 of error factor per vector, plus `64 + 4·dims` bytes per index and the last block's
        // padding (0.6 bytes per vector over these 9,900 rows): within 1 byte.
        let expected = (store.dims() * usize::from(bits)).div_ceil(8) + 12;
        assert!(
            (per_vector - expected as f64).abs() < 1.0,
            "{bits}-bit: {per_vector} bytes/vector, expected {expected}"
        );
        // Quantized search beats the exact scan it replaces at 4 and 2 bits (quiet machine
        // 3.8–4.8×, load average 8 1.4–1.9×): at least 1.2× faster. At 1 bit the 160 scattered
        // exact reranks of the default 16× oversampling cost about an exact scan under load (quiet
        // 3.3× faster, load average 8 1.0–1.1×): no more than 1.5× slower than it.
        if bits > 1 {
            assert!(per * 1.2 <= exact, "{bits}-bit: {:.0} µs/query vs exact {:.0} µs", per * 1e6, exact * 1e6);
        } else {
            assert!(per <= exact * 1.5, "{bits}-bit: {:.0} µs/query vs exact {:.0} µs", per * 1e6, exact * 1e6);
        }
    }
}
