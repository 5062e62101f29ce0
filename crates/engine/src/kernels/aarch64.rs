//! aarch64 NEON kernels (4 lanes of `f32`). `f16` inputs are widened four at a time through the
//! `half` crate (stable Rust has no NEON `f16` vector types yet) and then use the `f32` arithmetic.
//!
//! NEON is mandatory on aarch64, but detection still goes through `is_aarch64_feature_detected!`
//! so that the contract ("a table is handed out only when its features are present") has no
//! exceptions.

use std::arch::aarch64::{float32x4_t, vabsq_f32, vaddq_f32, vaddvq_f32, vdupq_n_f32, vfmaq_f32, vld1q_f32, vsubq_f32};

use half::f16;

use super::{DotAndNorms, KernelTable, SimdLevel};

pub(super) fn supported_tables() -> Vec<&'static KernelTable> {
    if std::arch::is_aarch64_feature_detected!("neon") {
        vec![&NEON_TABLE]
    } else {
        Vec::new()
    }
}

static NEON_TABLE: KernelTable = KernelTable {
    level: SimdLevel::Neon,
    l2_squared_f32: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { l2_squared_f32(a, b) }
    },
    dot_f32: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { dot_f32(a, b) }
    },
    l1_f32: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { l1_f32(a, b) }
    },
    dot_and_norms_f32: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { dot_and_norms_f32(a, b) }
    },
    l2_squared_f16: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { l2_squared_f16(a, b) }
    },
    dot_f16: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { dot_f16(a, b) }
    },
    l1_f16: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { l1_f16(a, b) }
    },
    dot_and_norms_f16: |a, b| {
        // SAFETY: NEON_TABLE is only handed out after NEON was detected.
        unsafe { dot_and_norms_f16(a, b) }
    },
    // Graph traversal over 8-bit codes is bound by memory, not arithmetic: the reference.
    dot_u8: super::scalar::dot_u8,
    dot_u4: super::scalar::dot_u4,
};

#[target_feature(enable = "neon")]
unsafe fn load_f32(p: *const f32) -> float32x4_t {
    // SAFETY: the kernels call this only at `i + 4 <= n` inside a slice of `n` floats, so 4 floats
    // are readable at `p`; `vld1q_f32` accepts any alignment of `f32`.
    unsafe { vld1q_f32(p) }
}

#[target_feature(enable = "neon")]
unsafe fn load_f16(p: *const f16) -> float32x4_t {
    // SAFETY: the kernels call this only at `i + 4 <= n` inside a slice of `n` halves, so 4 halves
    // are readable at `p`, which points into that slice (aligned, initialised `f16`s).
    let halves = unsafe { std::slice::from_raw_parts(p, 4) };
    let widened = [halves[0].to_f32(), halves[1].to_f32(), halves[2].to_f32(), halves[3].to_f32()];
    // SAFETY: `widened` holds 4 floats.
    unsafe { vld1q_f32(widened.as_ptr()) }
}

#[target_feature(enable = "neon")]
fn zero() -> float32x4_t {
    vdupq_n_f32(0.0)
}

fn tail<T: Copy>(a: &[T], b: &[T], widen: impl Fn(T) -> f32, term: impl Fn(f32, f32) -> f32) -> f32 {
    a.iter().zip(b).map(|(&x, &y)| term(widen(x), widen(y))).sum()
}

