//! x86-64 kernels: AVX2+FMA+F16C (8 lanes) and AVX-512F (16 lanes).
//!
//! Each `#[target_feature]` function is `unsafe` because calling it on a CPU without the feature is
//! undefined behaviour. They are reachable only through [`supported_tables`], which hands out a table
//! after `is_x86_feature_detected!` confirmed every feature it needs; the safe wrappers stored in
//! the tables rely on that.

use std::arch::x86_64::{
    __m128i, __m256, __m256i, __m512, _mm256_add_ps, _mm256_andnot_ps, _mm256_castps256_ps128, _mm256_cvtph_ps,
    _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256, _mm256_set1_ps, _mm256_setzero_ps,
    _mm256_sub_ps, _mm512_abs_ps, _mm512_add_ps, _mm512_cvtph_ps, _mm512_fmadd_ps, _mm512_loadu_ps,
    _mm512_reduce_add_ps, _mm512_setzero_ps, _mm512_sub_ps, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_loadu_si128,
    _mm_movehl_ps, _mm_shuffle_ps,
};
use std::arch::x86_64::{
    _mm256_and_si256, _mm256_cvtepi32_ps, _mm256_cvtepu8_epi32, _mm256_set1_epi32, _mm256_srli_epi32, _mm512_and_si512,
    _mm512_cvtepi32_ps, _mm512_cvtepu8_epi32, _mm512_set1_epi32, _mm512_srli_epi32, _mm_loadl_epi64,
};

use half::f16;

use super::{DotAndNorms, KernelTable, SimdLevel};

/// Kernel tables this CPU can run, slowest first.
/// A batch kernel: a query, rows of its length, one output a row.
pub(super) type RowsKernel = unsafe fn(&[f32], &[f32], &mut [f32]);

/// The batch form of the `f32` L2 kernel (`dot` false) or inner product kernel (`dot` true) of
/// the table of `level`, when it has one: the same values as calling the table's kernel per row.
pub(super) fn rows_kernel(level: SimdLevel, dot: bool) -> Option<RowsKernel> {
    match (level, dot) {
        (SimdLevel::Avx512, false) => Some(avx512::l2_squared_f32_rows),
        (SimdLevel::Avx512, true) => Some(avx512::dot_f32_rows),
        (SimdLevel::Avx2, false) => Some(avx2::l2_squared_f32_rows),
        (SimdLevel::Avx2, true) => Some(avx2::dot_f32_rows),
        _ => None,
    }
}

pub(super) fn supported_tables() -> Vec<&'static KernelTable> {
    let mut tables = Vec::new();
    let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c");
    if avx2 {
        tables.push(&AVX2_TABLE);
        if is_x86_feature_detected!("avx512f") {
            tables.push(&AVX512_TABLE);
        }
    }
    tables
}

static AVX2_TABLE: KernelTable = KernelTable {
    level: SimdLevel::Avx2,
    l2_squared_f32: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::l2_squared_f32(a, b) }
    },
    dot_f32: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::dot_f32(a, b) }
    },
    l1_f32: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::l1_f32(a, b) }
    },
    dot_and_norms_f32: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::dot_and_norms_f32(a, b) }
    },
    l2_squared_f16: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::l2_squared_f16(a, b) }
    },
    dot_f16: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::dot_f16(a, b) }
    },
    l1_f16: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::l1_f16(a, b) }
    },
    dot_and_norms_f16: |a, b| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::dot_and_norms_f16(a, b) }
    },
    dot_u8: |w, c| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::dot_u8(w, c) }
    },
    dot_u4: |w, c| {
        // SAFETY: AVX2_TABLE is only handed out after AVX2, FMA and F16C were detected.
        unsafe { avx2::dot_u4(w, c) }
    },
};

static AVX512_TABLE: KernelTable = KernelTable {
    level: SimdLevel::Avx512,
    l2_squared_f32: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::l2_squared_f32(a, b) }
    },
    dot_f32: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::dot_f32(a, b) }
    },
    l1_f32: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::l1_f32(a, b) }
    },
    dot_and_norms_f32: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::dot_and_norms_f32(a, b) }
    },
    l2_squared_f16: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::l2_squared_f16(a, b) }
    },
    dot_f16: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::dot_f16(a, b) }
    },
    l1_f16: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::l1_f16(a, b) }
    },
    dot_and_norms_f16: |a, b| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::dot_and_norms_f16(a, b) }
    },
    dot_u8: |w, c| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::dot_u8(w, c) }
    },
    dot_u4: |w, c| {
        // SAFETY: AVX512_TABLE is only handed out after AVX-512F (and AVX2/FMA/F16C) were detected.
        unsafe { avx512::dot_u4(w, c) }
    },
};

