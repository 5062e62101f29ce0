//! Packed sparse rows: how an index stores `sparsevec` rows of more dimensions than a dense row
//! may have (SPLADE-style vectors: about 30,000 dimensions, a few hundred non-zero).
//!
//! A packed row of capacity `cap` is `1 + 2 · cap` `f32` words, so it fits every fixed-width row
//! store (memtable slots, segment VECTORS sections, [`crate::store::VectorStore`]):
//!
//! ```text
//! word 0              nnz (u32 bits), ≤ cap
//! words 1 ..= cap     the indices (u32 bits), strictly increasing, then zeros
//! words cap+1 ..      the values (f32), then zeros
//! ```
//!
//! Distances are computed over the non-zero pairs by merging the sorted index lists
//! ([`SparseQuery`]); a row's distances equal those of the dense vector it stands for (tested
//! against the dense kernels). For cosine, rows are stored L2-normalised, as dense rows are.

use thiserror::Error;

use crate::metric::Metric;

/// Words of a packed row of capacity `cap`.
pub fn row_words(cap: usize) -> usize {
    1 + 2 * cap
}

/// The capacity of packed rows of `words` words (`None` when no capacity gives that width).
pub fn capacity_of(words: usize) -> Option<usize> {
    (words >= 1 && (words - 1).is_multiple_of(2)).then(|| (words - 1) / 2)
}

/// A sparse row that does not fit its packed form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PackError {
    /// More non-zero elements than the capacity.
    #[error("a sparse vector with {nnz} non-zero elements exceeds the index's max_nnz of {cap}")]
    TooManyNonZero {
        /// Non-zero elements of the row.
        nnz: usize,
        /// The capacity.
        cap: usize,
    },
    /// Indices not strictly increasing, or of another length than the values.
    #[error("sparse indices must be strictly increasing and match the values")]
    Unsorted,
}

/// Packs the pairs `(indices[i], values[i])` (zero values dropped) into a row of capacity `cap`.
pub fn pack(indices: &[u32], values: &[f32], cap: usize) -> Result<Vec<f32>, PackError> {
    if indices.len() != values.len() || indices.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PackError::Unsorted);
    }
    let pairs: Vec<(u32, f32)> =
        indices.iter().copied().zip(values.iter().copied()).filter(|&(_, v)| v != 0.0).collect();
    if pairs.len() > cap {
        return Err(PackError::TooManyNonZero { nnz: pairs.len(), cap });
    }
    let mut row = vec![0.0f32; row_words(cap)];
    row[0] = f32::from_bits(pairs.len() as u32);
    for (i, &(index, value)) in pairs.iter().enumerate() {
        row[1 + i] = f32::from_bits(index);
        row[1 + cap + i] = value;
    }
    Ok(row)
}

/// The non-zero pairs of a packed row: indices and values (empty for a malformed row).
pub fn pairs(row: &[f32]) -> (impl Iterator<Item = u32> + '_, &[f32]) {
    let cap = capacity_of(row.len()).unwrap_or(0);
    let nnz = if cap == 0 { 0 } else { (row[0].to_bits() as usize).min(cap) };
    let indices = row[1..=nnz].iter().map(|w| w.to_bits());
    (indices, &row[1 + cap..1 + cap + nnz])
}

/// Scales a packed row's values to unit L2 norm in place; `false` (row unchanged) for a zero row.
pub fn normalize_in_place(row: &mut [f32]) -> bool {
    let Some(cap) = capacity_of(row.len()) else { return false };
    let nnz = (row.first().map_or(0, |w| w.to_bits() as usize)).min(cap);
    let values = &mut row[1 + cap..1 + cap + nnz];
    let norm = values.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return false;
    }
    for v in values.iter_mut() {
        *v = (f64::from(*v) / norm) as f32;
    }
    true
}

/// A query prepared for packed rows: its sorted non-zero pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseQuery {
    indices: Vec<u32>,
    values: Vec<f32>,
}

impl SparseQuery {
    /// The query whose packed form is `row` (already in stored form: normalised for cosine).
    pub fn from_packed(row: &[f32]) -> Self {
        let (indices, values) = pairs(row);
        let indices: Vec<u32> = indices.collect();
        Self { indices, values: values.to_vec() }
    }

    /// Distance to the packed row `row` under `metric` (L2: squared; inner product: negated;
    /// cosine: `1 − q·r` over normalised rows; L1). Hamming and Jaccard do not apply to sparse
    /// vectors and give NaN.
    pub fn distance(&self, row: &[f32], metric: Metric) -> f32 {
        let (row_indices, row_values) = pairs(row);
        distance_of(self.indices.iter().copied(), &self.values, row_indices, row_values, metric)
    }
}

