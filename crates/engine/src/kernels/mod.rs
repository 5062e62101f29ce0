//! Distance kernels with runtime SIMD dispatch.
//!
//! Every kernel exists in a scalar version ([`scalar`]), which is the reference the SIMD versions are
//! tested against, and in SIMD versions selected once per process from what the CPU reports at run
//! time (`is_x86_feature_detected!` / `is_aarch64_feature_detected!`). Nothing here requires a CPU
//! feature at compile time: a binary built for baseline x86-64 runs everywhere and uses AVX-512 or
//! AVX2+FMA where they exist.
//!
//! Accuracy contract: the scalar kernels accumulate in `f64` and round once, so they are accurate to
//! about one `f32` ulp of the exact result. SIMD kernels accumulate in `f32` lanes; their absolute
//! error is bounded by `(n/4 + 16) · 2⁻²⁴ · Σ|termᵢ|` (the tests assert exactly this bound).
//!
//! The public functions panic when the two slices differ in length: callers (the SQL layer, index
//! kinds) check dimensions first and report a proper error; a mismatch reaching this point is a bug.

use std::sync::OnceLock;

use half::f16;

#[cfg(target_arch = "aarch64")]
mod aarch64;
pub mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

/// An instruction-set level a kernel table is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Portable Rust, the reference implementation.
    Scalar,
    /// ARMv8 Advanced SIMD (128-bit).
    Neon,
    /// x86-64 AVX2 with FMA and F16C (256-bit).
    Avx2,
    /// x86-64 AVX-512F (512-bit).
    Avx512,
}

/// `(a·b, a·a, b·b)`: everything cosine distance needs, computed in one pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DotAndNorms {
    /// Inner product of the two vectors.
    pub dot: f32,
    /// Squared Euclidean norm of the first vector.
    pub norm_a: f32,
    /// Squared Euclidean norm of the second vector.
    pub norm_b: f32,
}

impl DotAndNorms {
    /// Cosine distance `1 − a·b / (‖a‖‖b‖)`, clamped to `[0, 2]`; `NaN` when either norm is zero
    /// (pgvector's behaviour: a zero vector has no direction).
    #[inline]
    pub fn cosine_distance(self) -> f32 {
        self.cosine_distance_f64() as f32
    }

    /// [`DotAndNorms::cosine_distance`] computed and returned in `f64` (what SQL's `<=>` returns).
    #[inline]
    pub fn cosine_distance_f64(self) -> f64 {
        let denominator = (f64::from(self.norm_a) * f64::from(self.norm_b)).sqrt();
        let similarity = f64::from(self.dot) / denominator;
        if similarity.is_nan() {
            return f64::NAN;
        }
        1.0 - similarity.clamp(-1.0, 1.0)
    }
}

/// One implementation of every kernel for one [`SimdLevel`]. Only tables whose level the running
/// CPU supports are ever handed out, which is what makes calling their function pointers sound.
#[derive(Debug)]
pub struct KernelTable {
    /// The instruction set these kernels use.
    pub level: SimdLevel,
    /// Squared Euclidean distance of two `f32` vectors of equal length.
    pub l2_squared_f32: fn(&[f32], &[f32]) -> f32,
    /// Inner product of two `f32` vectors of equal length.
    pub dot_f32: fn(&[f32], &[f32]) -> f32,
    /// Manhattan (taxicab) distance of two `f32` vectors of equal length.
    pub l1_f32: fn(&[f32], &[f32]) -> f32,
    /// Inner product and both squared norms of two `f32` vectors of equal length.
    pub dot_and_norms_f32: fn(&[f32], &[f32]) -> DotAndNorms,
    /// Squared Euclidean distance of two `f16` vectors of equal length.
    pub l2_squared_f16: fn(&[f16], &[f16]) -> f32,
    /// Inner product of two `f16` vectors of equal length.
    pub dot_f16: fn(&[f16], &[f16]) -> f32,
    /// Manhattan distance of two `f16` vectors of equal length.
    pub l1_f16: fn(&[f16], &[f16]) -> f32,
    /// Inner product and both squared norms of two `f16` vectors of equal length.
    pub dot_and_norms_f16: fn(&[f16], &[f16]) -> DotAndNorms,
    /// Inner product `Σ wᵢ·cᵢ` of `f32` weights with `u8` codes of equal length (8-bit scalar
    /// codes against a prepared query).
    pub dot_u8: fn(&[f32], &[u8]) -> f32,
    /// Inner product of `f32` weights with 4-bit codes packed two a byte in blocks of 32
    /// ([`dot_u4`] states the layout); the weights are twice as many as the bytes, a multiple
    /// of 32.
    pub dot_u4: fn(&[f32], &[u8]) -> f32,
}

/// Every kernel table the running CPU supports, the scalar reference first and the fastest last.
pub fn supported_tables() -> Vec<&'static KernelTable> {
    let mut tables = vec![&scalar::TABLE];
    #[cfg(target_arch = "x86_64")]
    tables.extend(x86::supported_tables());
    #[cfg(target_arch = "aarch64")]
    tables.extend(aarch64::supported_tables());
    tables
}

/// The fastest kernel table this CPU supports, chosen once per process.
pub fn active() -> &'static KernelTable {
    static ACTIVE: OnceLock<&'static KernelTable> = OnceLock::new();
    ACTIVE.get_or_init(|| *supported_tables().last().expect("the scalar table is always supported"))
}

