//! Fast-scan lookup-table kernels over 4-bit sub-codes in a blocked layout.
//!
//! Every code is a sequence of `nibbles` 4-bit sub-codes (`nibbles` even). A sub-code covers
//! `4 / bits` dimensions: one dimension at 4 bits, two at 2 bits, four at 1 bit. A query turns
//! into one 16-entry table per sub-code (`T_m[v]` = the query's contribution when sub-code `m`
//! holds `v`), quantised to `u8` with one global step `delta` and a per-table offset, so
//! `Σ_m T_m[code_m] ≈ delta · Σ_m lut_m[code_m] + bias`.
//!
//! # Blocked layout
//!
//! Codes are stored in blocks of [`BLOCK`] = 32 vectors. A block is `pairs = nibbles / 2` rows of
//! 32 bytes; byte `j` of row `p` holds vector `j`'s sub-code `2p` in its low nibble and sub-code
//! `2p + 1` in its high nibble. A block is therefore `32 · pairs` bytes, and vector `i` lives in
//! block `i / 32` at column `i % 32`. The last block is zero-padded.
//!
//! # Query tables
//!
//! `nibbles × 32` bytes: table `m` at offset `32m`, its 16 entries stored twice (bytes `0..16`
//! and `16..32`) so that one 256-bit load feeds `vpshufb` in both 128-bit lanes.
//!
//! # Kernels
//!
//! [`scan_block_scalar`] is the reference; the AVX2 kernel (runtime-detected, never required at
//! compile time) does two `vpshufb` lookups per 32-byte row, accumulates in 16-bit lanes (even
//! and odd vectors separately, the faiss trick) and flushes to 32-bit lanes every 128 rows, so the
//! sums are exact for any number of sub-codes. Both return identical `u32` sums.

// Every SIMD load and store here is unaligned (`loadu` / `storeu`), so pointer casts to vector
// types need no stricter alignment.
#![allow(clippy::cast_ptr_alignment)]

use std::sync::OnceLock;

/// Vectors per block.
pub(crate) const BLOCK: usize = 32;

/// Sub-codes per vector for `dims` dimensions at `bits` per dimension (rounded up to even).
pub(crate) fn nibbles(dims: usize, bits: u8) -> usize {
    let n = (dims * usize::from(bits)).div_ceil(4);
    n + n % 2
}

/// Writes vector `col`'s sub-code `m` (a value below 16) into a block.
#[inline]
pub(crate) fn set_nibble(block: &mut [u8], col: usize, m: usize, value: u8) {
    let byte = &mut block[(m / 2) * BLOCK + col];
    if m.is_multiple_of(2) {
        *byte = (*byte & 0xF0) | (value & 0x0F);
    } else {
        *byte = (*byte & 0x0F) | ((value & 0x0F) << 4);
    }
}

/// Reads vector `col`'s sub-code `m` from a block.
#[cfg(test)]
pub(crate) fn get_nibble(block: &[u8], col: usize, m: usize) -> u8 {
    let byte = block[(m / 2) * BLOCK + col];
    if m.is_multiple_of(2) {
        byte & 0x0F
    } else {
        byte >> 4
    }
}

/// A query's quantised lookup tables.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lut {
    /// `nibbles × 32` bytes (see the module docs).
    pub(crate) bytes: Vec<u8>,
    /// Value of one table unit.
    pub(crate) delta: f32,
    /// `Σ_m min_v T_m[v]`.
    pub(crate) bias: f32,
}

/// Builds the tables for `q` (one value per dimension) where dimension value `k` (a `bits`-bit
/// code) reconstructs to `levels[k]` (sorted ascending): `T_m[v] = Σ_t q[m·per + t] ·
/// levels[(v >> t·bits) & mask]`.
///
/// Closed form, no float tables: a dimension's contribution is smallest at the lowest level when
/// its query value is ≥ 0 and at the highest otherwise, so `min_v T_m[v] = Σ_t min(q·lo, q·hi)`
/// and `T_m[v] − min = Σ_t |q| · (distance of its level from the minimising end)`.
pub(crate) fn build_lut(q: &[f32], bits: u8, levels: &[f32], nibbles: usize) -> Lut {
    let per = 4 / usize::from(bits);
    let mask = (1usize << bits) - 1;
    debug_assert!(levels.windows(2).all(|w| w[0] <= w[1]), "levels must be sorted");
    let (bottom, top) = (levels[0], levels[mask]);
    // For nibble position t and nibble value v: distance of the level from each end.
    let mut up = [[0f32; 16]; 4];
    let mut down = [[0f32; 16]; 4];
    for t in 0..per {
        for v in 0..16 {
            let level = levels[(v >> (t * usize::from(bits))) & mask];
            up[t][v] = level - bottom;
            down[t][v] = top - level;
        }
    }
    let coord = |i: usize| q.get(i).copied().unwrap_or(0.0);
    let mut range = 0f32;
    let mut bias = 0f64;
    for m in 0..nibbles {
        let mut spread = 0f32;
        for t in 0..per {
            let x = coord(m * per + t);
            spread += x.abs();
            bias += f64::from(if x >= 0.0 { x * bottom } else { x * top });
        }
        range = range.max(spread * (top - bottom));
    }
    let delta = if range > 0.0 && range.is_finite() { range / 255.0 } else { 1.0 };
    let inv = 1.0 / delta;
    let mut bytes = vec![0u8; nibbles * 32];
    for (m, out) in bytes.chunks_exact_mut(32).enumerate() {
        // 0.5: round half up when truncating below (`f32::round` is a libm call on baseline
        // x86-64).
        let mut units = [0.5f32; 16];
        for t in 0..per {
            let x = coord(m * per + t);
            let a = x.abs() * inv;
            let distances = if x >= 0.0 { &up[t] } else { &down[t] };
            for (u, &d) in units.iter_mut().zip(distances) {
                *u += a * d;
            }
        }
        for (v, &u) in units.iter().enumerate() {
            // `as` saturates (and maps NaN to 0): no value can leave 0..=255.
            let unit = u.min(255.0) as u8;
            out[v] = unit;
            out[16 + v] = unit;
        }
    }
    Lut { bytes, delta, bias: bias as f32 }
}

