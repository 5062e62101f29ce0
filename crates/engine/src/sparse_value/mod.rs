//! Values of the `sparsevec` SQL type, independent of PostgreSQL: the value itself and the checks
//! and computations behind every SQL function on it, with pgvector 0.8.6's error texts, in
//! pgvector's order (its `src/sparsevec.c`, `sparsevec_to_vector` in `src/vector.c` and
//! `sparsevec_to_halfvec` in `src/halfvec.c`; pgvector is under the PostgreSQL licence, and the
//! algorithms here follow it). pg_strata's V1 functions only move datums in and out and raise the
//! [`VectorError`]s returned here.
//!
//! - [`text`]: `{1:1.5,3:2}/5` (1-based indices) input and output;
//! - [`binary`]: the send/recv message;
//! - [`ops`]: distances, norm, normalisation and the btree order;
//! - this module: the value ([`SparseVec`] owned, [`SparseRef`] borrowed), its checks, the stored
//!   layout, casts to and from `vector`/`halfvec` and arrays, and `typmod_in`.
//!
//! Stored layout (identical to pgvector's, so dumps and binary COPY interoperate; native byte
//! order, as PostgreSQL stores datums):
//!
//! ```text
//! offset 0        u32      varlena header (4-byte form; total size)
//! offset 4        i32      dimensions
//! offset 8        i32      nnz: number of non-zero elements
//! offset 12       i32      unused, always 0
//! offset 16       [i32]    nnz indices, 0-based, strictly ascending
//! offset 16+4nnz  [f32]    nnz values, finite and non-zero
//! ```

pub mod binary;
pub mod ops;
pub mod text;

use crate::vector_math::check_finite;
use crate::vector_value::{check_dimension_count, check_typmod, typmod_in_for, SparseError, VectorError, VectorType};

/// The SQL type name, used in error messages.
pub const NAME: &str = "sparsevec";

/// The largest number of dimensions a `sparsevec` may have (pgvector's `SPARSEVEC_MAX_DIM`).
pub const MAX_SPARSE_DIMENSIONS: u32 = 1_000_000_000;

/// The largest number of non-zero elements a `sparsevec` may have (pgvector's
/// `SPARSEVEC_MAX_NNZ`).
pub const MAX_SPARSE_NNZ: usize = 16_000;

/// Bytes before the first index of a stored value (varlena header, dimensions, nnz, unused).
pub const SPARSE_HEADER_BYTES: usize = 16;

/// A borrowed `sparsevec`: `dim` dimensions, of which those at `indices` (0-based) hold `values`
/// and all others are zero.
///
/// A value made by [`SparseRef::new`] (or borrowed from a [`SparseVec`]) keeps the type's rules:
/// `1 <= dim <= 1e9`, at most 16000 and at most `dim` non-zero elements, indices strictly
/// ascending in `[0, dim)`, values finite and non-zero. [`SparseRef::from_stored`] trusts a stored
/// value for them (PostgreSQL only stores values made by these functions); the functions on it
/// never read out of bounds whatever it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SparseRef<'a> {
    dim: i32,
    indices: &'a [i32],
    values: &'a [f32],
}

/// An owned `sparsevec`, keeping the same rules as [`SparseRef`].
#[derive(Debug, Clone, PartialEq)]
pub struct SparseVec {
    dim: i32,
    indices: Vec<i32>,
    values: Vec<f32>,
}

impl<'a> SparseRef<'a> {
    /// Checks every rule of the type, in pgvector's `sparsevec_recv` order: dimensions, the
    /// non-zero count, each index in turn (bounds, order, duplicates), each value in turn
    /// (finite, non-zero).
    ///
    /// # Panics
    /// When `indices` and `values` differ in length.
    pub fn new(dim: i32, indices: &'a [i32], values: &'a [f32]) -> Result<Self, VectorError> {
        assert_eq!(indices.len(), values.len(), "a sparsevec has as many values as indices");
        check_dimensions(i64::from(dim))?;
        check_nnz(i64::try_from(indices.len()).unwrap_or(i64::MAX), dim)?;
        check_indices(indices, dim)?;
        for &value in values {
            check_value(value)?;
        }
        Ok(Self { dim, indices, values })
    }

    /// A value read from storage, trusted to keep the type's rules (not checked).
    ///
    /// # Panics
    /// When `indices` and `values` differ in length (a corrupt datum).
    pub fn from_stored(dim: i32, indices: &'a [i32], values: &'a [f32]) -> Self {
        assert_eq!(indices.len(), values.len(), "a sparsevec has as many values as indices");
        Self { dim, indices, values }
    }

