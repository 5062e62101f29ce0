//! Element-wise arithmetic, ordering and validation shared by the `vector` and `halfvec` SQL types.
//!
//! All functions take `f32` slices; `halfvec` values are widened first, and functions that make
//! new elements round them to the [`ElementKind`] they are given, so that range checks see the
//! value that will be stored.

use std::cmp::Ordering;
use std::ops::Range;

use thiserror::Error;

use crate::store::ElementKind;

/// Errors from vector arithmetic, worded as PostgreSQL words float errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ArithmeticError {
    /// A result element is infinite although the inputs were finite.
    #[error("value out of range: overflow")]
    Overflow,
    /// A product of two non-zero elements rounded to zero.
    #[error("value out of range: underflow")]
    Underflow,
    /// A `subvector` range that selects no element.
    #[error("{0} must have at least 1 dimension")]
    EmptyResult(&'static str),
}

/// Errors for an element that a vector may not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ElementError {
    /// `NaN`.
    #[error("NaN not allowed in {0}")]
    NotANumber(&'static str),
    /// `±Infinity`.
    #[error("infinite value not allowed in {0}")]
    Infinite(&'static str),
}

/// Checks that every element is finite; `type_name` goes into the message.
pub fn check_finite(values: &[f32], type_name: &'static str) -> Result<(), ElementError> {
    for &value in values {
        if value.is_nan() {
            return Err(ElementError::NotANumber(type_name));
        }
        if value.is_infinite() {
            return Err(ElementError::Infinite(type_name));
        }
    }
    Ok(())
}

/// An element-wise arithmetic operation on two vectors of equal length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elementwise {
    /// `a + b`.
    Add,
    /// `a − b`.
    Sub,
    /// `a × b`.
    Mul,
}

/// Applies `op` element by element and rounds each result to `element`, checking elements in
/// order as pgvector does: an infinite result is an overflow and, for [`Elementwise::Mul`], a zero
/// product of non-zero operands is an underflow. Inputs must be finite and of equal length.
pub fn elementwise(op: Elementwise, a: &[f32], b: &[f32], element: ElementKind) -> Result<Vec<f32>, ArithmeticError> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let in_f32 = match op {
                Elementwise::Add => x + y,
                Elementwise::Sub => x - y,
                Elementwise::Mul => x * y,
            };
            let result = element.round(in_f32);
            if result.is_infinite() {
                return Err(ArithmeticError::Overflow);
            }
            if op == Elementwise::Mul && result == 0.0 && x != 0.0 && y != 0.0 {
                return Err(ArithmeticError::Underflow);
            }
            Ok(result)
        })
        .collect()
}

/// Euclidean norm, accumulated in `f64`.
pub fn norm(a: &[f32]) -> f64 {
    a.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt()
}

/// Divides `values` by their Euclidean norm (computed in `f64`) in place; returns `false`, leaving
/// them unchanged, for the zero vector, which has no direction. Every L2 normalisation in
/// pg_strata — SQL `l2_normalize`, cosine queries, rows stored for cosine — goes through here.
pub fn normalize_in_place(values: &mut [f32]) -> bool {
    let length = norm(values);
    if length > 0.0 {
        for v in values.iter_mut() {
            *v = (f64::from(*v) / length) as f32;
        }
        true
    } else {
        false
    }
}

/// `a / ‖a‖` rounded to `element`; the zero vector normalises to itself. An infinite result
/// element is an overflow (pgvector checks for it, although a unit vector cannot hold one).
pub fn l2_normalize(a: &[f32], element: ElementKind) -> Result<Vec<f32>, ArithmeticError> {
    let mut unit = a.to_vec();
    normalize_in_place(&mut unit);
    for v in &mut unit {
        *v = element.round(*v);
        if v.is_infinite() {
            return Err(ArithmeticError::Overflow);
        }
    }
    Ok(unit)
}