/// Scalar `f32` tail shared by the SIMD kernels (at most one vector width of elements).
fn tail<T: Copy>(a: &[T], b: &[T], widen: impl Fn(T) -> f32, term: impl Fn(f32, f32) -> f32) -> f32 {
    a.iter().zip(b).map(|(&x, &y)| term(widen(x), widen(y))).sum()
}

fn tail_dot_and_norms<T: Copy>(a: &[T], b: &[T], widen: impl Fn(T) -> f32) -> DotAndNorms {
    let mut out = DotAndNorms { dot: 0.0, norm_a: 0.0, norm_b: 0.0 };
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (widen(x), widen(y));
        out.dot += x * y;
        out.norm_a += x * x;
        out.norm_b += y * y;
    }
    out
}

/// Generates the four kernels of one element type for one instruction set. `$load` turns a pointer
/// to `$lanes` elements into a register of `f32`; `$zero`, `$add`, `$sub`, `$fmadd`, `$abs` and
/// `$hsum` are the matching register operations.
macro_rules! kernels {
    (
        features = $features:literal, elem = $elem:ty, widen = $widen:expr, lanes = $lanes:literal,
        load = $load:ident, zero = $zero:ident, add = $add:ident, sub = $sub:ident,
        fmadd = $fmadd:ident, abs = $abs:ident, hsum = $hsum:ident,
        names = ($l2:ident, $dot:ident, $l1:ident, $dn:ident)
    ) => {
        #[target_feature(enable = $features)]
        #[inline]
        pub(super) unsafe fn $l2(a: &[$elem], b: &[$elem]) -> f32 {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let (mut acc0, mut acc1) = ($zero(), $zero());
            let mut i = 0;
            // SAFETY: every load reads `$lanes` elements starting at `i`, and the loop conditions
            // keep `i + $lanes <= n`, so all reads are inside both slices.
            unsafe {
                while i + 2 * $lanes <= n {
                    let d0 = $sub($load(pa.add(i)), $load(pb.add(i)));
                    let d1 = $sub($load(pa.add(i + $lanes)), $load(pb.add(i + $lanes)));
                    acc0 = $fmadd(d0, d0, acc0);
                    acc1 = $fmadd(d1, d1, acc1);
                    i += 2 * $lanes;
                }
                if i + $lanes <= n {
                    let d0 = $sub($load(pa.add(i)), $load(pb.add(i)));
                    acc0 = $fmadd(d0, d0, acc0);
                    i += $lanes;
                }
            }
            $hsum($add(acc0, acc1)) + tail(&a[i..n], &b[i..n], $widen, |x, y| (x - y) * (x - y))
        }

        #[target_feature(enable = $features)]
        #[inline]
        pub(super) unsafe fn $dot(a: &[$elem], b: &[$elem]) -> f32 {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let (mut acc0, mut acc1) = ($zero(), $zero());
            let mut i = 0;
            // SAFETY: loads stay inside both slices (`i + $lanes <= n` before each load).
            unsafe {
                while i + 2 * $lanes <= n {
                    acc0 = $fmadd($load(pa.add(i)), $load(pb.add(i)), acc0);
                    acc1 = $fmadd($load(pa.add(i + $lanes)), $load(pb.add(i + $lanes)), acc1);
                    i += 2 * $lanes;
                }
                if i + $lanes <= n {
                    acc0 = $fmadd($load(pa.add(i)), $load(pb.add(i)), acc0);
                    i += $lanes;
                }
            }
            $hsum($add(acc0, acc1)) + tail(&a[i..n], &b[i..n], $widen, |x, y| x * y)
        }

        #[target_feature(enable = $features)]
        pub(super) unsafe fn $l1(a: &[$elem], b: &[$elem]) -> f32 {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let (mut acc0, mut acc1) = ($zero(), $zero());
            let mut i = 0;
            // SAFETY: loads stay inside both slices (`i + $lanes <= n` before each load).
            unsafe {
                while i + 2 * $lanes <= n {
                    acc0 = $add(acc0, $abs($sub($load(pa.add(i)), $load(pb.add(i)))));
                    acc1 = $add(acc1, $abs($sub($load(pa.add(i + $lanes)), $load(pb.add(i + $lanes)))));
                    i += 2 * $lanes;
                }
                if i + $lanes <= n {
                    acc0 = $add(acc0, $abs($sub($load(pa.add(i)), $load(pb.add(i)))));
                    i += $lanes;
                }
            }
            $hsum($add(acc0, acc1)) + tail(&a[i..n], &b[i..n], $widen, |x, y| (x - y).abs())
        }

        #[target_feature(enable = $features)]
        pub(super) unsafe fn $dn(a: &[$elem], b: &[$elem]) -> DotAndNorms {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let (mut dot, mut norm_a, mut norm_b) = ($zero(), $zero(), $zero());
            let mut i = 0;
            // SAFETY: loads stay inside both slices (`i + $lanes <= n` before each load).
            unsafe {
                while i + $lanes <= n {
                    let (x, y) = ($load(pa.add(i)), $load(pb.add(i)));
                    dot = $fmadd(x, y, dot);
                    norm_a = $fmadd(x, x, norm_a);
                    norm_b = $fmadd(y, y, norm_b);
                    i += $lanes;
                }
            }
            let rest = tail_dot_and_norms(&a[i..n], &b[i..n], $widen);
            DotAndNorms {
                dot: $hsum(dot) + rest.dot,
                norm_a: $hsum(norm_a) + rest.norm_a,
                norm_b: $hsum(norm_b) + rest.norm_b,
            }
        }
    };
}

