//! `avg(vector)` / `avg(halfvec)` state arithmetic: a `double precision[]` state
//! `{count, sum₁, …, sum_d}` (`d = 0` before the first value) that is accumulated, combined across
//! parallel workers and finally divided.
//!
//! The state functions are callable from SQL with arrays the caller builds, so each one validates
//! its state exactly as pgvector does (same checks, same order, same errors): a malformed array is
//! [`VectorError::StateArray`]; a state of `d > 0` sums must match the other operand; a sum that
//! overflows `f64` is "value out of range: overflow". NaN/infinite sums pass through the state, as
//! in pgvector, and are rejected by [`AvgState::mean`], which validates every element of the mean
//! like any other new value.

use super::{check_dimensions, from_f32, Vector, VectorError, VectorType};
use crate::vector_math::ArithmeticError;

/// A validated aggregate state: at least the count is present.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AvgState<'a> {
    count: f64,
    sums: &'a [f64],
}

/// `a + b` for two state sums; an infinite sum is an overflow.
fn add_sums(a: f64, b: f64) -> Result<f64, VectorError> {
    let sum = a + b;
    if sum.is_infinite() {
        return Err(ArithmeticError::Overflow.into());
    }
    Ok(sum)
}

impl<'a> AvgState<'a> {
    /// pgvector's `CheckStateArray`: `elements` is `None` when the array is not a one-dimensional
    /// `float8[]` without nulls; that, or an empty array, is "`type_name`_`function`: expected
    /// state array".
    pub fn read(
        elements: Option<&'a [f64]>,
        type_name: &'static str,
        function: &'static str,
    ) -> Result<Self, VectorError> {
        match elements {
            Some([count, sums @ ..]) => Ok(Self { count: *count, sums }),
            _ => Err(VectorError::StateArray { type_name, function }),
        }
    }

    /// `K_accum`: the state after adding `value`. A state without sums takes the value's
    /// dimensions; otherwise they must agree.
    pub fn accumulate(self, value: &[f32]) -> Result<Vec<f64>, VectorError> {
        let mut next = Vec::with_capacity(value.len() + 1);
        next.push(self.count + 1.0);
        if self.sums.is_empty() {
            next.extend(value.iter().map(|&x| f64::from(x)));
        } else {
            if self.sums.len() != value.len() {
                return Err(VectorError::UnexpectedDimensions {
                    expected: self.sums.len() as i64,
                    actual: value.len(),
                });
            }
            for (&sum, &x) in self.sums.iter().zip(value) {
                next.push(add_sums(sum, f64::from(x))?);
            }
        }
        Ok(next)
    }

    /// `vector_combine` (which `halfvec_combine` also is, in pgvector): merges two partial states
    /// as pgvector 0.8.6 does, choosing by the counts: a state whose count is zero is the identity
    /// (the other state is taken, count and sums, and must have 1 to 16000 sums: `vector`'s
    /// limit); otherwise the first state's sums must number 1 to 16000 and match the second's, and
    /// are added. Two empty states (count 0) combine into the empty state `{0}`: pgvector 0.8.6
    /// raises "vector must have at least 1 dimension" there, which fails a parallel `avg` over no
    /// rows (its issue #1012, fixed after 0.8.6); pg_strata follows the fix
    /// (docs/pgvector-compatibility.md lists the difference).
    pub fn combine(self, other: Self) -> Result<Vec<f64>, VectorError> {
        if self.count == 0.0 && other.count == 0.0 {
            return Ok(vec![0.0]);
        }
        let (count, sums) = if self.count == 0.0 {
            check_dimensions::<Vector>(other.sums.len())?;
            (other.count, other.sums.to_vec())
        } else if other.count == 0.0 {
            check_dimensions::<Vector>(self.sums.len())?;
            (self.count, self.sums.to_vec())
        } else {
            check_dimensions::<Vector>(self.sums.len())?;
            if self.sums.len() != other.sums.len() {
                return Err(VectorError::UnexpectedDimensions {
                    expected: self.sums.len() as i64,
                    actual: other.sums.len(),
                });
            }
            let sums = self.sums.iter().zip(other.sums).map(|(&x, &y)| add_sums(x, y)).collect::<Result<_, _>>()?;
            (self.count + other.count, sums)
        };
        let mut merged = Vec::with_capacity(sums.len() + 1);
        merged.push(count);
        merged.extend(sums);
        Ok(merged)
    }

    /// `K_avg`: the mean (`None` when the count is zero), each element rounded to K and validated
    /// with [`from_f32`].
    pub fn mean<K: VectorType>(self) -> Result<Option<Vec<K::Elem>>, VectorError> {
        if self.count == 0.0 {
            return Ok(None);
        }
        check_dimensions::<K>(self.sums.len())?;
        let mean: Vec<f32> = self.sums.iter().map(|sum| (sum / self.count) as f32).collect();
        from_f32::<K>(&mean).map(Some)
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use half::f16;
    use proptest::prelude::*;

    use super::*;
    use crate::vector_math::ElementError;
    use crate::vector_value::HalfVec;

    fn state(elements: &[f64]) -> AvgState<'_> {
        AvgState::read(Some(elements), "vector", "accum").unwrap()
    }