/// Total order used by the btree opclass: element by element, then shorter first (the order
/// PostgreSQL arrays use). Elements are finite, so `partial_cmp` never fails.
pub fn compare(a: &[f32], b: &[f32]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.partial_cmp(y) {
            Some(Ordering::Equal) | None => {}
            Some(unequal) => return unequal,
        }
    }
    a.len().cmp(&b.len())
}

/// The element range `subvector(v, start, count)` selects: 1-based `start` like `substring`,
/// clipped to the vector; an empty selection is an error naming `type_name`.
pub fn subvector_range(
    len: usize,
    start: i32,
    count: i32,
    type_name: &'static str,
) -> Result<Range<usize>, ArithmeticError> {
    let len = i64::try_from(len).expect("vector lengths fit in i64");
    let (start, count) = (i64::from(start), i64::from(count));
    if count < 1 {
        return Err(ArithmeticError::EmptyResult(type_name));
    }
    let end = (start + count).min(len + 1);
    let start = start.max(1);
    if start > len || end <= start {
        return Err(ArithmeticError::EmptyResult(type_name));
    }
    Ok((start - 1) as usize..(end - 1) as usize)
}

/// Rounds to the nearest integer (ties to even, like PostgreSQL's `rint`-based `float4 → int4`);
/// `None` when the result does not fit in an `i32`.
pub fn to_i32_rounded(value: f32) -> Option<i32> {
    let rounded = f64::from(value).round_ties_even();
    (rounded >= f64::from(i32::MIN) && rounded <= f64::from(i32::MAX)).then_some(rounded as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(a: &[f32], b: &[f32]) -> Result<Vec<f32>, ArithmeticError> {
        elementwise(Elementwise::Add, a, b, ElementKind::F32)
    }

    fn sub(a: &[f32], b: &[f32]) -> Result<Vec<f32>, ArithmeticError> {
        elementwise(Elementwise::Sub, a, b, ElementKind::F32)
    }

    fn mul(a: &[f32], b: &[f32]) -> Result<Vec<f32>, ArithmeticError> {
        elementwise(Elementwise::Mul, a, b, ElementKind::F32)
    }

    #[test]
    fn arithmetic_and_errors() {
        assert_eq!(add(&[1.0, 2.0], &[3.0, 4.0]).unwrap(), vec![4.0, 6.0]);
        assert_eq!(sub(&[1.0, 2.0], &[3.0, 4.0]).unwrap(), vec![-2.0, -2.0]);
        assert_eq!(mul(&[1.0, 2.0], &[3.0, 4.0]).unwrap(), vec![3.0, 8.0]);
        assert_eq!(add(&[f32::MAX], &[f32::MAX]), Err(ArithmeticError::Overflow));
        assert_eq!(mul(&[1e-30], &[1e-30]), Err(ArithmeticError::Underflow));
        assert_eq!(mul(&[0.0], &[1e-30]).unwrap(), vec![0.0]);
    }

    #[test]
    fn normalise() {
        let unit = l2_normalize(&[3.0, 4.0], ElementKind::F32).unwrap();
        assert!((unit[0] - 0.6).abs() < 1e-7 && (unit[1] - 0.8).abs() < 1e-7);
        assert_eq!(l2_normalize(&[0.0, 0.0], ElementKind::F32).unwrap(), vec![0.0, 0.0]);
        let half = l2_normalize(&[0.1, 0.0], ElementKind::F16).unwrap();
        assert_eq!(half, vec![1.0, 0.0]);
        let third = l2_normalize(&[1.0, 1.0, 1.0], ElementKind::F16).unwrap();
        let rounded = half::f16::from_f32((1.0f64 / 3.0f64.sqrt()) as f32).to_f32();
        assert_eq!(third, vec![rounded; 3]);
        assert!((norm(&[3.0, 4.0]) - 5.0).abs() < 1e-12);
    }

    #[test]
    fn ordering_is_elementwise_then_length() {
        assert_eq!(compare(&[1.0, 2.0], &[1.0, 3.0]), Ordering::Less);
        assert_eq!(compare(&[1.0, 2.0], &[1.0, 2.0]), Ordering::Equal);
        assert_eq!(compare(&[1.0, 2.0], &[1.0]), Ordering::Greater);
        assert_eq!(compare(&[0.0, 9.0], &[1.0]), Ordering::Less);
    }

    #[test]
    fn subvector_matches_substring_semantics() {
        assert_eq!(subvector_range(5, 2, 3, "vector").unwrap(), 1..4);
        assert_eq!(subvector_range(5, 4, 10, "vector").unwrap(), 3..5);
        assert_eq!(subvector_range(5, -1, 3, "vector").unwrap(), 0..1);
        assert_eq!(subvector_range(5, i32::MAX, i32::MAX, "vector"), Err(ArithmeticError::EmptyResult("vector")));
        assert_eq!(subvector_range(5, 6, 1, "vector"), Err(ArithmeticError::EmptyResult("vector")));
        assert_eq!(subvector_range(5, -5, 3, "vector"), Err(ArithmeticError::EmptyResult("vector")));
        assert_eq!(subvector_range(5, 1, 0, "vector"), Err(ArithmeticError::EmptyResult("vector")));
    }

    #[test]
    fn integer_rounding_matches_rint() {
        assert_eq!(to_i32_rounded(2.5), Some(2));
        assert_eq!(to_i32_rounded(3.5), Some(4));
        assert_eq!(to_i32_rounded(-2.5), Some(-2));
        assert_eq!(to_i32_rounded(2_147_483_520.0), Some(2_147_483_520));
        assert_eq!(to_i32_rounded(3e9), None);
        assert_eq!(to_i32_rounded(-3e9), None);
    }

    #[test]
    fn f16_arithmetic_rounds_then_checks() {
        let f16 = ElementKind::F16;
        assert_eq!(elementwise(Elementwise::Add, &[65504.0, 1.0], &[0.0, 2.0], f16).unwrap(), vec![65504.0, 3.0]);
        assert_eq!(elementwise(Elementwise::Add, &[65519.0], &[65519.0], f16), Err(ArithmeticError::Overflow));
        assert_eq!(elementwise(Elementwise::Sub, &[-65504.0], &[65504.0], f16), Err(ArithmeticError::Overflow));
        assert_eq!(elementwise(Elementwise::Mul, &[300.0], &[300.0], f16), Err(ArithmeticError::Overflow));
        // 1e-7 is a subnormal f16; its square is non-zero in f32 but rounds to zero in f16.
        let tiny = f16.round(1e-7);
        assert_eq!(elementwise(Elementwise::Mul, &[tiny], &[tiny], f16), Err(ArithmeticError::Underflow));
        assert!(elementwise(Elementwise::Mul, &[tiny], &[tiny], ElementKind::F32).is_ok());
        assert_eq!(elementwise(Elementwise::Mul, &[0.0], &[tiny], f16).unwrap(), vec![0.0]);
    }

    #[test]
    fn errors_follow_element_order() {
        // pgvector checks element by element: the first failing element decides the error.
        assert_eq!(mul(&[1e-30, 1e30], &[1e-30, 1e30]), Err(ArithmeticError::Underflow));
        assert_eq!(mul(&[1e30, 1e-30], &[1e30, 1e-30]), Err(ArithmeticError::Overflow));
    }

    #[test]
    fn finiteness() {
        assert!(check_finite(&[1.0, f32::NAN], "vector").is_err());
        assert_eq!(check_finite(&[f32::NAN, f32::INFINITY], "vector"), Err(ElementError::NotANumber("vector")));
        assert_eq!(check_finite(&[f32::INFINITY], "halfvec"), Err(ElementError::Infinite("halfvec")));
    }
}
