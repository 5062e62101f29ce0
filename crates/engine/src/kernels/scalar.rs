//! Scalar reference kernels: portable, accumulate in `f64`, round once at the end.

use half::f16;

use super::{DotAndNorms, KernelTable, SimdLevel};

/// The scalar kernel table, supported on every CPU.
pub static TABLE: KernelTable = KernelTable {
    level: SimdLevel::Scalar,
    l2_squared_f32,
    dot_f32,
    l1_f32,
    dot_and_norms_f32,
    l2_squared_f16,
    dot_f16,
    l1_f16,
    dot_and_norms_f16,
    dot_u8,
    dot_u4,
};

fn widen<'a>(a: &'a [f32], b: &'a [f32]) -> impl Iterator<Item = (f64, f64)> + 'a {
    a.iter().zip(b).map(|(&x, &y)| (f64::from(x), f64::from(y)))
}

fn widen_f16<'a>(a: &'a [f16], b: &'a [f16]) -> impl Iterator<Item = (f64, f64)> + 'a {
    a.iter().zip(b).map(|(&x, &y)| (x.to_f64(), y.to_f64()))
}

fn l2_squared(pairs: impl Iterator<Item = (f64, f64)>) -> f32 {
    pairs.map(|(x, y)| (x - y) * (x - y)).sum::<f64>() as f32
}

fn dot(pairs: impl Iterator<Item = (f64, f64)>) -> f32 {
    pairs.map(|(x, y)| x * y).sum::<f64>() as f32
}

fn l1(pairs: impl Iterator<Item = (f64, f64)>) -> f32 {
    pairs.map(|(x, y)| (x - y).abs()).sum::<f64>() as f32
}

fn dot_and_norms(pairs: impl Iterator<Item = (f64, f64)>) -> DotAndNorms {
    let (mut dot, mut norm_a, mut norm_b) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in pairs {
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    DotAndNorms { dot: dot as f32, norm_a: norm_a as f32, norm_b: norm_b as f32 }
}

/// Squared Euclidean distance (reference).
pub fn l2_squared_f32(a: &[f32], b: &[f32]) -> f32 {
    l2_squared(widen(a, b))
}
/// Inner product (reference).
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    dot(widen(a, b))
}
/// Manhattan distance (reference).
pub fn l1_f32(a: &[f32], b: &[f32]) -> f32 {
    l1(widen(a, b))
}
/// Inner product and squared norms (reference).
pub fn dot_and_norms_f32(a: &[f32], b: &[f32]) -> DotAndNorms {
    dot_and_norms(widen(a, b))
}
/// Squared Euclidean distance of `f16` vectors (reference).
pub fn l2_squared_f16(a: &[f16], b: &[f16]) -> f32 {
    l2_squared(widen_f16(a, b))
}
/// Inner product of `f16` vectors (reference).
pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    dot(widen_f16(a, b))
}
/// Manhattan distance of `f16` vectors (reference).
pub fn l1_f16(a: &[f16], b: &[f16]) -> f32 {
    l1(widen_f16(a, b))
}
/// Inner product and squared norms of `f16` vectors (reference).
pub fn dot_and_norms_f16(a: &[f16], b: &[f16]) -> DotAndNorms {
    dot_and_norms(widen_f16(a, b))
}
/// Inner product of `f32` weights with `u8` codes (reference).
pub fn dot_u8(weights: &[f32], codes: &[u8]) -> f32 {
    weights.iter().zip(codes).map(|(&w, &c)| f64::from(w) * f64::from(c)).sum::<f64>() as f32
}
/// Inner product of `f32` weights with packed 4-bit codes (reference; layout in
/// [`super::dot_u4`]).
pub fn dot_u4(weights: &[f32], codes: &[u8]) -> f32 {
    let half = super::U4_BLOCK_BYTES;
    let mut sum = 0.0f64;
    for (block, w) in codes.chunks_exact(half).zip(weights.chunks_exact(2 * half)) {
        for (j, &byte) in block.iter().enumerate() {
            sum += f64::from(w[j]) * f64::from(byte & 15) + f64::from(w[half + j]) * f64::from(byte >> 4);
        }
    }
    sum as f32
}
