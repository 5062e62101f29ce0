//! # strata-engine
//!
//! The algorithmic core of pg_strata, free of any PostgreSQL dependency so that it can be tested
//! with plain `cargo test` and reused by benchmarks:
//!
//! - [`kernels`]: distance kernels (L2², inner product, cosine, L1) for `f32` and `f16` vectors with
//!   runtime SIMD dispatch (AVX-512, AVX2+FMA, NEON) and a scalar reference implementation;
//! - [`metric`]: the distance metrics an index can be built for, and how they map to SQL operators;
//! - [`vector_text`]: the pgvector-compatible text format (`[1,2.5,-3]`) — parsing with precise errors
//!   and shortest round-trip formatting;
//! - [`vector_math`]: element-wise operations and validation shared by the SQL types;
//! - [`vector_value`]: the `vector`/`halfvec` SQL types' values — element types, pgvector's checks and
//!   errors, binary format, aggregate state and the computations behind each SQL function;
//! - [`sparse_value`]: the `sparsevec` SQL type's values — text and binary formats, casts,
//!   distances, normalisation and order, as pgvector computes them;
//! - [`bit_value`]: pgvector's functions on `bit` strings — `binary_quantize`, Hamming and Jaccard
//!   distances.
//!
//! Nothing in this crate calls PostgreSQL, allocates in PostgreSQL memory contexts or assumes the
//! thread it runs on: every function may be called from any thread.

pub mod bit_rows;
pub mod bit_value;
pub mod bitset;
pub mod cancel;
pub mod filter;
pub mod format;
pub mod hnsw;
pub mod ivf;
pub mod kernels;
pub mod kmeans;
pub mod metric;
pub mod pool;
pub mod quant;
pub mod row_buffer;
pub mod row_hash;
pub mod segment;
pub mod sparse_rows;
pub mod sparse_value;
pub mod spill;
pub mod store;
#[cfg(test)]
pub(crate) mod testdata;
pub mod topk;
pub mod vector_math;
pub mod vector_text;
pub mod vector_value;

/// The largest number of dimensions a `vector` or `halfvec` value may have (pgvector's limit).
pub const MAX_DIMENSIONS: usize = 16_000;

/// A byte that is not the code of any value of a `#[repr(u8)]` configuration enum
/// ([`metric::Metric`], [`store::ElementKind`], [`segment::KindCode`]), as read from a segment's
/// META section, shared memory or an opclass support function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {code}")]
pub struct UnknownCode {
    /// What the code should name: `"metric"`, `"element type"` or `"segment kind"`.
    pub what: &'static str,
    /// The byte read.
    pub code: u8,
}

/// Implements `TryFrom<u8>` (with [`UnknownCode`] naming `$what`) for a `#[repr(u8)]` enum whose
/// `ALL` constant lists every value.
macro_rules! try_from_code {
    ($ty:ty, $what:literal) => {
        impl TryFrom<u8> for $ty {
            type Error = $crate::UnknownCode;

            fn try_from(code: u8) -> Result<Self, $crate::UnknownCode> {
                Self::ALL
                    .into_iter()
                    .find(|value| *value as u8 == code)
                    .ok_or($crate::UnknownCode { what: $what, code })
            }
        }
    };
}
pub(crate) use try_from_code;

#[cfg(test)]
mod tests {
    use crate::metric::Metric;
    use crate::segment::KindCode;
    use crate::store::{ColumnType, ElementKind};

    /// Each value's code is its position in `ALL` (the META section's numbering) and reads back.
    #[test]
    fn codes_round_trip() {
        fn check<T: Copy + PartialEq + std::fmt::Debug + TryFrom<u8, Error = crate::UnknownCode>>(
            all: &[T],
            code_of: fn(T) -> u8,
            unknown: &str,
        ) {
            for (code, &value) in all.iter().enumerate() {
                assert_eq!(code_of(value), code as u8);
                assert_eq!(T::try_from(code as u8), Ok(value));
            }
            assert_eq!(T::try_from(all.len() as u8).unwrap_err().to_string(), unknown);
        }
        check(&Metric::ALL, |m| m as u8, "unknown metric 6");
        check(&ColumnType::ALL, |c| c as u8, "unknown column type 4");
        check(&ElementKind::ALL, |e| e as u8, "unknown element type 4");
        check(&KindCode::ALL, |k| k as u8, "unknown segment kind 4");
    }
}