#[inline]
#[track_caller]
fn check_lengths(a: usize, b: usize) {
    assert_eq!(a, b, "distance kernels need vectors of equal length");
}

/// Squared Euclidean distance `Σ (aᵢ − bᵢ)²`.
#[inline]
pub fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
    check_lengths(a.len(), b.len());
    (active().l2_squared_f32)(a, b)
}

/// [`l2_squared`] of `query` and each `query.len()`-long row of `rows`, into `out` (one value a
/// row, bit for bit what [`l2_squared`] gives): exact scans call it on blocks of rows, so that
/// the kernel is chosen once a block and inlined into the loop where the CPU's table has a batch
/// form (x86: AVX2, AVX-512).
///
/// # Panics
/// When `query` is empty or `rows` does not hold `out.len()` rows of `query.len()` values.
pub fn l2_squared_rows(query: &[f32], rows: &[f32], out: &mut [f32]) {
    rows_with(query, rows, out, false, active().l2_squared_f32);
}

/// [`dot`] of `query` and each `query.len()`-long row of `rows`, into `out`; as
/// [`l2_squared_rows`].
///
/// # Panics
/// As [`l2_squared_rows`].
pub fn dot_rows(query: &[f32], rows: &[f32], out: &mut [f32]) {
    rows_with(query, rows, out, true, active().dot_f32);
}

fn rows_with(query: &[f32], rows: &[f32], out: &mut [f32], dot: bool, single: fn(&[f32], &[f32]) -> f32) {
    assert!(
        !query.is_empty() && rows.len() == out.len() * query.len(),
        "distance kernels need rows of the query's length"
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(batch) = x86::rows_kernel(active().level, dot) {
        // SAFETY: `active()` hands out only tables whose instruction set the CPU reported, and
        // `rows_kernel` returns the batch kernel of that table's level, which needs no more.
        unsafe { batch(query, rows, out) };
        return;
    }
    let _ = dot;
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(query.len())) {
        *o = single(query, row);
    }
}

/// Inner product `Σ aᵢ·bᵢ`.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    check_lengths(a.len(), b.len());
    (active().dot_f32)(a, b)
}

/// Manhattan distance `Σ |aᵢ − bᵢ|`.
#[inline]
pub fn l1(a: &[f32], b: &[f32]) -> f32 {
    check_lengths(a.len(), b.len());
    (active().l1_f32)(a, b)
}

/// Inner product and both squared norms in one pass.
#[inline]
pub fn dot_and_norms(a: &[f32], b: &[f32]) -> DotAndNorms {
    check_lengths(a.len(), b.len());
    (active().dot_and_norms_f32)(a, b)
}

/// Cosine distance (see [`DotAndNorms::cosine_distance`]).
#[inline]
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    dot_and_norms(a, b).cosine_distance()
}

/// Squared Euclidean distance of two `f16` vectors, computed in `f32`.
#[inline]
pub fn l2_squared_f16(a: &[f16], b: &[f16]) -> f32 {
    check_lengths(a.len(), b.len());
    (active().l2_squared_f16)(a, b)
}

/// Inner product of two `f16` vectors, computed in `f32`.
#[inline]
pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    check_lengths(a.len(), b.len());
    (active().dot_f16)(a, b)
}

/// Manhattan distance of two `f16` vectors, computed in `f32`.
#[inline]
pub fn l1_f16(a: &[f16], b: &[f16]) -> f32 {
    check_lengths(a.len(), b.len());
    (active().l1_f16)(a, b)
}

/// Inner product and both squared norms of two `f16` vectors in one pass.
#[inline]
pub fn dot_and_norms_f16(a: &[f16], b: &[f16]) -> DotAndNorms {
    check_lengths(a.len(), b.len());
    (active().dot_and_norms_f16)(a, b)
}

/// Cosine distance of two `f16` vectors.
#[inline]
pub fn cosine_distance_f16(a: &[f16], b: &[f16]) -> f32 {
    dot_and_norms_f16(a, b).cosine_distance()
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests;

/// Inner product `Σ wᵢ·cᵢ` of `f32` weights with `u8` codes (see
/// [`crate::hnsw::TraversalCodes`]).
#[inline]
pub fn dot_u8(weights: &[f32], codes: &[u8]) -> f32 {
    check_lengths(weights.len(), codes.len());
    (active().dot_u8)(weights, codes)
}

/// The bytes one block of [`dot_u4`] codes takes: 32 four-bit codes.
pub const U4_BLOCK_BYTES: usize = 16;

/// Inner product `Σ wᵢ·cᵢ` of `f32` weights with 4-bit codes packed in blocks of 32 codes in
/// [`U4_BLOCK_BYTES`] bytes: in block `b`, byte `j` holds code `32b + j` in its low nibble and
/// code `32b + 16 + j` in its high nibble (so a 16-lane register widens one block's bytes once
/// and takes both halves with a mask and a shift). Panics unless `weights.len()` is
/// `2 · codes.len()` and `codes.len()` a multiple of [`U4_BLOCK_BYTES`]; callers pad rows with
/// zero weights.
#[inline]
pub fn dot_u4(weights: &[f32], codes: &[u8]) -> f32 {
    assert!(
        weights.len() == 2 * codes.len() && codes.len().is_multiple_of(U4_BLOCK_BYTES),
        "4-bit codes come in whole blocks of 32 with twice as many weights as bytes"
    );
    (active().dot_u4)(weights, codes)
}