/// Generates `dot_u8` (`Σ wᵢ·cᵢ`, `f32` weights against `u8` codes) for one instruction set:
/// `$load_codes` widens `$lanes` codes to a register of `f32`, the other operations are the
/// matching register operations of [`kernels!`].
macro_rules! dot_u8 {
    (
        features = $features:literal, lanes = $lanes:literal, load = $load:ident,
        load_codes = $load_codes:ident, zero = $zero:ident, add = $add:ident, fmadd = $fmadd:ident,
        hsum = $hsum:ident
    ) => {
        #[target_feature(enable = $features)]
        pub(super) unsafe fn dot_u8(w: &[f32], c: &[u8]) -> f32 {
            let n = w.len().min(c.len());
            let (pw, pc) = (w.as_ptr(), c.as_ptr());
            let (mut acc0, mut acc1) = ($zero(), $zero());
            let mut i = 0;
            // SAFETY: each step reads `$lanes` floats of `w` and `$lanes` bytes of `c` starting
            // at `i` (twice that in the unrolled loop), and the loop conditions keep
            // `i + $lanes <= n` (`i + 2 · $lanes <= n`), so all reads are inside both slices.
            unsafe {
                while i + 2 * $lanes <= n {
                    acc0 = $fmadd($load(pw.add(i)), $load_codes(pc.add(i)), acc0);
                    acc1 = $fmadd($load(pw.add(i + $lanes)), $load_codes(pc.add(i + $lanes)), acc1);
                    i += 2 * $lanes;
                }
                if i + $lanes <= n {
                    acc0 = $fmadd($load(pw.add(i)), $load_codes(pc.add(i)), acc0);
                    i += $lanes;
                }
            }
            $hsum($add(acc0, acc1)) + w[i..n].iter().zip(&c[i..n]).map(|(&x, &y)| x * f32::from(y)).sum::<f32>()
        }
    };
}