    /// A stored datum (the whole varlena, header included, as [`SparseRef::write_stored`] lays
    /// it out), borrowed without copying; `None` when the bytes are not 4-byte aligned or their
    /// length does not match the nnz field. The contents are trusted as in
    /// [`SparseRef::from_stored`].
    pub fn read_stored(datum: &'a [u8]) -> Option<Self> {
        let header = datum.get(4..SPARSE_HEADER_BYTES)?;
        let field = |at: usize| i32::from_ne_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        let (dim, nnz) = (field(0), usize::try_from(field(4)).ok()?);
        if nnz > MAX_SPARSE_NNZ || datum.len() != stored_size(nnz) {
            return None;
        }
        let body = &datum[SPARSE_HEADER_BYTES..];
        let indices: &[i32] = bytemuck::try_cast_slice(&body[..4 * nnz]).ok()?;
        let values: &[f32] = bytemuck::try_cast_slice(&body[4 * nnz..]).ok()?;
        Some(Self::from_stored(dim, indices, values))
    }

    /// Writes the value in the stored layout into `datum` (exactly [`stored_size`] bytes),
    /// leaving its first 4 bytes (the varlena header, the caller's) unchanged.
    ///
    /// # Panics
    /// When `datum` is not [`stored_size`]`(self.nnz())` bytes long.
    pub fn write_stored(self, datum: &mut [u8]) {
        assert_eq!(datum.len(), stored_size(self.nnz()), "a sparsevec datum of the right size");
        let nnz = i32::try_from(self.nnz()).expect("at most 16000 non-zero elements");
        let mut at = 4;
        for field in [self.dim, nnz, 0].into_iter().chain(self.indices.iter().copied()) {
            datum[at..at + 4].copy_from_slice(&field.to_ne_bytes());
            at += 4;
        }
        for value in self.values {
            datum[at..at + 4].copy_from_slice(&value.to_ne_bytes());
            at += 4;
        }
    }

    /// The number of dimensions.
    pub fn dim(self) -> i32 {
        self.dim
    }

    /// The number of non-zero elements.
    pub fn nnz(self) -> usize {
        self.indices.len()
    }

    /// The 0-based indices of the non-zero elements, ascending.
    pub fn indices(self) -> &'a [i32] {
        self.indices
    }

    /// The non-zero elements, in index order.
    pub fn values(self) -> &'a [f32] {
        self.values
    }

    /// An owned copy (named so as not to shadow `ToOwned::to_owned`, which copies the view).
    pub fn to_sparse_vec(self) -> SparseVec {
        SparseVec { dim: self.dim, indices: self.indices.to_vec(), values: self.values.to_vec() }
    }
}

impl SparseVec {
    /// Checks every rule of the type as [`SparseRef::new`] does and takes the parts.
    pub fn new(dim: i32, indices: Vec<i32>, values: Vec<f32>) -> Result<Self, VectorError> {
        SparseRef::new(dim, &indices, &values)?;
        Ok(Self { dim, indices, values })
    }

    /// The value borrowed.
    pub fn as_ref(&self) -> SparseRef<'_> {
        SparseRef { dim: self.dim, indices: &self.indices, values: &self.values }
    }

    /// The number of dimensions.
    pub fn dim(&self) -> i32 {
        self.dim
    }

    /// The 0-based indices of the non-zero elements, ascending.
    pub fn indices(&self) -> &[i32] {
        &self.indices
    }

    /// The non-zero elements, in index order.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// A value whose parts are known to keep the rules (built by this module's functions).
    pub(crate) fn from_checked_parts(dim: i32, indices: Vec<i32>, values: Vec<f32>) -> Self {
        debug_assert!(SparseRef::new(dim, &indices, &values).is_ok(), "{dim} {indices:?} {values:?}");
        Self { dim, indices, values }
    }
}

/// The size in bytes of a stored value with `nnz` non-zero elements, varlena header included.
pub fn stored_size(nnz: usize) -> usize {
    SPARSE_HEADER_BYTES + 8 * nnz
}

/// pgvector's `CheckDim` for `sparsevec`: 1 to [`MAX_SPARSE_DIMENSIONS`] dimensions.
pub fn check_dimensions(dims: i64) -> Result<(), VectorError> {
    check_dimension_count(NAME, MAX_SPARSE_DIMENSIONS, dims)
}

/// pgvector's `CheckNnz`: `0 <= nnz <= 16000` and `nnz <= dim`, checked in that order.
pub fn check_nnz(nnz: i64, dim: i32) -> Result<(), VectorError> {
    if nnz < 0 {
        return Err(SparseError::NegativeNonZero.into());
    }
    if nnz > MAX_SPARSE_NNZ as i64 {
        return Err(SparseError::TooManyNonZero.into());
    }
    if nnz > i64::from(dim) {
        return Err(SparseError::MoreElementsThanDimensions.into());
    }
    Ok(())
}

/// pgvector's `CheckIndex` for `indices[i]`, given that `indices[..i]` passed: in `[0, dim)`, then
/// not below the previous index, then not equal to it.
pub fn check_index(indices: &[i32], i: usize, dim: i32) -> Result<(), VectorError> {
    let index = indices[i];
    if index < 0 || index >= dim {
        return Err(SparseError::IndexOutOfBounds.into());
    }
    if let Some(&previous) = i.checked_sub(1).map(|p| &indices[p]) {
        if index < previous {
            return Err(SparseError::IndicesNotAscending.into());
        }
        if index == previous {
            return Err(SparseError::DuplicateIndices.into());
        }
    }
    Ok(())
}

