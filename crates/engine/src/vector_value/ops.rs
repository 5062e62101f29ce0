//! Distance functions, arithmetic, normalisation, slicing and ordering of `vector`/`halfvec` values,
//! on their stored elements, with pgvector's checks and errors.

use std::cmp::Ordering;

use super::{check_dimensions, check_same_dimensions, from_f32, widen, VectorError, VectorType};
use crate::vector_math::{self, Elementwise};

/// A SQL distance function on two values of the same type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistanceFunction {
    /// `l2_distance` / `<->`: Euclidean distance.
    L2,
    /// `vector_l2_squared_distance`: squared Euclidean distance.
    L2Squared,
    /// `inner_product`.
    InnerProduct,
    /// `vector_negative_inner_product` / `<#>`.
    NegativeInnerProduct,
    /// `cosine_distance` / `<=>`: `NaN` when either value is the zero vector.
    Cosine,
    /// `l1_distance` / `<+>`: Manhattan distance.
    L1,
}

impl DistanceFunction {
    /// Every distance function, once each.
    pub const ALL: [DistanceFunction; 6] = [
        DistanceFunction::L2,
        DistanceFunction::L2Squared,
        DistanceFunction::InnerProduct,
        DistanceFunction::NegativeInnerProduct,
        DistanceFunction::Cosine,
        DistanceFunction::L1,
    ];
}

/// `f(a, b)` as SQL returns it (`float8`), after checking that the dimensions agree.
pub fn distance<K: VectorType>(f: DistanceFunction, a: &[K::Elem], b: &[K::Elem]) -> Result<f64, VectorError> {
    check_same_dimensions::<K>(a.len(), b.len())?;
    Ok(match f {
        DistanceFunction::L2 => f64::from(K::l2_squared(a, b)).sqrt(),
        DistanceFunction::L2Squared => f64::from(K::l2_squared(a, b)),
        DistanceFunction::InnerProduct => f64::from(K::dot(a, b)),
        DistanceFunction::NegativeInnerProduct => -f64::from(K::dot(a, b)),
        DistanceFunction::Cosine => K::dot_and_norms(a, b).cosine_distance_f64(),
        DistanceFunction::L1 => f64::from(K::l1(a, b)),
    })
}

/// A comparison operator of the btree opclass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `<`.
    Less,
    /// `<=`.
    LessOrEqual,
    /// `=`.
    Equal,
    /// `<>`.
    NotEqual,
    /// `>=`.
    GreaterOrEqual,
    /// `>`.
    Greater,
}

impl Comparison {
    /// Whether `a op b` holds when `a` compares to `b` as `ordering`.
    pub fn holds(self, ordering: Ordering) -> bool {
        match self {
            Self::Less => ordering.is_lt(),
            Self::LessOrEqual => ordering.is_le(),
            Self::Equal => ordering.is_eq(),
            Self::NotEqual => ordering.is_ne(),
            Self::GreaterOrEqual => ordering.is_ge(),
            Self::Greater => ordering.is_gt(),
        }
    }
}

/// The btree order of two values ([`vector_math::compare`] on the widened elements).
pub fn compare<K: VectorType>(a: &[K::Elem], b: &[K::Elem]) -> Ordering {
    vector_math::compare(&widen::<K>(a), &widen::<K>(b))
}

/// `vector_norm` / `l2_norm`: the Euclidean norm, accumulated in `f64`.
pub fn norm<K: VectorType>(a: &[K::Elem]) -> f64 {
    vector_math::norm(&widen::<K>(a))
}

/// `a + b`, `a − b`, `a × b` element by element after checking the dimensions agree, rounded to
/// K: an infinite result is "value out of range: overflow", a product of non-zero elements that
/// rounds to zero "value out of range: underflow", as in pgvector.
pub fn elementwise<K: VectorType>(op: Elementwise, a: &[K::Elem], b: &[K::Elem]) -> Result<Vec<K::Elem>, VectorError> {
    check_same_dimensions::<K>(a.len(), b.len())?;
    let result = vector_math::elementwise(op, &widen::<K>(a), &widen::<K>(b), K::ELEMENT)?;
    from_f32::<K>(&result)
}

/// `l2_normalize`: `a / ‖a‖` rounded to K (the zero vector normalises to itself).
pub fn l2_normalize<K: VectorType>(a: &[K::Elem]) -> Result<Vec<K::Elem>, VectorError> {
    from_f32::<K>(&vector_math::l2_normalize(&widen::<K>(a), K::ELEMENT)?)
}

/// `subvector(a, start, count)`: 1-based `start` like `substring`, clipped to `a`; an empty
/// selection is "K must have at least 1 dimension".
pub fn subvector<K: VectorType>(a: &[K::Elem], start: i32, count: i32) -> Result<&[K::Elem], VectorError> {
    Ok(&a[vector_math::subvector_range(a.len(), start, count, K::NAME)?])
}

