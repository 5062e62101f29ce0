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
//! - [`vector_math`]: element-wise operations and validation shared by the SQL types.
//!
//! Nothing in this crate calls PostgreSQL, allocates in PostgreSQL memory contexts or assumes the
//! thread it runs on: every function may be called from any thread.

pub mod bitset;
pub mod cancel;
pub mod format;
pub mod hnsw;
pub mod ivf;
pub mod kernels;
pub mod kmeans;
pub mod metric;
pub mod quant;
pub mod segment;
pub mod store;
#[cfg(test)]
pub(crate) mod testdata;
pub mod topk;
pub mod vector_math;
pub mod vector_text;

/// The largest number of dimensions a `vector` or `halfvec` value may have (pgvector's limit).
pub const MAX_DIMENSIONS: usize = 16_000;