/// A block kernel: `out[j] = Σ_m lut_m[sub-code m of vector j]` over `pairs` rows of a block.
pub(crate) type BlockKernel = fn(block: &[u8], lut: &[u8], pairs: usize, out: &mut [u32; BLOCK]);

/// Scalar reference kernel. Panics when `block` or `lut` is shorter than `pairs` needs.
pub(crate) fn scan_block_scalar(block: &[u8], lut: &[u8], pairs: usize, out: &mut [u32; BLOCK]) {
    *out = [0; BLOCK];
    for p in 0..pairs {
        let row = &block[p * BLOCK..(p + 1) * BLOCK];
        let lo = &lut[p * 64..p * 64 + 16];
        let hi = &lut[p * 64 + 32..p * 64 + 48];
        for (o, &c) in out.iter_mut().zip(row) {
            *o += u32::from(lo[usize::from(c & 15)]) + u32::from(hi[usize::from(c >> 4)]);
        }
    }
}

/// Every kernel this CPU can run, the scalar reference first (for tests and benchmarks).
pub(crate) fn supported_kernels() -> Vec<(&'static str, BlockKernel)> {
    let mut kernels: Vec<(&'static str, BlockKernel)> = vec![("scalar", scan_block_scalar)];
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        kernels.push(("avx2", x86::scan_block_avx2_checked));
    }
    kernels
}