fn check_indices(indices: &[i32], dim: i32) -> Result<(), VectorError> {
    (0..indices.len()).try_for_each(|i| check_index(indices, i, dim))
}

/// A stored value must be finite (pgvector's `CheckElement`) and non-zero (`sparsevec_recv`).
fn check_value(value: f32) -> Result<(), VectorError> {
    check_finite(&[value], NAME)?;
    if value == 0.0 {
        return Err(SparseError::ZeroInBinary.into());
    }
    Ok(())
}

/// `sparsevec_typmod_in`: exactly one integer in `1..=1e9`.
pub fn typmod_in(typmods: &[i32]) -> Result<i32, VectorError> {
    typmod_in_for(NAME, MAX_SPARSE_DIMENSIONS, typmods)
}

/// `sparsevec(sparsevec, integer, boolean)`, the cast that applies a typmod: the dimensions must
/// match it (`-1`: any).
pub fn apply_typmod(value: SparseRef<'_>, typmod: i32) -> Result<(), VectorError> {
    check_typmod(typmod, dim_count(value.dim))
}

/// A checked dimension count as `usize` (non-positive counts, which checked values never have,
/// become 0).
fn dim_count(dim: i32) -> usize {
    usize::try_from(dim).unwrap_or(0)
}

/// The non-zero `(index, value)` pairs of dense `values`, as the sparse value stores them.
fn non_zero(values: impl IntoIterator<Item = f32>) -> (Vec<i32>, Vec<f32>) {
    values
        .into_iter()
        .enumerate()
        .filter(|&(_, v)| v != 0.0)
        .map(|(i, v)| (i32::try_from(i).expect("dense values have fewer than 2^31 elements"), v))
        .unzip()
}

/// `vector_to_sparsevec` / `halfvec_to_sparsevec`: keeps the non-zero elements (`-0` is zero),
/// after pgvector's checks: `sparsevec` dimensions, the typmod, the non-zero count.
pub fn from_dense<K: VectorType>(elems: &[K::Elem], typmod: i32) -> Result<SparseVec, VectorError> {
    let dims = elems.len();
    check_dimensions(i64::try_from(dims).unwrap_or(i64::MAX))?;
    check_typmod(typmod, dims)?;
    let (indices, values) = non_zero(elems.iter().map(|&e| K::to_f32(e)));
    let dim = i32::try_from(dims).expect("checked against 1e9");
    check_nnz(i64::try_from(indices.len()).unwrap_or(i64::MAX), dim)?;
    Ok(SparseVec::from_checked_parts(dim, indices, values))
}

/// `sparsevec_to_vector` / `sparsevec_to_halfvec`: the dense elements, after K's dimension check
/// and the typmod; for `halfvec` each value is narrowed in index order (a value beyond ±65504 is
/// out of range; one that rounds to zero becomes zero, as in pgvector).
pub fn to_dense<K: VectorType>(value: SparseRef<'_>, typmod: i32) -> Result<Vec<K::Elem>, VectorError> {
    crate::vector_value::check_dimensions::<K>(dim_count(value.dim))?;
    check_typmod(typmod, dim_count(value.dim))?;
    let mut dense = vec![K::from_f32_unchecked(0.0); dim_count(value.dim)];
    for (&index, &v) in value.indices.iter().zip(value.values) {
        // Out-of-range indices (a corrupt datum) are skipped rather than read past the vector.
        if let Some(slot) = usize::try_from(index).ok().and_then(|i| dense.get_mut(i)) {
            *slot = crate::vector_value::narrow::<K>(v)?;
        }
    }
    Ok(dense)
}

/// The checks `array_to_sparsevec` makes on an array of `len` elements before it looks at their
/// type: `sparsevec` dimensions, then the typmod. (The caller checks before that that the array
/// is one-dimensional without nulls, and after it that its element type is `int4`, `float4`,
/// `float8` or `numeric`.)
pub fn check_array(len: usize, typmod: i32) -> Result<(), VectorError> {
    check_dimensions(i64::try_from(len).unwrap_or(i64::MAX))?;
    check_typmod(typmod, len)
}

/// `array_to_sparsevec` on the elements converted to `f32` as pgvector converts them (C's `(float)`
/// cast for `int4` and `float8`, `numeric_float4` for `numeric`): [`check_array`], then the
/// non-zero count (a NaN counts as non-zero), then every kept value checked for NaN and infinity.
pub fn from_array(values: &[f32], typmod: i32) -> Result<SparseVec, VectorError> {
    check_array(values.len(), typmod)?;
    let (indices, kept) = non_zero(values.iter().copied());
    let dim = i32::try_from(values.len()).expect("checked against 1e9");
    check_nnz(i64::try_from(indices.len()).unwrap_or(i64::MAX), dim)?;
    check_finite(&kept, NAME)?;
    Ok(SparseVec::from_checked_parts(dim, indices, kept))
}

#[cfg(test)]
mod tests;
