//! The binary send/recv message of `sparsevec` (pgvector's `sparsevec_send` / `sparsevec_recv`),
//! all fields in network byte order:
//!
//! ```text
//! i32        dimensions
//! i32        nnz
//! i32        unused (0)
//! [i32; nnz] indices, 0-based, strictly ascending
//! [f32; nnz] values (bit patterns), non-zero and finite
//! ```

use crate::vector_value::{check_typmod, VectorError};

use super::{check_dimensions, check_index, check_nnz, check_value, SparseRef, SparseVec};

/// `sparsevec_send`: the binary message for `value`.
pub fn encode(value: SparseRef<'_>) -> Vec<u8> {
    let nnz = i32::try_from(value.nnz()).expect("at most 16000 non-zero elements");
    let mut out = Vec::with_capacity(12 + 8 * value.nnz());
    for field in [value.dim(), nnz, 0].into_iter().chain(value.indices().iter().copied()) {
        out.extend_from_slice(&field.to_be_bytes());
    }
    for v in value.values() {
        out.extend_from_slice(&v.to_bits().to_be_bytes());
    }
    out
}

/// `sparsevec_recv`: reads a value from the start of `message` with pgvector's checks in
/// pgvector's order — the three header fields are read, then the dimensions, the non-zero count,
/// the typmod and the unused field are checked; then each index is read and checked (bounds,
/// order, duplicates), then each value (NaN, infinity, zero). A message that ends early is
/// [`VectorError::InsufficientData`] where PostgreSQL's `pq_getmsgint` would raise it. Returns the
/// value and the number of bytes read (bytes after them are left for the caller to reject).
pub fn decode(message: &[u8], typmod: i32) -> Result<(SparseVec, usize), VectorError> {
    let mut at = 0;
    let mut take = || {
        let bytes: [u8; 4] =
            message.get(at..at + 4).and_then(|b| b.try_into().ok()).ok_or(VectorError::InsufficientData)?;
        at += 4;
        Ok::<_, VectorError>(bytes)
    };
    let dim = i32::from_be_bytes(take()?);
    let nnz = i32::from_be_bytes(take()?);
    let unused = i32::from_be_bytes(take()?);
    check_dimensions(i64::from(dim))?;
    check_nnz(i64::from(nnz), dim)?;
    check_typmod(typmod, usize::try_from(dim).expect("checked positive"))?;
    if unused != 0 {
        return Err(VectorError::UnusedNotZero(unused));
    }
    let nnz = usize::try_from(nnz).expect("checked non-negative");
    let mut indices = Vec::with_capacity(nnz);
    for i in 0..nnz {
        indices.push(i32::from_be_bytes(take()?));
        check_index(&indices, i, dim)?;
    }
    let mut values = Vec::with_capacity(nnz);
    for _ in 0..nnz {
        let value = f32::from_bits(u32::from_be_bytes(take()?));
        check_value(value)?;
        values.push(value);
    }
    Ok((SparseVec::from_checked_parts(dim, indices, values), at))
}