/// The fastest kernel this CPU supports, chosen once per process.
pub(crate) fn kernel() -> BlockKernel {
    static KERNEL: OnceLock<BlockKernel> = OnceLock::new();
    *KERNEL.get_or_init(|| supported_kernels().last().expect("the scalar kernel is always supported").1)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi16, _mm256_add_epi32, _mm256_and_si256, _mm256_castsi256_si128, _mm256_cvtepu16_epi32,
        _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_set1_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8,
        _mm256_slli_epi16, _mm256_srli_epi16, _mm256_storeu_si256, _mm256_sub_epi16,
    };

    use super::BLOCK;

    /// Rows accumulated in 16-bit lanes before flushing: 2 lookups of at most 255 per row,
    /// 128 rows → at most 65,280 per lane, below 2¹⁶.
    const FLUSH_ROWS: usize = 128;

    /// Safe entry point stored in the kernel list.
    pub(super) fn scan_block_avx2_checked(block: &[u8], lut: &[u8], pairs: usize, out: &mut [u32; BLOCK]) {
        assert!(block.len() >= pairs * BLOCK && lut.len() >= pairs * 64, "block or table too short");
        // SAFETY: this function is only handed out by `supported_kernels` after
        // `is_x86_feature_detected!("avx2")` returned true, and the lengths were checked above.
        unsafe { scan_block_avx2(block, lut, pairs, out) }
    }

    /// # Safety
    /// The CPU must support AVX2, `block.len() >= 32 · pairs` and `lut.len() >= 64 · pairs`.
    #[target_feature(enable = "avx2")]
    unsafe fn scan_block_avx2(block: &[u8], lut: &[u8], pairs: usize, out: &mut [u32; BLOCK]) {
        let mask = _mm256_set1_epi8(0x0F);
        // u32 totals: even vectors of lane 0, of lane 1, odd vectors of lane 0, of lane 1.
        let mut totals = [_mm256_setzero_si256(); 4];
        let mut p = 0;
        while p < pairs {
            let end = (p + FLUSH_ROWS).min(pairs);
            let mut even = _mm256_setzero_si256();
            let mut odd = _mm256_setzero_si256();
            while p < end {
                // SAFETY: p < pairs, so bytes 32p..32p+32 of `block` and 64p..64p+64 of `lut`
                // are in bounds (caller contract); unaligned loads have no alignment needs.
                let (codes, lo_table, hi_table) = unsafe {
                    (
                        _mm256_loadu_si256(block.as_ptr().add(p * BLOCK).cast::<__m256i>()),
                        _mm256_loadu_si256(lut.as_ptr().add(p * 64).cast::<__m256i>()),
                        _mm256_loadu_si256(lut.as_ptr().add(p * 64 + 32).cast::<__m256i>()),
                    )
                };
                let lo = _mm256_and_si256(codes, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(codes, 4), mask);
                let a = _mm256_shuffle_epi8(lo_table, lo);
                let b = _mm256_shuffle_epi8(hi_table, hi);
                // 16-bit lane i holds vectors 2i (low byte) and 2i+1 (high byte): `even`
                // accumulates low + 256·high (mod 2¹⁶), `odd` the high bytes alone.
                even = _mm256_add_epi16(even, _mm256_add_epi16(a, b));
                odd = _mm256_add_epi16(odd, _mm256_add_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8)));
                p += 1;
            }
            let even = _mm256_sub_epi16(even, _mm256_slli_epi16(odd, 8));
            totals[0] = _mm256_add_epi32(totals[0], _mm256_cvtepu16_epi32(_mm256_castsi256_si128(even)));
            totals[1] = _mm256_add_epi32(totals[1], _mm256_cvtepu16_epi32(_mm256_extracti128_si256(even, 1)));
            totals[2] = _mm256_add_epi32(totals[2], _mm256_cvtepu16_epi32(_mm256_castsi256_si128(odd)));
            totals[3] = _mm256_add_epi32(totals[3], _mm256_cvtepu16_epi32(_mm256_extracti128_si256(odd, 1)));
        }
        let mut lanes = [[0u32; 8]; 4];
        for (lane, total) in lanes.iter_mut().zip(totals) {
            // SAFETY: `lane` is 32 writable bytes; unaligned store.
            unsafe { _mm256_storeu_si256(lane.as_mut_ptr().cast::<__m256i>(), total) };
        }
        for i in 0..8 {
            out[2 * i] = lanes[0][i];
            out[16 + 2 * i] = lanes[1][i];
            out[2 * i + 1] = lanes[2][i];
            out[16 + 2 * i + 1] = lanes[3][i];
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn simd_kernels_equal_the_scalar_reference_on_odd_sizes() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        // Row counts around the 16-bit flush boundary (128) and odd ones; extreme tables too.
        for pairs in [0usize, 1, 2, 3, 7, 31, 63, 96, 127, 128, 129, 192, 255, 256, 257, 385, 768] {
            for extreme in [false, true] {
                let block: Vec<u8> = (0..pairs * BLOCK).map(|_| rng.gen()).collect();
                // Tables in the doubled layout: 16 entries, then the same 16 again.
                let lut: Vec<u8> = (0..pairs * 2)
                    .flat_map(|_| {
                        let table: Vec<u8> = (0..16).map(|_| if extreme { 255 } else { rng.gen() }).collect();
                        table.iter().chain(table.iter()).copied().collect::<Vec<u8>>()
                    })
                    .collect();
                let mut want = [0u32; BLOCK];
                scan_block_scalar(&block, &lut, pairs, &mut want);
                for (name, kernel) in supported_kernels() {
                    let mut got = [7u32; BLOCK];
                    kernel(&block, &lut, pairs, &mut got);
                    assert_eq!(got, want, "{name} kernel, {pairs} rows, extreme = {extreme}");
                }
            }
        }
    }

    #[test]
    fn scalar_kernel_matches_the_table_definition() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for (dims, bits) in [(5usize, 4u8), (13, 2), (17, 1), (384, 4), (383, 2), (385, 1)] {
            let n = nibbles(dims, bits);
            assert_eq!(n % 2, 0);
            let q: Vec<f32> = (0..dims).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let levels: Vec<f32> = (0..1 << bits).map(|k| k as f32 - 0.5 * ((1 << bits) - 1) as f32).collect();
            let lut = build_lut(&q, bits, &levels, n);
            let codes: Vec<Vec<u8>> =
                (0..BLOCK).map(|_| (0..dims).map(|_| rng.gen_range(0..1u8 << bits)).collect()).collect();
            let mut block = vec![0u8; n / 2 * BLOCK];
            let per = 4 / usize::from(bits);
            for (col, code) in codes.iter().enumerate() {
                for m in 0..n {
                    let v = (0..per)
                        .filter(|j| m * per + j < dims)
                        .map(|j| code[m * per + j] << (j * usize::from(bits)))
                        .sum::<u8>();
                    set_nibble(&mut block, col, m, v);
                    assert_eq!(get_nibble(&block, col, m), v);
                }
            }
            let mut sums = [0u32; BLOCK];
            scan_block_scalar(&block, &lut.bytes, n / 2, &mut sums);
            for (col, code) in codes.iter().enumerate() {
                let exact: f32 = code.iter().zip(&q).map(|(&k, &qd)| qd * levels[usize::from(k)]).sum();
                let approx = lut.delta * sums[col] as f32 + lut.bias;
                // Each table entry is rounded by at most delta/2.
                let bound = lut.delta * 0.5 * n as f32 + 1e-4;
                assert!((exact - approx).abs() <= bound, "d={dims} b={bits}: {exact} vs {approx} (bound {bound})");
            }
        }
    }
}
