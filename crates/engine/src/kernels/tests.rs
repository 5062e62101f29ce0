//! Every dispatched kernel against the scalar reference, on random data of lengths 0–4100 (odd
//! lengths included) and on real MiniLM embeddings from `data/demo`.
//!
//! Error bound asserted: `|simd − scalar| ≤ (n/4 + 16) · 2⁻²⁴ · Σ|termᵢ| + 1e-30`. The scalar
//! reference accumulates in `f64`, so this is the SIMD kernels' own `f32` summation error: lanes sum
//! at most `n/4` terms each before a short reduction tree. A wrong or missing element changes the
//! result by about `Σ|termᵢ| / n`, far above the bound for every length tested.

use half::f16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

fn lengths() -> Vec<usize> {
    let mut lengths: Vec<usize> = (0..=70).collect();
    lengths.extend([95, 96, 97, 127, 128, 129, 255, 383, 384, 385, 511, 767, 768, 1023, 1536, 2047]);
    lengths.extend([3071, 4095, 4096, 4097, 4099, 4100]);
    lengths
}

fn bound(n: usize, abs_sum: f64) -> f64 {
    (n as f64 / 4.0 + 16.0) * f64::from(f32::EPSILON) / 2.0 * abs_sum + 1e-30
}

fn assert_close(kernel: &str, level: SimdLevel, n: usize, got: f32, want: f32, abs_sum: f64) {
    let err = (f64::from(got) - f64::from(want)).abs();
    // The scalar reference itself is rounded once to f32: allow one ulp of it on top.
    let allowed = bound(n, abs_sum) + f64::from(want.abs()) * f64::from(f32::EPSILON);
    assert!(
        err <= allowed,
        "{kernel} at {level:?}, n = {n}: got {got}, scalar {want}, |err| {err:e} > bound {allowed:e}"
    );
}

fn check_f32_pair(table: &KernelTable, a: &[f32], b: &[f32]) {
    let n = a.len();
    let level = table.level;
    let pairs = || a.iter().zip(b).map(|(&x, &y)| (f64::from(x), f64::from(y)));
    let l2_terms: f64 = pairs().map(|(x, y)| (x - y) * (x - y)).sum();
    let dot_terms: f64 = pairs().map(|(x, y)| (x * y).abs()).sum();
    let l1_terms: f64 = pairs().map(|(x, y)| (x - y).abs()).sum();
    let norm_a: f64 = pairs().map(|(x, _)| x * x).sum();
    let norm_b: f64 = pairs().map(|(_, y)| y * y).sum();

    assert_close("l2_squared_f32", level, n, (table.l2_squared_f32)(a, b), scalar::l2_squared_f32(a, b), l2_terms);
    assert_close("dot_f32", level, n, (table.dot_f32)(a, b), scalar::dot_f32(a, b), dot_terms);
    assert_close("l1_f32", level, n, (table.l1_f32)(a, b), scalar::l1_f32(a, b), l1_terms);
    let got = (table.dot_and_norms_f32)(a, b);
    let want = scalar::dot_and_norms_f32(a, b);
    assert_close("dot_and_norms_f32.dot", level, n, got.dot, want.dot, dot_terms);
    assert_close("dot_and_norms_f32.norm_a", level, n, got.norm_a, want.norm_a, norm_a);
    assert_close("dot_and_norms_f32.norm_b", level, n, got.norm_b, want.norm_b, norm_b);
}