macro_rules! neon_kernels {
    (elem = $elem:ty, widen = $widen:expr, load = $load:ident,
     names = ($l2:ident, $dot:ident, $l1:ident, $dn:ident)) => {
        #[target_feature(enable = "neon")]
        unsafe fn $l2(a: &[$elem], b: &[$elem]) -> f32 {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let (mut acc0, mut acc1) = (zero(), zero());
            let mut i = 0;
            // SAFETY: each load reads 4 elements at `i` or `i + 4`, and `i + 8 <= n` (or `i + 4 <= n`).
            unsafe {
                while i + 8 <= n {
                    let d0 = vsubq_f32($load(pa.add(i)), $load(pb.add(i)));
                    let d1 = vsubq_f32($load(pa.add(i + 4)), $load(pb.add(i + 4)));
                    acc0 = vfmaq_f32(acc0, d0, d0);
                    acc1 = vfmaq_f32(acc1, d1, d1);
                    i += 8;
                }
                if i + 4 <= n {
                    let d0 = vsubq_f32($load(pa.add(i)), $load(pb.add(i)));
                    acc0 = vfmaq_f32(acc0, d0, d0);
                    i += 4;
                }
            }
            vaddvq_f32(vaddq_f32(acc0, acc1)) + tail(&a[i..n], &b[i..n], $widen, |x, y| (x - y) * (x - y))
        }

        #[target_feature(enable = "neon")]
        unsafe fn $dot(a: &[$elem], b: &[$elem]) -> f32 {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let (mut acc0, mut acc1) = (zero(), zero());
            let mut i = 0;
            // SAFETY: `n` is the shorter length and each load of 4 elements at `j` follows a check of
            // `j + 4 <= n` (the loop conditions), so every read is inside both slices.
            unsafe {
                while i + 8 <= n {
                    acc0 = vfmaq_f32(acc0, $load(pa.add(i)), $load(pb.add(i)));
                    acc1 = vfmaq_f32(acc1, $load(pa.add(i + 4)), $load(pb.add(i + 4)));
                    i += 8;
                }
                if i + 4 <= n {
                    acc0 = vfmaq_f32(acc0, $load(pa.add(i)), $load(pb.add(i)));
                    i += 4;
                }
            }
            vaddvq_f32(vaddq_f32(acc0, acc1)) + tail(&a[i..n], &b[i..n], $widen, |x, y| x * y)
        }

        #[target_feature(enable = "neon")]
        unsafe fn $l1(a: &[$elem], b: &[$elem]) -> f32 {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let mut acc = zero();
            let mut i = 0;
            // SAFETY: `n` is the shorter length and each load of 4 elements at `j` follows a check of
            // `j + 4 <= n` (the loop conditions), so every read is inside both slices.
            unsafe {
                while i + 4 <= n {
                    acc = vaddq_f32(acc, vabsq_f32(vsubq_f32($load(pa.add(i)), $load(pb.add(i)))));
                    i += 4;
                }
            }
            vaddvq_f32(acc) + tail(&a[i..n], &b[i..n], $widen, |x, y| (x - y).abs())
        }

        #[target_feature(enable = "neon")]
        unsafe fn $dn(a: &[$elem], b: &[$elem]) -> DotAndNorms {
            let n = a.len().min(b.len());
            let (pa, pb) = (a.as_ptr(), b.as_ptr());
            let (mut dot, mut norm_a, mut norm_b) = (zero(), zero(), zero());
            let mut i = 0;
            // SAFETY: `n` is the shorter length and each load of 4 elements at `j` follows a check of
            // `j + 4 <= n` (the loop conditions), so every read is inside both slices.
            unsafe {
                while i + 4 <= n {
                    let (x, y) = ($load(pa.add(i)), $load(pb.add(i)));
                    dot = vfmaq_f32(dot, x, y);
                    norm_a = vfmaq_f32(norm_a, x, x);
                    norm_b = vfmaq_f32(norm_b, y, y);
                    i += 4;
                }
            }
            let mut out = DotAndNorms { dot: vaddvq_f32(dot), norm_a: vaddvq_f32(norm_a), norm_b: vaddvq_f32(norm_b) };
            for (&x, &y) in a[i..n].iter().zip(&b[i..n]) {
                let (x, y) = (($widen)(x), ($widen)(y));
                out.dot += x * y;
                out.norm_a += x * x;
                out.norm_b += y * y;
            }
            out
        }
    };
}

neon_kernels!(
    elem = f32,
    widen = |x: f32| x,
    load = load_f32,
    names = (l2_squared_f32, dot_f32, l1_f32, dot_and_norms_f32)
);
neon_kernels!(
    elem = f16,
    widen = f16::to_f32,
    load = load_f16,
    names = (l2_squared_f16, dot_f16, l1_f16, dot_and_norms_f16)
);
