//! Per-vector quantisation of a rotated unit direction `u` into `bits`-bit codes per dimension.
//!
//! Two codebooks share everything else (rotation, factors, tables, kernels):
//!
//! - [`Scheme::RaBitQ`] (extended RaBitQ, Gao et al. 2024): the uniform grid of levels
//!   `k − (2^b − 1)/2`, scaled per vector by the factor `t` that maximises `cos(ū, u)`; the
//!   estimator `⟨q, u⟩ ≈ ⟨q, ū⟩ / ⟨ū, u⟩` is unbiased for a random rotation. The best `t` is
//!   found exactly by sweeping the `d · (2^(b−1) − 1)` critical values where a coordinate moves to
//!   the next level.
//! - [`Scheme::Lloyd`] (TurboQuant-style): a fixed Lloyd–Max codebook for the `N(0, 1/d)`
//!   coordinates of a randomly rotated unit vector, each coordinate rounded to its nearest
//!   level; `corrected` applies the same `1/⟨ū, u⟩` rescaling as RaBitQ, otherwise `ū` itself is
//!   the (biased, MSE-optimal) estimate.

/// A codebook and estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// Extended RaBitQ: per-vector scaled uniform grid, corrected estimator (constructed by the
    /// measurement tests only).
    #[cfg_attr(not(test), allow(dead_code))]
    RaBitQ,
    /// Fixed Lloyd–Max Gaussian codebook (TurboQuant-style).
    Lloyd {
        /// Whether the estimator divides by `⟨ū, u⟩`.
        corrected: bool,
    },
}

impl Scheme {
    /// The scheme [`super::Quantizer::train`] uses (chosen by measurement, see the module docs).
    pub(crate) const DEFAULT: Self = Self::Lloyd { corrected: true };

    /// The stored identifier.
    pub(crate) fn id(self) -> u8 {
        match self {
            Self::RaBitQ => 0,
            Self::Lloyd { corrected: true } => 1,
            Self::Lloyd { corrected: false } => 2,
        }
    }

    /// The scheme with a stored identifier.
    #[cfg(test)]
    pub(crate) fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Self::RaBitQ),
            1 => Some(Self::Lloyd { corrected: true }),
            2 => Some(Self::Lloyd { corrected: false }),
            _ => None,
        }
    }

    /// The reconstruction value of each code `0..2^bits` for `dims` dimensions.
    pub(crate) fn levels(self, bits: u8, dims: usize) -> Vec<f32> {
        let count = 1usize << bits;
        match self {
            Self::RaBitQ => (0..count).map(|k| k as f32 - 0.5 * (count - 1) as f32).collect(),
            Self::Lloyd { .. } => {
                let half: &[f32] = match bits {
                    1 => &LLOYD_1,
                    2 => &LLOYD_2,
                    _ => &LLOYD_4,
                };
                let scale = 1.0 / (dims.max(1) as f32).sqrt();
                half.iter().rev().map(|&v| -v * scale).chain(half.iter().map(|&v| v * scale)).collect()
            }
        }
    }

    /// Quantises the unit vector `u` into `codes` (one code per dimension) and returns the
    /// estimator's scale `α` such that `⟨q, u⟩ ≈ α · Σ qᵢ · levels[codesᵢ]`.
    pub(crate) fn quantize(
        self,
        u: &[f32],
        bits: u8,
        levels: &[f32],
        codes: &mut [u8],
        scratch: &mut Vec<(f32, u32)>,
    ) -> f32 {
        match self {
            Self::RaBitQ => {
                let ip = rabitq(u, bits, codes, scratch);
                if ip > 0.0 {
                    1.0 / ip
                } else {
                    0.0
                }
            }
            Self::Lloyd { corrected } => {
                let mut ip = 0f64;
                // Levels are sorted: the nearest is found by binary search over the midpoints.
                let mut mids = [f32::INFINITY; 15];
                for (m, w) in mids.iter_mut().zip(levels.windows(2)) {
                    *m = 0.5 * (w[0] + w[1]);
                }
                let mids = &mids[..levels.len() - 1];
                for (c, &x) in codes.iter_mut().zip(u) {
                    let k = mids.partition_point(|&m| x > m);
                    *c = k as u8;
                    ip += f64::from(x) * f64::from(levels[k]);
                }
                match (corrected, ip > 0.0) {
                    (false, _) => 1.0,
                    (true, true) => (1.0 / ip) as f32,
                    (true, false) => 0.0,
                }
            }
        }
    }
}

/// Positive Lloyd–Max levels for the standard normal distribution (Max, 1960).
const LLOYD_1: [f32; 1] = [0.7979];
const LLOYD_2: [f32; 2] = [0.4528, 1.5104];
const LLOYD_4: [f32; 8] = [0.1284, 0.3881, 0.6568, 0.9424, 1.2562, 1.6180, 2.0690, 2.7326];