// Unaligned loads (`loadu`) are used throughout, so casting element pointers to vector pointers
// never requires the stricter alignment clippy warns about.
#[allow(clippy::cast_ptr_alignment)]
mod avx2 {
    use super::{
        __m128i, __m256, _mm256_add_ps, _mm256_andnot_ps, _mm256_castps256_ps128, _mm256_cvtepi32_ps,
        _mm256_cvtepu8_epi32, _mm256_cvtph_ps, _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps,
        _mm256_setzero_ps, _mm256_sub_ps, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_loadl_epi64, _mm_loadu_si128,
        _mm_movehl_ps, _mm_shuffle_ps, f16, tail, tail_dot_and_norms, DotAndNorms,
    };
    use super::{_mm256_and_si256, _mm256_set1_epi32, _mm256_srli_epi32};

    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load_f32(p: *const f32) -> __m256 {
        // SAFETY: the kernels call this only at `i + 8 <= n` inside a slice of `n` floats, so 8 floats
        // are readable at `p`; `loadu` accepts any alignment.
        unsafe { _mm256_loadu_ps(p) }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load_f16(p: *const f16) -> __m256 {
        // SAFETY: the kernels call this only at `i + 8 <= n` inside a slice of `n` halves, so 16 bytes
        // are readable at `p`; `loadu` accepts any alignment.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast::<__m128i>())) }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    fn abs(v: __m256) -> __m256 {
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), v)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum(v: __m256) -> f32 {
        let quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load_codes(p: *const u8) -> __m256 {
        // SAFETY: `dot_u8` calls this only at `i + 8 <= n` inside its code slice, so 8 bytes are
        // readable at `p`; `_mm_loadl_epi64` reads exactly 8, at any alignment.
        unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast::<__m128i>()))) }
    }

    /// `Σ wᵢ·cᵢ` over packed 4-bit codes (layout in [`crate::kernels::dot_u4`]): each half
    /// block's 8 bytes widen to 8 lanes once, the mask gives the low nibbles' codes and the
    /// shift the high ones'.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_u4(w: &[f32], c: &[u8]) -> f32 {
        let blocks = (w.len() / 32).min(c.len() / 16);
        let (pw, pc) = (w.as_ptr(), c.as_ptr());
        let low = _mm256_set1_epi32(15);
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for b in 0..blocks {
            for half in [0, 8] {
                // SAFETY: `b < blocks`, so bytes `16b + half .. 16b + half + 8` of `c` and floats
                // `32b + half .. 32b + half + 8` and `32b + 16 + half .. 32b + 24 + half` of `w`
                // lie inside both slices.
                let (bytes, w_low, w_high) = unsafe {
                    (
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64(pc.add(16 * b + half).cast::<__m128i>())),
                        _mm256_loadu_ps(pw.add(32 * b + half)),
                        _mm256_loadu_ps(pw.add(32 * b + 16 + half)),
                    )
                };
                acc0 = _mm256_fmadd_ps(w_low, _mm256_cvtepi32_ps(_mm256_and_si256(bytes, low)), acc0);
                acc1 = _mm256_fmadd_ps(w_high, _mm256_cvtepi32_ps(_mm256_srli_epi32::<4>(bytes)), acc1);
            }
        }
        hsum(_mm256_add_ps(acc0, acc1))
    }

    dot_u8!(
        features = "avx2,fma,f16c",
        lanes = 8,
        load = load_f32,
        load_codes = load_codes,
        zero = _mm256_setzero_ps,
        add = _mm256_add_ps,
        fmadd = _mm256_fmadd_ps,
        hsum = hsum
    );

    kernels!(
        features = "avx2,fma,f16c",
        elem = f32,
        widen = |x: f32| x,
        lanes = 8,
        load = load_f32,
        zero = _mm256_setzero_ps,
        add = _mm256_add_ps,
        sub = _mm256_sub_ps,
        fmadd = _mm256_fmadd_ps,
        abs = abs,
        hsum = hsum,
        names = (l2_squared_f32, dot_f32, l1_f32, dot_and_norms_f32)
    );
    kernels!(
        features = "avx2,fma,f16c",
        elem = f16,
        widen = f16::to_f32,
        lanes = 8,
        load = load_f16,
        zero = _mm256_setzero_ps,
        add = _mm256_add_ps,
        sub = _mm256_sub_ps,
        fmadd = _mm256_fmadd_ps,
        abs = abs,
        hsum = hsum,
        names = (l2_squared_f16, dot_f16, l1_f16, dot_and_norms_f16)
    );
    /// `l2_squared_f32` of `q` and each `q.len()`-long row of `rows`, into `out` (one value per
    /// row): the same function per row, called without the kernel table's indirection.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn l2_squared_f32_rows(q: &[f32], rows: &[f32], out: &mut [f32]) {
        for (o, r) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
            // SAFETY: this function enables the target features `l2_squared_f32` needs.
            *o = unsafe { l2_squared_f32(q, r) };
        }
    }

    /// `dot_f32` of `q` and each `q.len()`-long row of `rows`, into `out` (as above).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_f32_rows(q: &[f32], rows: &[f32], out: &mut [f32]) {
        for (o, r) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
            // SAFETY: this function enables the target features `dot_f32` needs.
            *o = unsafe { dot_f32(q, r) };
        }
    }
}