/// `a || b`: at most 16000 dimensions in all.
pub fn concat<K: VectorType>(a: &[K::Elem], b: &[K::Elem]) -> Result<Vec<K::Elem>, VectorError> {
    check_dimensions::<K>(a.len() + b.len())?;
    Ok(a.iter().chain(b).copied().collect())
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use half::f16;
    use proptest::prelude::*;

    use super::*;
    use crate::vector_math::ArithmeticError;
    use crate::vector_value::{HalfVec, Vector};

    /// Reference distances in f64 from the definitions.
    fn reference(f: DistanceFunction, a: &[f32], b: &[f32]) -> f64 {
        let pairs = || a.iter().zip(b).map(|(&x, &y)| (f64::from(x), f64::from(y)));
        let dot: f64 = pairs().map(|(x, y)| x * y).sum();
        let l2sq: f64 = pairs().map(|(x, y)| (x - y) * (x - y)).sum();
        match f {
            DistanceFunction::L2 => l2sq.sqrt(),
            DistanceFunction::L2Squared => l2sq,
            DistanceFunction::InnerProduct => dot,
            DistanceFunction::NegativeInnerProduct => -dot,
            DistanceFunction::Cosine => {
                let (na, nb): (f64, f64) = (pairs().map(|(x, _)| x * x).sum(), pairs().map(|(_, y)| y * y).sum());
                1.0 - (dot / (na * nb).sqrt()).clamp(-1.0, 1.0)
            }
            DistanceFunction::L1 => pairs().map(|(x, y)| (x - y).abs()).sum(),
        }
    }

    #[test]
    fn distances_check_dimensions() {
        for f in DistanceFunction::ALL {
            assert_eq!(
                distance::<Vector>(f, &[1.0], &[1.0, 2.0]),
                Err(VectorError::DifferentDimensions { type_name: "vector", a: 1, b: 2 })
            );
        }
        assert_eq!(distance::<Vector>(DistanceFunction::L2, &[0.0, 0.0], &[3.0, 4.0]), Ok(5.0));
        assert!(distance::<Vector>(DistanceFunction::Cosine, &[0.0], &[1.0]).unwrap().is_nan());
    }

    #[test]
    fn comparisons_follow_the_ordering() {
        let orderings = [Ordering::Less, Ordering::Equal, Ordering::Greater];
        let table = [
            (Comparison::Less, [true, false, false]),
            (Comparison::LessOrEqual, [true, true, false]),
            (Comparison::Equal, [false, true, false]),
            (Comparison::NotEqual, [true, false, true]),
            (Comparison::GreaterOrEqual, [false, true, true]),
            (Comparison::Greater, [false, false, true]),
        ];
        for (op, expected) in table {
            for (ordering, holds) in orderings.into_iter().zip(expected) {
                assert_eq!(op.holds(ordering), holds, "{op:?} {ordering:?}");
            }
        }
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        assert_eq!(compare::<HalfVec>(&h(&[1.0, 2.0]), &h(&[1.0])), Ordering::Greater);
    }

    #[test]
    fn arithmetic_slicing_and_concatenation() {
        assert_eq!(
            elementwise::<Vector>(Elementwise::Add, &[1.0], &[1.0, 2.0]),
            Err(VectorError::DifferentDimensions { type_name: "vector", a: 1, b: 2 })
        );
        assert_eq!(elementwise::<Vector>(Elementwise::Mul, &[2.0, 3.0], &[4.0, 5.0]), Ok(vec![8.0, 15.0]));
        assert_eq!(
            elementwise::<HalfVec>(Elementwise::Mul, &[f16::from_f32(300.0)], &[f16::from_f32(300.0)]),
            Err(ArithmeticError::Overflow.into())
        );
        assert_eq!(l2_normalize::<Vector>(&[3.0, 4.0]).unwrap(), vec![0.6, 0.8]);
        assert_eq!(norm::<Vector>(&[3.0, 4.0]), 5.0);
        assert_eq!(subvector::<Vector>(&[1.0, 2.0, 3.0], 2, 5), Ok(&[2.0, 3.0][..]));
        assert_eq!(subvector::<Vector>(&[1.0], 3, 1), Err(ArithmeticError::EmptyResult("vector").into()));
        assert_eq!(concat::<Vector>(&[1.0], &[2.0]), Ok(vec![1.0, 2.0]));
        assert_eq!(
            concat::<HalfVec>(&vec![f16::ONE; 8_000], &vec![f16::ONE; 8_001]),
            Err(VectorError::TooManyDimensions { type_name: "halfvec", max: 16_000 })
        );
        assert_eq!(concat::<Vector>(&vec![1.0; 8_000], &vec![1.0; 8_000]).map(|v| v.len()), Ok(16_000));
    }

    proptest! {
        /// Every distance function agrees with its f64 definition, for both element types, on
        /// lengths that exercise the SIMD tails.
        #[test]
        fn distances_match_reference(pairs in prop::collection::vec((-100.0f32..100.0, -100.0f32..100.0), 1..70)) {
            let (a, b): (Vec<f32>, Vec<f32>) = pairs.into_iter().unzip();
            let (ha, hb): (Vec<f16>, Vec<f16>) = (a.iter().map(|&x| f16::from_f32(x)).collect(), b.iter().map(|&x| f16::from_f32(x)).collect());
            let (wa, wb): (Vec<f32>, Vec<f32>) = (ha.iter().map(|x| x.to_f32()).collect(), hb.iter().map(|x| x.to_f32()).collect());
            let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<f32>>();
            for f in DistanceFunction::ALL {
                for (got, a, b) in [(distance::<Vector>(f, &a, &b), &a, &b), (distance::<HalfVec>(f, &ha, &hb), &wa, &wb)] {
                    let expected = reference(f, a, b);
                    // Dot products may cancel: bound their error by the sum of absolute products.
                    let scale = match f {
                        DistanceFunction::InnerProduct | DistanceFunction::NegativeInnerProduct => reference(DistanceFunction::InnerProduct, &abs(a), &abs(b)),
                        DistanceFunction::Cosine => 1.0,
                        _ => expected,
                    };
                    let got = got.unwrap();
                    prop_assert!((got.is_nan() && expected.is_nan()) || (got - expected).abs() <= 1e-4 * scale.max(1.0), "{:?}: {} vs {}", f, got, expected);
                }
            }
        }
    }
}