/// Extended RaBitQ: chooses codes `k ∈ 0..2^bits` maximising `cos(ū, u)` with
/// `ū = k − (2^bits − 1)/2`, writes them to `codes` and returns `⟨ū, u⟩` (0 for a zero `u`).
pub(crate) fn rabitq(u: &[f32], bits: u8, codes: &mut [u8], events: &mut Vec<(f32, u32)>) -> f32 {
    let half = 1usize << (bits - 1);
    let dims = u.len();
    // Level j (magnitude j + 1/2) for coordinate i holds while t·|uᵢ| ∈ [j, j+1): coordinate i
    // moves from level j−1 to j at t = j / |uᵢ|.
    events.clear();
    for (i, &x) in u.iter().enumerate() {
        let a = x.abs();
        if a > 0.0 {
            for j in 1..half {
                events.push((j as f32 / a, i as u32));
            }
        }
    }
    events.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let abs_sum: f64 = u.iter().map(|&x| f64::from(x.abs())).sum();
    let mut dot = 0.5 * abs_sum;
    let mut norm2 = 0.25 * dims as f64;
    let mut best = (dot / norm2.sqrt(), 0usize);
    let mut level = vec![0u32; if half > 1 { dims } else { 0 }];
    for (n, &(_, i)) in events.iter().enumerate() {
        let i = i as usize;
        level[i] += 1;
        dot += f64::from(u[i].abs());
        norm2 += 2.0 * f64::from(level[i]);
        let cos = dot / norm2.sqrt();
        if cos > best.0 {
            best = (cos, n + 1);
        }
    }
    level.fill(0);
    for &(_, i) in &events[..best.1] {
        level[i as usize] += 1;
    }
    let mut ip = 0f64;
    for (i, (&x, c)) in u.iter().zip(codes.iter_mut()).enumerate() {
        let j = if half > 1 { level[i] as usize } else { 0 };
        *c = if x >= 0.0 { (half + j) as u8 } else { (half - 1 - j) as u8 };
        ip += f64::from(x.abs()) * (j as f64 + 0.5);
    }
    ip as f32
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;

    fn unit(rng: &mut ChaCha8Rng, dims: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dims).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn rabitq_codes_are_optimal_against_a_grid_search_and_consistent() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut scratch = Vec::new();
        for bits in [1u8, 2, 4] {
            for dims in [1usize, 5, 64, 129] {
                let u = unit(&mut rng, dims);
                let mut codes = vec![0u8; dims];
                let ip = rabitq(&u, bits, &mut codes, &mut scratch);
                let levels = Scheme::RaBitQ.levels(bits, dims);
                let recon: Vec<f32> = codes.iter().map(|&k| levels[usize::from(k)]).collect();
                let dot: f32 = recon.iter().zip(&u).map(|(a, b)| a * b).sum();
                let norm = recon.iter().map(|a| a * a).sum::<f32>().sqrt();
                assert!((dot - ip).abs() < 1e-4, "returned ⟨ū,u⟩ is the codes' own");
                let cos = dot / norm;
                // No scale on a fine grid does better (nearest-level rounding at each t).
                let max_level = levels[levels.len() - 1];
                let max_u = u.iter().fold(0f32, |m, x| m.max(x.abs()));
                for step in 1..400 {
                    let t = step as f32 / 400.0 * 2.0 * max_level / max_u;
                    let alt: Vec<f32> = u
                        .iter()
                        .map(|&x| (x * t).clamp(-max_level, max_level))
                        .map(|y| levels.iter().copied().min_by(|a, b| (a - y).abs().total_cmp(&(b - y).abs())).unwrap())
                        .collect();
                    let n = alt.iter().map(|a| a * a).sum::<f32>().sqrt();
                    let c = alt.iter().zip(&u).map(|(a, b)| a * b).sum::<f32>() / n;
                    assert!(c <= cos + 1e-5, "b={bits} d={dims}: t={t} gives {c} > {cos}");
                }
                if bits == 4 && dims >= 64 {
                    assert!(cos > 0.98, "4-bit codes should be close: {cos}");
                }
            }
        }
    }

    #[test]
    fn lloyd_levels_are_sorted_and_symmetric() {
        for bits in [1u8, 2, 4] {
            let levels = Scheme::Lloyd { corrected: true }.levels(bits, 100);
            assert_eq!(levels.len(), 1 << bits);
            assert!(levels.windows(2).all(|w| w[0] < w[1]));
            assert!((levels[0] + levels[levels.len() - 1]).abs() < 1e-7);
        }
        for id in 0..3 {
            assert_eq!(Scheme::from_id(id).unwrap().id(), id);
        }
        assert!(Scheme::from_id(3).is_none());
    }
}