#[allow(clippy::cast_ptr_alignment)]
mod avx512 {
    use super::{
        __m128i, __m256i, __m512, _mm256_loadu_si256, _mm512_abs_ps, _mm512_add_ps, _mm512_cvtepi32_ps,
        _mm512_cvtepu8_epi32, _mm512_cvtph_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_reduce_add_ps,
        _mm512_setzero_ps, _mm512_sub_ps, _mm_loadu_si128, f16, tail, tail_dot_and_norms, DotAndNorms,
    };
    use super::{_mm512_and_si512, _mm512_set1_epi32, _mm512_srli_epi32};

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    unsafe fn load_f32(p: *const f32) -> __m512 {
        // SAFETY: the kernels call this only at `i + 16 <= n` inside a slice of `n` floats, so 16
        // floats are readable at `p`; `loadu` accepts any alignment.
        unsafe { _mm512_loadu_ps(p) }
    }

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    unsafe fn load_f16(p: *const f16) -> __m512 {
        // SAFETY: the kernels call this only at `i + 16 <= n` inside a slice of `n` halves, so 32
        // bytes are readable at `p`; `loadu` accepts any alignment.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast::<__m256i>())) }
    }

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    unsafe fn load_codes(p: *const u8) -> __m512 {
        // SAFETY: `dot_u8` calls this only at `i + 16 <= n` inside its code slice, so 16 bytes are
        // readable at `p`; `_mm_loadu_si128` reads exactly 16, at any alignment.
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast::<__m128i>()))) }
    }

    /// `Σ wᵢ·cᵢ` over packed 4-bit codes (layout in [`crate::kernels::dot_u4`]): a block's 16
    /// bytes widen to 16 lanes once, the mask gives the low nibbles' codes and the shift the high
    /// ones'.
    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    pub(super) unsafe fn dot_u4(w: &[f32], c: &[u8]) -> f32 {
        let blocks = (w.len() / 32).min(c.len() / 16);
        let (pw, pc) = (w.as_ptr(), c.as_ptr());
        let low = _mm512_set1_epi32(15);
        let (mut acc0, mut acc1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        for b in 0..blocks {
            // SAFETY: `b < blocks`, so bytes `16b .. 16b + 16` of `c` and floats `32b .. 32b + 32`
            // of `w` lie inside both slices.
            let (bytes, w_low, w_high) = unsafe {
                (
                    _mm512_cvtepu8_epi32(_mm_loadu_si128(pc.add(16 * b).cast::<__m128i>())),
                    _mm512_loadu_ps(pw.add(32 * b)),
                    _mm512_loadu_ps(pw.add(32 * b + 16)),
                )
            };
            acc0 = _mm512_fmadd_ps(w_low, _mm512_cvtepi32_ps(_mm512_and_si512(bytes, low)), acc0);
            acc1 = _mm512_fmadd_ps(w_high, _mm512_cvtepi32_ps(_mm512_srli_epi32::<4>(bytes)), acc1);
        }
        _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1))
    }

    dot_u8!(
        features = "avx512f,avx2,fma,f16c",
        lanes = 16,
        load = load_f32,
        load_codes = load_codes,
        zero = _mm512_setzero_ps,
        add = _mm512_add_ps,
        fmadd = _mm512_fmadd_ps,
        hsum = _mm512_reduce_add_ps
    );

    kernels!(
        features = "avx512f,avx2,fma,f16c",
        elem = f32,
        widen = |x: f32| x,
        lanes = 16,
        load = load_f32,
        zero = _mm512_setzero_ps,
        add = _mm512_add_ps,
        sub = _mm512_sub_ps,
        fmadd = _mm512_fmadd_ps,
        abs = _mm512_abs_ps,
        hsum = _mm512_reduce_add_ps,
        names = (l2_squared_f32, dot_f32, l1_f32, dot_and_norms_f32)
    );
    kernels!(
        features = "avx512f,avx2,fma,f16c",
        elem = f16,
        widen = f16::to_f32,
        lanes = 16,
        load = load_f16,
        zero = _mm512_setzero_ps,
        add = _mm512_add_ps,
        sub = _mm512_sub_ps,
        fmadd = _mm512_fmadd_ps,
        abs = _mm512_abs_ps,
        hsum = _mm512_reduce_add_ps,
        names = (l2_squared_f16, dot_f16, l1_f16, dot_and_norms_f16)
    );
    /// `l2_squared_f32` of `q` and each `q.len()`-long row of `rows`, into `out` (one value per
    /// row): the same function per row, called without the kernel table's indirection.
    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    pub(super) unsafe fn l2_squared_f32_rows(q: &[f32], rows: &[f32], out: &mut [f32]) {
        for (o, r) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
            // SAFETY: this function enables the target features `l2_squared_f32` needs.
            *o = unsafe { l2_squared_f32(q, r) };
        }
    }

    /// `dot_f32` of `q` and each `q.len()`-long row of `rows`, into `out` (as above).
    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    pub(super) unsafe fn dot_f32_rows(q: &[f32], rows: &[f32], out: &mut [f32]) {
        for (o, r) in out.iter_mut().zip(rows.chunks_exact(q.len())) {
            // SAFETY: this function enables the target features `dot_f32` needs.
            *o = unsafe { dot_f32(q, r) };
        }
    }
}
