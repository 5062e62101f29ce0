//! A seeded random orthogonal rotation computed in `O(d log d)`, without padding the dimension.
//!
//! `ROUNDS` rounds, each: multiply every coordinate by a random sign, then apply the normalised
//! Walsh–Hadamard transform to a power-of-two window of `p = 2^⌊log2 d⌋` coordinates — the
//! first `p` coordinates on even rounds, the last `p` on odd rounds. Each step is orthogonal, so
//! the composition is an exact rotation (up to `f32` rounding); the overlapping windows mix every
//! coordinate into every other one when `d` is not a power of two (e.g. 384 = 256 + 128: windows
//! `0..256` and `128..384`). This is the structured "sign-flip + Hadamard" rotation used by
//! RaBitQ's and TurboQuant's reference code; the stored form is only the seed.
//!
//! The signs are derived from the seed with ChaCha8 (`rand_chacha`, whose output stream is
//! stable across platforms and versions), one `u64` per 64 signs, so a view reopened from disk
//! rebuilds the identical rotation.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Sign-flip + Hadamard rounds.
const ROUNDS: usize = 4;

/// A random rotation of `dims`-dimensional vectors.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rotation {
    dims: usize,
    window: usize,
    /// `ROUNDS × dims` signs (±1).
    signs: Vec<f32>,
}

impl Rotation {
    /// The rotation for `dims` (≥ 1) and `seed`.
    pub(crate) fn new(dims: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x726F_7461_7469_6F6E);
        let mut signs = Vec::with_capacity(ROUNDS * dims);
        let mut bits = 0u64;
        for i in 0..ROUNDS * dims {
            if i % 64 == 0 {
                bits = rng.next_u64();
            }
            signs.push(if (bits >> (i % 64)) & 1 == 1 { -1.0 } else { 1.0 });
        }
        let window = if dims == 0 { 0 } else { 1usize << (usize::BITS - 1 - dims.leading_zeros()) };
        Self { dims, window, signs }
    }

    /// Rotates `x` (of `dims` elements) in place. Panics on a length mismatch.
    pub(crate) fn apply(&self, x: &mut [f32]) {
        assert_eq!(x.len(), self.dims, "rotation of {} dimensions applied to {}", self.dims, x.len());
        let scale = 1.0 / (self.window as f32).sqrt();
        for round in 0..ROUNDS {
            for (v, s) in x.iter_mut().zip(&self.signs[round * self.dims..(round + 1) * self.dims]) {
                *v *= s;
            }
            let start = if round % 2 == 0 { 0 } else { self.dims - self.window };
            let window = &mut x[start..start + self.window];
            fwht(window);
            for v in window.iter_mut() {
                *v *= scale;
            }
        }
    }
}

/// In-place unnormalised fast Walsh–Hadamard transform of a power-of-two length slice.
fn fwht(x: &mut [f32]) {
    let n = x.len();
    let mut h = 1;
    while h < n {
        for block in x.chunks_exact_mut(2 * h) {
            let (a, b) = block.split_at_mut(h);
            for (u, v) in a.iter_mut().zip(b.iter_mut()) {
                let (s, d) = (*u + *v, *u - *v);
                *u = s;
                *v = d;
            }
        }
        h *= 2;
    }
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    #[test]
    fn is_orthogonal_and_deterministic() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for dims in [1usize, 2, 3, 7, 64, 100, 384, 385, 768] {
            let rot = Rotation::new(dims, 42);
            assert_eq!(rot, Rotation::new(dims, 42));
            let a: Vec<f32> = (0..dims).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let b: Vec<f32> = (0..dims).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let (mut ra, mut rb) = (a.clone(), b.clone());
            rot.apply(&mut ra);
            rot.apply(&mut rb);
            let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| f64::from(*p) * f64::from(*q)).sum::<f64>();
            let tol = 1e-5 * dims as f64;
            assert!((dot(&a, &a) - dot(&ra, &ra)).abs() < tol, "norm changed at d = {dims}");
            assert!((dot(&a, &b) - dot(&ra, &rb)).abs() < tol, "inner product changed at d = {dims}");
            if dims >= 64 {
                // Mixing: a basis vector spreads over (almost) every coordinate.
                let mut e = vec![0.0f32; dims];
                e[dims - 1] = 1.0;
                rot.apply(&mut e);
                let spread = e.iter().filter(|v| v.abs() > 1e-4).count();
                assert!(spread >= dims * 3 / 4, "basis vector reached only {spread} of {dims} coordinates");
            }
        }
        assert_ne!(Rotation::new(16, 1), Rotation::new(16, 2));
    }
}