fn check_f16_pair(table: &KernelTable, a: &[f16], b: &[f16]) {
    let n = a.len();
    let level = table.level;
    let pairs = || a.iter().zip(b).map(|(&x, &y)| (x.to_f64(), y.to_f64()));
    let l2_terms: f64 = pairs().map(|(x, y)| (x - y) * (x - y)).sum();
    let dot_terms: f64 = pairs().map(|(x, y)| (x * y).abs()).sum();
    let l1_terms: f64 = pairs().map(|(x, y)| (x - y).abs()).sum();
    let norm_a: f64 = pairs().map(|(x, _)| x * x).sum();
    let norm_b: f64 = pairs().map(|(_, y)| y * y).sum();

    assert_close("l2_squared_f16", level, n, (table.l2_squared_f16)(a, b), scalar::l2_squared_f16(a, b), l2_terms);
    assert_close("dot_f16", level, n, (table.dot_f16)(a, b), scalar::dot_f16(a, b), dot_terms);
    assert_close("l1_f16", level, n, (table.l1_f16)(a, b), scalar::l1_f16(a, b), l1_terms);
    let got = (table.dot_and_norms_f16)(a, b);
    let want = scalar::dot_and_norms_f16(a, b);
    assert_close("dot_and_norms_f16.dot", level, n, got.dot, want.dot, dot_terms);
    assert_close("dot_and_norms_f16.norm_a", level, n, got.norm_a, want.norm_a, norm_a);
    assert_close("dot_and_norms_f16.norm_b", level, n, got.norm_b, want.norm_b, norm_b);
}

#[test]
fn every_table_matches_scalar_on_random_vectors() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5742_4154);
    let tables = supported_tables();
    eprintln!("kernel tables on this CPU: {:?}", tables.iter().map(|t| t.level).collect::<Vec<_>>());
    for n in lengths() {
        for scale in [1e-3f32, 1.0, 100.0] {
            let a: Vec<f32> = (0..n).map(|_| rng.gen_range(-scale..scale)).collect();
            let b: Vec<f32> = (0..n).map(|_| rng.gen_range(-scale..scale)).collect();
            let ha: Vec<f16> = a.iter().map(|&x| f16::from_f32(x)).collect();
            let hb: Vec<f16> = b.iter().map(|&x| f16::from_f32(x)).collect();
            for table in &tables {
                check_f32_pair(table, &a, &b);
                check_f16_pair(table, &ha, &hb);
            }
        }
    }
}

/// `dot_u8` on every table against the scalar reference, all lengths (odd ones included), codes
/// over the whole `u8` range; the reference itself against an exact `f64` oracle.
#[test]
fn every_table_matches_scalar_on_u8_codes() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x000C_0DE5);
    for n in lengths() {
        let w: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let c: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        let want = scalar::dot_u8(&w, &c);
        let exact: f64 = w.iter().zip(&c).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
        assert_eq!(want, exact as f32);
        let terms: f64 = w.iter().zip(&c).map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs()).sum();
        for table in supported_tables() {
            assert_close("dot_u8", table.level, n, (table.dot_u8)(&w, &c), want, terms);
        }
    }
    assert_eq!(dot_u8(&[0.5, -2.0, 1.0], &[2, 3, 255]), 250.0);
}

/// `dot_u4` on every table against the scalar reference for 0–130 blocks (every nibble value,
/// weights of both signs); the reference against an `f64` oracle that unpacks the layout
/// itself; and one block computed by hand.
#[test]
fn every_table_matches_scalar_on_u4_codes() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x0000_C0D4);
    for blocks in (0..=40).chain([63, 64, 65, 127, 128, 130]) {
        let (n, bytes) = (32 * blocks, U4_BLOCK_BYTES * blocks);
        let w: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let c: Vec<u8> = (0..bytes).map(|_| rng.gen()).collect();
        let code = |i: usize| {
            let (block, j) = (i / 32, i % 32);
            let byte = c[block * U4_BLOCK_BYTES + j % 16];
            if j < 16 {
                byte & 15
            } else {
                byte >> 4
            }
        };
        let exact: f64 = (0..n).map(|i| f64::from(w[i]) * f64::from(code(i))).sum();
        let want = scalar::dot_u4(&w, &c);
        assert_eq!(want, exact as f32, "{blocks} blocks");
        let terms: f64 = (0..n).map(|i| (f64::from(w[i]) * f64::from(code(i))).abs()).sum();
        for table in supported_tables() {
            assert_close("dot_u4", table.level, n, (table.dot_u4)(&w, &c), want, terms);
        }
    }
    let mut w = vec![0.0f32; 32];
    (w[0], w[16], w[15], w[31]) = (1.0, 10.0, 100.0, 1000.0);
    let mut c = vec![0u8; 16];
    (c[0], c[15]) = (0x21, 0x43);
    assert_eq!(dot_u4(&w, &c), 1.0 * 1.0 + 10.0 * 2.0 + 100.0 * 3.0 + 1000.0 * 4.0);
}