    fn fold(rows: &[Vec<f32>]) -> Vec<f64> {
        rows.iter().fold(vec![0.0], |s, row| state(&s).accumulate(row).unwrap())
    }

    /// Reference mean: the f64 column sums divided by the row count, rounded to f32.
    fn reference_mean(rows: &[Vec<f32>]) -> Vec<f32> {
        (0..rows[0].len())
            .map(|i| (rows.iter().map(|r| f64::from(r[i])).sum::<f64>() / rows.len() as f64) as f32)
            .collect()
    }

    #[test]
    fn malformed_states_are_rejected() {
        assert_eq!(
            AvgState::read(None, "halfvec", "avg"),
            Err(VectorError::StateArray { type_name: "halfvec", function: "avg" })
        );
        assert_eq!(
            AvgState::read(Some(&[]), "vector", "combine"),
            Err(VectorError::StateArray { type_name: "vector", function: "combine" })
        );
    }

    #[test]
    fn dimension_mismatch_and_overflow() {
        assert_eq!(
            state(&[1.0, 2.0, 3.0]).accumulate(&[1.0]),
            Err(VectorError::UnexpectedDimensions { expected: 2, actual: 1 })
        );
        assert_eq!(state(&[1.0, f64::MAX]).accumulate(&[f32::MAX]), Ok(vec![2.0, f64::MAX]));
        assert_eq!(state(&[1.0, f64::MAX]).combine(state(&[1.0, f64::MAX])), Err(ArithmeticError::Overflow.into()));
        assert_eq!(
            state(&[1.0, 1.0, 2.0]).combine(state(&[1.0, 1.0])),
            Err(VectorError::UnexpectedDimensions { expected: 2, actual: 1 })
        );
        let mut too_many = vec![0.0; 16_002];
        too_many[0] = 1.0;
        assert_eq!(
            state(&too_many).combine(state(&[0.0])),
            Err(VectorError::TooManyDimensions { type_name: "vector", max: 16_000 })
        );
        assert_eq!(
            state(&[0.0]).combine(state(&too_many)),
            Err(VectorError::TooManyDimensions { type_name: "vector", max: 16_000 })
        );
        // Counted states without sums are malformed (0.8.6).
        assert_eq!(state(&[2.0]).combine(state(&[3.0])), Err(VectorError::TooFewDimensions("vector")));
        // Two empty states make the empty state (pgvector after 0.8.6; 0.8.6 raised an error,
        // which failed a parallel avg over no rows).
        assert_eq!(state(&[0.0]).combine(state(&[0.0])), Ok(vec![0.0]));
        assert_eq!(state(&[0.0, 1.0]).combine(state(&[0.0])), Ok(vec![0.0]));
        // A zero count takes the other state whole (its sums unchecked against the first's).
        assert_eq!(state(&[0.0, 9.0]).combine(state(&[2.0, 1.0, 3.0])), Ok(vec![2.0, 1.0, 3.0]));
        assert_eq!(state(&[2.0, 1.0, 3.0]).combine(state(&[-0.0, 7.0])), Ok(vec![2.0, 1.0, 3.0]));
    }

    #[test]
    fn mean_validates_like_a_new_value() {
        assert_eq!(state(&[0.0]).mean::<Vector>(), Ok(None));
        assert_eq!(state(&[0.0, 1.0]).mean::<Vector>(), Ok(None));
        assert_eq!(state(&[2.0]).mean::<Vector>(), Err(VectorError::TooFewDimensions("vector")));
        assert_eq!(state(&[2.0, 1.0, 3.0]).mean::<Vector>(), Ok(Some(vec![0.5, 1.5])));
        assert_eq!(state(&[1.0, f64::NAN]).mean::<Vector>(), Err(ElementError::NotANumber("vector").into()));
        assert_eq!(
            state(&[1.0, 70_000.0]).mean::<HalfVec>(),
            Err(VectorError::OutOfRange { value: 70_000.0, type_name: "halfvec" })
        );
        assert_eq!(state(&[1.0, 1e300]).mean::<Vector>(), Err(ElementError::Infinite("vector").into()));
        assert_eq!(state(&[4.0, 2.0]).mean::<HalfVec>(), Ok(Some(vec![f16::from_f32(0.5)])));
    }

    proptest! {
        /// Accumulating rows, in any split across two partial states, then combining, gives the
        /// reference mean.
        #[test]
        fn split_accumulation_matches_reference(
            (rows, split) in (1usize..9).prop_flat_map(|dims| {
                prop::collection::vec(prop::collection::vec(-1e6f32..1e6, dims), 1..20)
                    .prop_flat_map(|rows| { let n = rows.len(); (Just(rows), 0..=n) })
            })
        ) {
            let whole = fold(&rows);
            let merged = state(&fold(&rows[..split])).combine(state(&fold(&rows[split..]))).unwrap();
            prop_assert_eq!(merged[0], rows.len() as f64);
            let expected = reference_mean(&rows);
            for s in [&whole, &merged] {
                let mean = state(s).mean::<Vector>().unwrap().unwrap();
                for (m, e) in mean.iter().zip(&expected) {
                    prop_assert!((m - e).abs() <= 1e-6 * e.abs().max(1.0), "{} vs {}", m, e);
                }
            }
        }
    }
}