/// The distance between two packed rows under `metric` (as [`SparseQuery::distance`]).
pub fn distance_between(a: &[f32], b: &[f32], metric: Metric) -> f32 {
    let ((ai, av), (bi, bv)) = (pairs(a), pairs(b));
    distance_of(ai, av, bi, bv, metric)
}

/// The distance of two sparse vectors given as increasing indices with their values.
fn distance_of(
    a_indices: impl Iterator<Item = u32>,
    a_values: &[f32],
    b_indices: impl Iterator<Item = u32>,
    b_values: &[f32],
    metric: Metric,
) -> f32 {
    let (mut dot, mut l1_common, mut common_a, mut common_b) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
    let mut a = a_indices.zip(a_values).peekable();
    for (index, &b_value) in b_indices.zip(b_values) {
        while a.next_if(|&(i, _)| i < index).is_some() {}
        if let Some((_, &a_value)) = a.next_if(|&(i, _)| i == index) {
            dot += a_value * b_value;
            l1_common += (a_value - b_value).abs();
            common_a += a_value.abs();
            common_b += b_value.abs();
        }
    }
    match metric {
        Metric::L2 => {
            let norms: f32 = a_values.iter().chain(b_values).map(|v| v * v).sum();
            (norms - 2.0 * dot).max(0.0)
        }
        Metric::InnerProduct => -dot,
        Metric::Cosine => 1.0 - dot,
        Metric::L1 => {
            let total_a: f32 = a_values.iter().map(|v| v.abs()).sum();
            let total_b: f32 = b_values.iter().map(|v| v.abs()).sum();
            l1_common + (total_a - common_a) + (total_b - common_b)
        }
        Metric::Hamming | Metric::Jaccard => f32::NAN,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::store::Query;

    fn dense(indices: &[u32], values: &[f32], dims: usize) -> Vec<f32> {
        let mut out = vec![0.0; dims];
        for (&i, &v) in indices.iter().zip(values) {
            out[i as usize] = v;
        }
        out
    }

    fn sparse_vector(dims: u32, nnz: usize) -> impl Strategy<Value = (Vec<u32>, Vec<f32>)> {
        prop::collection::btree_map(0..dims, -4.0f32..4.0, 0..=nnz)
            .prop_map(|m| (m.keys().copied().collect(), m.values().copied().collect()))
    }

    proptest! {
        /// Every metric equals the dense kernels on the vectors the rows stand for.
        #[test]
        fn distances_equal_the_dense_ones(
            (qi, qv) in sparse_vector(60, 12),
            (ri, rv) in sparse_vector(60, 12),
            metric in prop::sample::select(vec![Metric::L2, Metric::InnerProduct, Metric::Cosine, Metric::L1]),
        ) {
            let (mut q, mut r) = (pack(&qi, &qv, 12).unwrap(), pack(&ri, &rv, 12).unwrap());
            let (mut dq, mut dr) = (dense(&qi, &qv, 60), dense(&ri, &rv, 60));
            if metric == Metric::Cosine {
                let ok = normalize_in_place(&mut q) && normalize_in_place(&mut r);
                prop_assume!(ok);
                crate::vector_math::normalize_in_place(&mut dq);
                crate::vector_math::normalize_in_place(&mut dr);
            }
            let expected = Query::prepared(dq, metric).distance_f32(&dr);
            let got = SparseQuery::from_packed(&q).distance(&r, metric);
            prop_assert!((expected - got).abs() <= 1e-4 * (1.0 + expected.abs()), "{metric:?}: {expected} vs {got}");
            let between = distance_between(&q, &r, metric);
            prop_assert!((expected - between).abs() <= 1e-4 * (1.0 + expected.abs()), "{metric:?}: {expected} vs {between}");
        }
    }

    #[test]
    fn packing_checks_capacity_and_order() {
        let row = pack(&[3, 7, 9], &[1.0, 0.0, -2.0], 4).unwrap();
        assert_eq!(row.len(), row_words(4));
        let (indices, values) = pairs(&row);
        assert_eq!((indices.collect::<Vec<_>>(), values), (vec![3, 9], &[1.0, -2.0][..]), "zeros are dropped");
        assert_eq!(pack(&[1, 2, 3], &[1.0; 3], 2), Err(PackError::TooManyNonZero { nnz: 3, cap: 2 }));
        assert_eq!(pack(&[2, 1], &[1.0; 2], 2), Err(PackError::Unsorted));
        assert_eq!(capacity_of(row_words(7)), Some(7));
        assert_eq!(capacity_of(4), None);
        let mut zero = pack(&[], &[], 3).unwrap();
        assert!(!normalize_in_place(&mut zero));
        assert_eq!(
            PackError::TooManyNonZero { nnz: 3, cap: 2 }.to_string(),
            "a sparse vector with 3 non-zero elements exceeds the index's max_nnz of 2"
        );
    }
}
