//! Distances, norm, normalisation and the btree order of `sparsevec` values, computed as pgvector
//! 0.8.6's `src/sparsevec.c` computes them.
//!
//! Accumulation follows pgvector: the L2, L1 and inner-product sums and the norms inside the
//! cosine distance are `f32` sums taken in ascending index order (so `inner_product` of
//! `{1:3e38}/1` with itself is `Infinity`, as in pgvector, and the cosine distance then `NaN`);
//! `l2_norm` and `l2_normalize` accumulate in `f64`. Each result equals, bit for bit, the same sum
//! taken over the dense vectors in index order (the tests' oracle): the terms a sparse value skips
//! are exact zeros. (pgvector builds with `-march=native -fassociative-math`, so its own last bits
//! may differ between machines where it vectorises or fuses these sums; this is its unfused,
//! unvectorised order.)

use std::cmp::Ordering;

use crate::vector_math::ArithmeticError;
use crate::vector_value::ops::DistanceFunction;
use crate::vector_value::VectorError;

use super::{SparseRef, SparseVec, NAME};

/// Calls `term(a_i, b_i)` for every index where `a` or `b` is non-zero, in ascending index order,
/// with `0.0` for the value that is absent (pgvector's merge loops visit the same indices in the
/// same order).
fn for_each_union(a: SparseRef<'_>, b: SparseRef<'_>, mut term: impl FnMut(f32, f32)) {
    let (ai, av, bi, bv) = (a.indices(), a.values(), b.indices(), b.values());
    let (mut i, mut j) = (0, 0);
    while i < ai.len() || j < bi.len() {
        match (ai.get(i), bi.get(j)) {
            (Some(x), Some(y)) if x == y => {
                term(av[i], bv[j]);
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => {
                term(av[i], 0.0);
                i += 1;
            }
            (Some(_), None) => {
                term(av[i], 0.0);
                i += 1;
            }
            _ => {
                term(0.0, bv[j]);
                j += 1;
            }
        }
    }
}

/// pgvector's `SparsevecL2SquaredDistance`: `Σ (aᵢ − bᵢ)²` in `f32`, in index order.
fn l2_squared(a: SparseRef<'_>, b: SparseRef<'_>) -> f32 {
    let mut sum = 0.0f32;
    for_each_union(a, b, |x, y| sum += (x - y) * (x - y));
    sum
}

/// pgvector's `SparsevecInnerProduct`: `Σ aᵢ·bᵢ` over the indices both hold, in `f32`.
fn dot(a: SparseRef<'_>, b: SparseRef<'_>) -> f32 {
    let (ai, av, bi, bv) = (a.indices(), a.values(), b.indices(), b.values());
    let (mut i, mut j, mut sum) = (0, 0, 0.0f32);
    while i < ai.len() && j < bi.len() {
        match ai[i].cmp(&bi[j]) {
            Ordering::Equal => {
                sum += av[i] * bv[j];
                i += 1;
                j += 1;
            }
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
        }
    }
    sum
}

/// `Σ aᵢ²` in `f32`, in index order (the norms inside pgvector's cosine distance).
fn squared_norm_f32(a: SparseRef<'_>) -> f32 {
    a.values().iter().fold(0.0f32, |sum, &x| sum + x * x)
}

/// `Σ aᵢ²` in `f64` (`l2_norm`, `l2_normalize`), from `+0` (`Iterator::sum` starts at `-0`,
/// which would make `l2_norm('{}/2')` print as `-0`).
fn squared_norm_f64(a: SparseRef<'_>) -> f64 {
    a.values().iter().fold(0.0, |sum, &x| sum + f64::from(x) * f64::from(x))
}

/// `f(a, b)` as SQL returns it (`float8`), after checking that the dimensions agree
/// ("different sparsevec dimensions 2 and 1"): `l2_distance` / `<->`,
/// `sparsevec_l2_squared_distance`, `inner_product`, `sparsevec_negative_inner_product` / `<#>`,
/// `cosine_distance` / `<=>` (`NaN` when either value is zero; clamped to `[0, 2]`), and
/// `l1_distance` / `<+>`.
pub fn distance(f: DistanceFunction, a: SparseRef<'_>, b: SparseRef<'_>) -> Result<f64, VectorError> {
    if a.dim() != b.dim() {
        return Err(VectorError::DifferentDimensions {
            type_name: NAME,
            a: usize::try_from(a.dim()).unwrap_or(0),
            b: usize::try_from(b.dim()).unwrap_or(0),
        });
    }
    Ok(match f {
        DistanceFunction::L2 => f64::from(l2_squared(a, b)).sqrt(),
        DistanceFunction::L2Squared => f64::from(l2_squared(a, b)),
        DistanceFunction::InnerProduct => f64::from(dot(a, b)),
        DistanceFunction::NegativeInnerProduct => f64::from(-dot(a, b)),
        DistanceFunction::Cosine => {
            let similarity =
                f64::from(dot(a, b)) / (f64::from(squared_norm_f32(a)) * f64::from(squared_norm_f32(b))).sqrt();
            // Clamped like pgvector (a NaN stays NaN).
            1.0 - similarity.clamp(-1.0, 1.0)
        }
        DistanceFunction::L1 => {
            let mut sum = 0.0f32;
            for_each_union(a, b, |x, y| sum += (x - y).abs());
            f64::from(sum)
        }
    })
}

/// `l2_norm(sparsevec)`: the Euclidean norm, accumulated in `f64`.
pub fn norm(a: SparseRef<'_>) -> f64 {
    squared_norm_f64(a).sqrt()
}

/// `l2_normalize(sparsevec)`: each value divided by the norm (in `f64`, rounded to `f32`); values
/// that round to zero are dropped; an infinite result is "value out of range: overflow"; the zero
/// vector normalises to itself.
pub fn l2_normalize(a: SparseRef<'_>) -> Result<SparseVec, VectorError> {
    let length = norm(a);
    if length <= 0.0 || length.is_nan() {
        return Ok(a.to_sparse_vec());
    }
    let mut indices = Vec::with_capacity(a.nnz());
    let mut values = Vec::with_capacity(a.nnz());
    for (&index, &x) in a.indices().iter().zip(a.values()) {
        let unit = (f64::from(x) / length) as f32;
        if unit.is_infinite() {
            return Err(ArithmeticError::Overflow.into());
        }
        if unit != 0.0 {
            indices.push(index);
            values.push(unit);
        }
    }
    Ok(SparseVec::from_checked_parts(a.dim(), indices, values))
}

/// `sparsevec_cmp`, the btree order, exactly as pgvector's `sparsevec_cmp_internal`: the values
/// compared as if dense, element by element, then the shorter value first (the order PostgreSQL
/// arrays use, and `vector`'s).
pub fn compare(a: SparseRef<'_>, b: SparseRef<'_>) -> Ordering {
    let (ai, av, bi, bv) = (a.indices(), a.values(), b.indices(), b.values());
    let sign = |x: f32| if x < 0.0 { Ordering::Less } else { Ordering::Greater };
    let nnz = ai.len().min(bi.len());
    for i in 0..nnz {
        // The first index where the two differ holds a non-zero value in one and zero in the other.
        match ai[i].cmp(&bi[i]) {
            Ordering::Less => return sign(av[i]),
            Ordering::Greater => return sign(bv[i]).reverse(),
            Ordering::Equal => {}
        }
        match av[i].partial_cmp(&bv[i]) {
            Some(Ordering::Equal) | None => {}
            Some(unequal) => return unequal,
        }
    }
    if ai.len() < bi.len() && bi[nnz] < a.dim() {
        return sign(bv[nnz]).reverse();
    }
    if ai.len() > bi.len() && ai[nnz] < b.dim() {
        return sign(av[nnz]);
    }
    a.dim().cmp(&b.dim())
}