#[test]
#[should_panic(expected = "whole blocks")]
fn u4_codes_must_come_in_whole_blocks() {
    dot_u4(&[0.0; 30], &[0; 15]);
}

#[test]
fn scalar_reference_equals_f64_oracle_exactly_rounded() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for n in [1usize, 3, 17, 384, 4099] {
        let a: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let exact_dot: f64 = a.iter().zip(&b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
        assert_eq!(scalar::dot_f32(&a, &b), exact_dot as f32);
    }
    assert_eq!(scalar::l2_squared_f32(&[1.0, 2.0, 3.0], &[4.0, 6.0, 3.0]), 25.0);
    assert_eq!(scalar::l1_f32(&[1.0, -2.0], &[4.0, 2.0]), 7.0);
}

#[test]
fn every_table_matches_scalar_on_minilm_embeddings() {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/demo/embeddings.f16");
    let bytes = std::fs::read(demo).expect("data/demo/embeddings.f16 is part of the repository");
    let all: Vec<f16> = bytes.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]])).collect();
    let rows: Vec<&[f16]> = all.chunks_exact(384).take(200).collect();
    assert_eq!(rows.len(), 200, "the demo sample holds at least 200 rows of 384 dimensions");
    for table in supported_tables() {
        for pair in rows.windows(2) {
            check_f16_pair(table, pair[0], pair[1]);
            let a: Vec<f32> = pair[0].iter().map(|x| x.to_f32()).collect();
            let b: Vec<f32> = pair[1].iter().map(|x| x.to_f32()).collect();
            check_f32_pair(table, &a, &b);
            // Odd-length prefixes of real data exercise the tails.
            check_f32_pair(table, &a[..383], &b[..383]);
        }
    }
}

#[test]
fn cosine_distance_edge_cases() {
    assert!((cosine_distance(&[1.0, 0.0], &[0.0, 1.0]) - 1.0).abs() < 1e-7);
    assert!(cosine_distance(&[1.0, 2.0], &[2.0, 4.0]).abs() < 1e-7);
    assert!((cosine_distance(&[1.0, 2.0], &[-1.0, -2.0]) - 2.0).abs() < 1e-7);
    assert!(cosine_distance(&[0.0, 0.0], &[1.0, 1.0]).is_nan());
    assert!(cosine_distance(&[], &[]).is_nan());
}

#[test]
#[should_panic(expected = "equal length")]
fn mismatched_lengths_panic_instead_of_reading_out_of_bounds() {
    let _ = l2_squared(&[1.0, 2.0], &[1.0]);
}

#[test]
fn batch_kernels_give_each_row_the_single_kernel_bits() {
    // Every width from 1 to 40 and a few long ones, 0 to 70 rows (blocks of any size): the batch
    // form's value for row i is exactly the single kernel's for row i.
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for dims in (1..=40).chain([63, 64, 65, 384]) {
        for rows in [0usize, 1, 7, 32, 70] {
            let query: Vec<f32> = (0..dims).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
            let data: Vec<f32> = (0..rows * dims).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
            let mut l2 = vec![f32::NAN; rows];
            let mut dots = vec![f32::NAN; rows];
            l2_squared_rows(&query, &data, &mut l2);
            dot_rows(&query, &data, &mut dots);
            for (i, row) in data.chunks_exact(dims).enumerate() {
                assert_eq!(l2[i].to_bits(), l2_squared(&query, row).to_bits(), "l2, {dims} dims, row {i} of {rows}");
                assert_eq!(dots[i].to_bits(), dot(&query, row).to_bits(), "dot, {dims} dims, row {i} of {rows}");
            }
        }
    }
}
