//! The trained quantizer, encoded codes (owned and borrowed), query preparation, the estimate
//! scan and the exact rerank shared by [`super::QuantizedFlat`] and [`crate::ivf`].

use std::ops::Range;

use rayon::prelude::*;

use super::encode::Scheme;
use super::fastscan::{self, Lut, BLOCK};
use super::rotation::Rotation;
use super::sections::SectionError;
use super::{QuantError, QuantizerParams, SearchError};
use crate::bitset::{Bitset, RowPredicate};
use crate::metric::Metric;
use crate::store::{Query, VectorStore};
use crate::topk::{Neighbor, TopK};

/// Rows averaged (evenly strided) to estimate the centre.
const CENTER_SAMPLE: usize = 65_536;

/// A trained quantizer: dimension, bits, metric, the seeded rotation and the rotated centre `c₀`
/// (mean of the rows). Small (`O(dims)`), cheap to clone.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantizer {
    dims: usize,
    bits: u8,
    seed: u64,
    metric: Metric,
    scheme: Scheme,
    center: Vec<f32>,
    rotation: Rotation,
    levels: Vec<f32>,
}

impl Quantizer {
    /// Trains on `store`: the centre is the mean of (at most 65,536 evenly strided) rows.
    /// Deterministic for equal inputs. Errors: bits not 1, 2 or 4.
    pub fn train(store: &VectorStore<'_>, params: &QuantizerParams) -> Result<Self, QuantError> {
        Self::train_with(store, params, Scheme::DEFAULT)
    }

    pub(crate) fn train_with(
        store: &VectorStore<'_>,
        params: &QuantizerParams,
        scheme: Scheme,
    ) -> Result<Self, QuantError> {
        check_bits(params.bits)?;
        if !store.metric().quantizable() {
            return Err(QuantError::UnsupportedMetric(store.metric()));
        }
        let dims = store.dims();
        let mut mean = vec![0f64; dims];
        let rows = store.len();
        let take = rows.min(CENTER_SAMPLE);
        for i in 0..take {
            let row = store.row_f32(i * rows / take);
            for (m, &v) in mean.iter_mut().zip(row.iter()) {
                *m += f64::from(v);
            }
        }
        let mut center: Vec<f32> =
            mean.iter().map(|&m| if take > 0 { (m / take as f64) as f32 } else { 0.0 }).collect();
        let rotation = Rotation::new(dims, params.seed);
        rotation.apply(&mut center);
        Ok(Self::from_parts(dims, params.bits, params.seed, store.metric(), scheme, center))
    }

    /// Assembles a quantizer from stored parts (`center` already rotated).
    pub(crate) fn from_parts(
        dims: usize,
        bits: u8,
        seed: u64,
        metric: Metric,
        scheme: Scheme,
        center: Vec<f32>,
    ) -> Self {
        let rotation = Rotation::new(dims, seed);
        let levels = scheme.levels(bits, dims);
        Self { dims, bits, seed, metric, scheme, center, rotation, levels }
    }

    /// Dimensions of the vectors.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Bits per dimension (1, 2 or 4).
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// The rotation seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The metric the per-vector factors are computed for.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The centre `c₀`, rotated (`dims` values).
    pub fn center(&self) -> &[f32] {
        &self.center
    }

    pub(crate) fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Bytes of one vector's code (`pairs`): `⌈dims · bits / 8⌉` rounded up to whole 4-bit pairs.
    pub fn code_bytes(&self) -> usize {
        fastscan::nibbles(self.dims, self.bits) / 2
    }

    /// Rotates a vector (`dims` values).
    pub(crate) fn rotate(&self, x: &[f32]) -> Vec<f32> {
        let mut r = x.to_vec();
        self.rotation.apply(&mut r);
        r
    }

    /// Encodes every row of `store` in row order, relative to the centre.
    /// Errors: the store has other dimensions or another metric than the quantizer.
    pub fn encode(&self, store: &VectorStore<'_>) -> Result<QuantizedCodes, QuantError> {
        self.encode_cancellable(store, &crate::cancel::Cancel::default())
    }

    /// [`Quantizer::encode`], skipping the remaining blocks of rows once `cancel` is requested:
    /// the codes are then incomplete, and the caller, which polls `cancel`, discards them.
    pub fn encode_cancellable(
        &self,
        store: &VectorStore<'_>,
        cancel: &crate::cancel::Cancel,
    ) -> Result<QuantizedCodes, QuantError> {
        self.check(store)?;
        Ok(self.encode_positions(store, store.len(), |p| p, |_| &self.center, cancel))
    }

    pub(crate) fn check(&self, store: &VectorStore<'_>) -> Result<(), QuantError> {
        if store.dims() != self.dims {
            return Err(QuantError::DimensionMismatch { expected: self.dims, actual: store.dims() });
        }
        if store.metric() != self.metric {
            return Err(QuantError::MetricMismatch);
        }
        Ok(())
    }

    /// Encodes `n` positions: position `p` holds row `row_of(p)` relative to the rotated centre
    /// `center_of(p)`. Parallel over blocks in the current rayon pool. Once `cancel` is requested
    /// the remaining blocks are skipped (left zero): the caller checks `cancel` and discards the
    /// result.
    pub(crate) fn encode_positions<'c, R, C>(
        &'c self,
        store: &VectorStore<'_>,
        n: usize,
        row_of: R,
        center_of: C,
        cancel: &crate::cancel::Cancel,
    ) -> QuantizedCodes
    where
        R: Fn(usize) -> usize + Sync,
        C: Fn(usize) -> &'c [f32] + Sync,
    {
        let nibbles = fastscan::nibbles(self.dims, self.bits);
        let stride = nibbles / 2 * BLOCK;
        let mut codes = vec![0u8; n.div_ceil(BLOCK) * stride];
        let mut factors = vec![0f32; 2 * n];
        let mut errors = vec![0f32; n];
        let per = 4 / usize::from(self.bits);
        let blocks =
            codes.par_chunks_mut(stride).zip(factors.par_chunks_mut(2 * BLOCK)).zip(errors.par_chunks_mut(BLOCK));
        blocks.enumerate().for_each_init(
            || (vec![0u8; nibbles * per], Vec::new()),
            |(dim_codes, scratch), (b, ((block, fac), err))| {
                if cancel.is_requested() {
                    return;
                }
                for col in 0..fac.len() / 2 {
                    let pos = b * BLOCK + col;
                    let coded = self.encode_one(&store.row_f32(row_of(pos)), center_of(pos), dim_codes, scratch);
                    fac[2 * col] = coded.add;
                    fac[2 * col + 1] = coded.scale;
                    err[col] = coded.error;
                    for (m, group) in dim_codes.chunks_exact(per).enumerate() {
                        let v = group
                            .iter()
                            .enumerate()
                            .fold(0u8, |acc, (j, &k)| acc | (k << (j * usize::from(self.bits))));
                        fastscan::set_nibble(block, col, m, v);
                    }
                }
            },
        );
        QuantizedCodes { dims: self.dims, bits: self.bits, len: n, codes, factors, errors: Some(errors) }
    }

    /// Codes one row `x` (unrotated) against the rotated centre `c`.
    /// With `r = Px − c`, `u = r/‖r‖` and the estimate `⟨v, u⟩ ≈ α·⟨v, ū⟩`:
    /// `⟨q, x⟩ = ⟨q, c⟩ + ⟨Pq − c₀, r⟩ + ⟨c₀, r⟩`, so (L2) `add = ‖x‖² − 2⟨c₀, r⟩`,
    /// `scale = −2‖r‖α`; (inner product, cosine) `add = −⟨c₀, r⟩`, `scale = −‖r‖α`. The error
    /// factor is `|scale| / α · ‖αū − u‖` (see [`RowCode::error`]).
    fn encode_one(&self, x: &[f32], c: &[f32], dim_codes: &mut [u8], scratch: &mut Vec<(f32, u32)>) -> RowCode {
        let norm_x2: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let mut r = self.rotate(x);
        for (v, &cv) in r.iter_mut().zip(c) {
            *v -= cv;
        }
        let c0_r: f64 = r.iter().zip(&self.center).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
        let norm_r = r.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt();
        dim_codes.fill(0);
        let alpha = if norm_r > 0.0 {
            for v in &mut r {
                *v = (f64::from(*v) / norm_r) as f32;
            }
            f64::from(self.scheme.quantize(&r, self.bits, &self.levels, &mut dim_codes[..self.dims], scratch))
        } else {
            0.0
        };
        // ‖αū − u‖: how far the estimator's direction is from the row's (0 for a zero residual).
        let direction_error = if norm_r > 0.0 {
            r.iter()
                .zip(&dim_codes[..self.dims])
                .map(|(&u, &code)| {
                    let d = alpha * f64::from(self.levels[usize::from(code)]) - f64::from(u);
                    d * d
                })
                .sum::<f64>()
                .sqrt()
        } else {
            0.0
        };
        let scale = norm_r * alpha;
        let (add, scale, factor) = match self.metric {
            Metric::L2 => (norm_x2 - 2.0 * c0_r, -2.0 * scale, 2.0),
            Metric::InnerProduct | Metric::Cosine => (-c0_r, -scale, 1.0),
            Metric::L1 | Metric::Hamming | Metric::Jaccard => unreachable!("quantizers refuse L1 (train_with)"),
        };
        // Rounded up so that the stored factor never understates the f64 one.
        let error = (factor * norm_r * direction_error) as f32;
        RowCode { add: add as f32, scale: scale as f32, error: error.next_up() }
    }

    /// Rotates the query and builds its tables (of `Pq − c₀`).
    pub(crate) fn prepare(&self, query: &Query) -> PreparedQuery {
        let rotated = self.rotate(query.values());
        let centered: Vec<f32> = rotated.iter().zip(&self.center).map(|(q, c)| q - c).collect();
        let nibbles = fastscan::nibbles(self.dims, self.bits);
        let lut = fastscan::build_lut(&centered, self.bits, &self.levels, nibbles);
        let centred_norm = centered.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt() as f32;
        let base = match self.metric {
            Metric::L2 => query.values().iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() as f32,
            Metric::InnerProduct => 0.0,
            Metric::Cosine => 1.0,
            Metric::L1 | Metric::Hamming | Metric::Jaccard => unreachable!("quantizers refuse L1 (train_with)"),
        };
        PreparedQuery { rotated, lut, base, centred_norm, nibbles }
    }

    /// The per-centre term of the estimate: `−2⟨q, c⟩` (L2) or `−⟨q, c⟩`.
    pub(crate) fn center_constant(&self, prepared: &PreparedQuery, c: &[f32]) -> f32 {
        let dot: f64 = prepared.rotated.iter().zip(c).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
        match self.metric {
            Metric::L2 => (-2.0 * dot) as f32,
            Metric::InnerProduct | Metric::Cosine => (-dot) as f32,
            Metric::L1 | Metric::Hamming | Metric::Jaccard => unreachable!("quantizers refuse L1 (train_with)"),
        }
    }
}

pub(crate) fn check_bits(bits: u8) -> Result<(), QuantError> {
    if matches!(bits, 1 | 2 | 4) {
        Ok(())
    } else {
        Err(QuantError::UnsupportedBits(bits))
    }
}

/// One row's factors ([`Quantizer::encode_positions`]).
#[derive(Debug, Clone, Copy)]
struct RowCode {
    /// The estimate's per-row constant.
    add: f32,
    /// The factor of the table sum.
    scale: f32,
    /// The row's error factor `e`: `|estimate − distance| ≤ e · |⟨v, d⟩| / ‖d‖` where `v = Pq − c₀`
    /// and `d = αū − u` is the estimator's direction error; so `e · ‖v‖` bounds it for every
    /// query, and, since a random rotation leaves `d` a random direction against `v`, about
    /// `e · ‖v‖ / √(dims − 1)` is its typical size ([`Certainty`]). Excludes the tables' rounding.
    error: f32,
}

/// How sure a rerank's lower bounds must be ([`CodesView::lower_bounds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Certainty {
    /// Worst-case bounds: a row whose lower bound is above the `k`-th exact distance cannot be in
    /// the top `k`, whatever the query (for searches that promise exact answers: every IVF list
    /// probed).
    Exact,
    /// Bounds that hold but for [`PROBABLE_DEVIATIONS`] standard deviations of a row's estimation
    /// error (its direction error against the query, and the tables' rounding, as independent
    /// errors): tighter in many dimensions, where the worst case is far from the typical one.
    Probable,
}

/// The deviations a [`Certainty::Probable`] bound allows (a normal deviate beyond 4 has
/// probability 6·10⁻⁵).
pub const PROBABLE_DEVIATIONS: f32 = 4.0;

/// A query rotated and turned into tables.
#[derive(Debug, Clone)]
pub(crate) struct PreparedQuery {
    pub(crate) rotated: Vec<f32>,
    pub(crate) lut: Lut,
    pub(crate) base: f32,
    /// `‖Pq − c₀‖`, what a row's error factor is multiplied by.
    pub(crate) centred_norm: f32,
    /// Sub-codes summed per row (the tables' rounding adds up over them).
    pub(crate) nibbles: usize,
}

/// Encoded vectors (owned): blocked 4-bit sub-codes, two `f32` factors per vector and, for codes
/// encoded since error factors exist, one error factor per vector (see [`Certainty`]).
/// Guarantees `codes.len() == ⌈len/32⌉ · 32 · code_bytes`, `factors.len() == 2 · len` and
/// `errors.len() == len` when present.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedCodes {
    dims: usize,
    bits: u8,
    len: usize,
    codes: Vec<u8>,
    factors: Vec<f32>,
    errors: Option<Vec<f32>>,
}

impl QuantizedCodes {
    /// The blocked code bytes, moved out (no copy), for serialisation.
    pub(crate) fn into_code_blocks(self) -> Vec<u8> {
        self.codes
    }

    /// Number of encoded vectors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no vector is encoded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A borrowed view (no copy).
    pub fn view(&self) -> CodesView<'_> {
        CodesView {
            dims: self.dims,
            bits: self.bits,
            len: self.len,
            pairs: fastscan::nibbles(self.dims, self.bits) / 2,
            codes: &self.codes,
            factors: &self.factors,
            errors: self.errors.as_deref(),
            extremes: FactorExtremes::of(&self.factors, self.errors.as_deref()),
        }
    }

    /// All code bytes, in the blocked layout of the module docs.
    pub fn code_blocks(&self) -> &[u8] {
        &self.codes
    }

    /// Per-vector `(add, scale)` factors, interleaved.
    pub fn factors(&self) -> &[f32] {
        &self.factors
    }

    /// Per-vector error factors (see [`Certainty`]), when the codes have them.
    pub fn errors(&self) -> Option<&[f32]> {
        self.errors.as_deref()
    }
}

/// A borrowed, validated view of encoded vectors (from [`QuantizedCodes::view`] or a section).
#[derive(Debug, Clone, Copy)]
pub struct CodesView<'a> {
    dims: usize,
    bits: u8,
    len: usize,
    pairs: usize,
    codes: &'a [u8],
    factors: &'a [f32],
    errors: Option<&'a [f32]>,
    extremes: FactorExtremes,
}

/// The largest factors of a set of codes: what no row's bound slack exceeds, so that a scan can
/// pass over most rows with one comparison of their estimate ([`LowerBounds::at_most`]).
#[derive(Debug, Clone, Copy, Default)]
struct FactorExtremes {
    /// The largest `|add|`.
    add: f32,
    /// The largest `|scale|`.
    scale: f32,
    /// The largest error factor (∞ when one is damaged: negative or NaN).
    error: f32,
}

impl FactorExtremes {
    /// One pass over the factors (`O(rows)`, at open).
    fn of(factors: &[f32], errors: Option<&[f32]>) -> Self {
        let mut out = Self::default();
        for pair in factors.chunks_exact(2) {
            out.add = out.add.max(pair[0].abs());
            out.scale = out.scale.max(pair[1].abs());
        }
        for &e in errors.unwrap_or(&[]) {
            out.error = if e >= 0.0 { out.error.max(e) } else { f32::INFINITY };
        }
        // NaN factors compare false above: treat any as unbounded.
        if !(out.add.is_finite() && out.scale.is_finite()) {
            out = Self { add: f32::INFINITY, scale: f32::INFINITY, error: f32::INFINITY };
        }
        out
    }
}

impl<'a> CodesView<'a> {
    /// Validates lengths: `codes` must hold `⌈len/32⌉` blocks, `factors` `2·len` values and
    /// `errors`, when given, `len` values (a damaged one — negative or NaN — only widens its
    /// row's bound to everything: [`LowerBounds::of`]).
    #[allow(clippy::too_many_arguments)] // each section with its tag
    pub(crate) fn new(
        dims: usize,
        bits: u8,
        len: usize,
        codes: &'a [u8],
        factors: &'a [f32],
        errors: Option<&'a [f32]>,
        codes_tag: u32,
        factors_tag: u32,
        errors_tag: u32,
    ) -> Result<Self, SectionError> {
        let pairs = fastscan::nibbles(dims, bits) / 2;
        let want_codes = len.div_ceil(BLOCK).checked_mul(pairs * BLOCK).ok_or(SectionError::Overflow)?;
        if codes.len() != want_codes {
            return Err(SectionError::Length { tag: codes_tag, expected: want_codes, actual: codes.len() });
        }
        let want_factors = len.checked_mul(2).ok_or(SectionError::Overflow)?;
        if factors.len() != want_factors {
            return Err(SectionError::Length {
                tag: factors_tag,
                expected: want_factors * 4,
                actual: factors.len() * 4,
            });
        }
        if let Some(errors) = errors {
            if errors.len() != len {
                return Err(SectionError::Length { tag: errors_tag, expected: len * 4, actual: errors.len() * 4 });
            }
        }
        let extremes = FactorExtremes::of(factors, errors);
        Ok(Self { dims, bits, len, pairs, codes, factors, errors, extremes })
    }

    /// Per-vector error factors, when the codes have them.
    pub fn errors(&self) -> Option<&'a [f32]> {
        self.errors
    }

    /// Number of encoded vectors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no vector is encoded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Dimensions and bits the codes were made for.
    pub fn shape(&self) -> (usize, u8) {
        (self.dims, self.bits)
    }

    /// Bytes referenced (codes, factors and error factors).
    pub fn size_bytes(&self) -> usize {
        self.codes.len() + 4 * self.factors.len() + 4 * self.errors.map_or(0, <[f32]>::len)
    }

    /// Calls `visit(position, estimated distance)` for every position in `range` (clamped to
    /// `len`), in increasing order. `constant` is the per-centre term.
    pub(crate) fn scan(
        &self,
        prepared: &PreparedQuery,
        constant: f32,
        range: Range<usize>,
        mut visit: impl FnMut(usize, f32),
    ) {
        let end = range.end.min(self.len);
        if range.start >= end {
            return;
        }
        let kernel = fastscan::kernel();
        let stride = self.pairs * BLOCK;
        let (delta, bias, base) = (prepared.lut.delta, prepared.lut.bias, prepared.base + constant);
        let mut sums = [0u32; BLOCK];
        for b in range.start / BLOCK..=(end - 1) / BLOCK {
            kernel(&self.codes[b * stride..(b + 1) * stride], &prepared.lut.bytes, self.pairs, &mut sums);
            let first = b * BLOCK;
            for pos in range.start.max(first)..end.min(first + BLOCK) {
                let s = delta * sums[pos - first] as f32 + bias;
                visit(pos, base + self.factors[2 * pos] + self.factors[2 * pos + 1] * s);
            }
        }
    }
}

impl CodesView<'_> {
    /// The bounds of a query's estimates ([`Certainty`]) scanned with the per-centre term
    /// `constant`: `None` for codes without error factors, whose estimates come with no bound.
    pub(crate) fn lower_bounds(
        &self,
        prepared: &PreparedQuery,
        constant: f32,
        certainty: Certainty,
    ) -> Option<LowerBounds<'_>> {
        let errors = self.errors?;
        let lut_worst = 0.5 * prepared.lut.delta * prepared.nibbles as f32;
        let (direction, lut) = match certainty {
            Certainty::Exact => (prepared.centred_norm, lut_worst),
            Certainty::Probable => {
                let spread = PROBABLE_DEVIATIONS / ((self.dims.max(2) - 1) as f32).sqrt();
                // A rounding error is uniform over one table step: standard deviation δ/√12 each.
                let lut_typical = PROBABLE_DEVIATIONS * prepared.lut.delta * (prepared.nibbles as f32 / 12.0).sqrt();
                (prepared.centred_norm * spread.min(1.0), lut_typical.min(lut_worst))
            }
        };
        // (The two errors are independent; adding their bounds, rather than their variances,
        // keeps the worst case a bound and costs little: the tables' share is about a tenth.)
        let query_terms = prepared.base.abs() + constant.abs();
        let extremes = self.extremes;
        let most_slack = extremes.error * direction + extremes.scale * lut + ROUNDING * (extremes.add + query_terms);
        Some(LowerBounds { errors, factors: self.factors, direction, lut, query_terms, most_slack })
    }
}

/// Lower bounds of one query's estimates ([`CodesView::lower_bounds`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LowerBounds<'a> {
    errors: &'a [f32],
    factors: &'a [f32],
    /// What a row's error factor is multiplied by.
    direction: f32,
    /// The tables' rounding, per unit of a row's scale.
    lut: f32,
    /// `|base| + |constant|`: the query's terms of every estimate (for their `f32` rounding).
    query_terms: f32,
    /// No row's slack (estimate less bound) exceeds this plus `ROUNDING · |estimate|`.
    most_slack: f32,
}

/// The relative `f32` rounding allowed for an estimate's terms ([`LowerBounds::of`]).
const ROUNDING: f32 = 16.0 * f32::EPSILON;

impl LowerBounds<'_> {
    /// A value no row with this estimate has a lower bound below: one comparison with it
    /// passes over a row that [`Offers::takes_below`] says cannot be taken.
    #[inline]
    pub(crate) fn at_most(&self, estimate: f32) -> f32 {
        estimate - self.most_slack - ROUNDING * estimate.abs()
    }

    /// The lower bound of position `pos`'s distance given its estimate: the estimate less the
    /// row's direction error, the tables' rounding and the `f32` rounding of the estimate's terms.
    #[inline]
    pub(crate) fn of(&self, pos: usize, estimate: f32) -> f32 {
        let (add, scale) = (self.factors[2 * pos], self.factors[2 * pos + 1]);
        // The estimate sums the query's terms, `add` and `scale · s`, each rounded to f32; their
        // magnitudes are at most these.
        let rounding = ROUNDING * (estimate.abs() + add.abs() + self.query_terms);
        // A damaged factor (negative, NaN) bounds nothing: the row is then always reranked.
        let error = self.errors[pos];
        let error = if error >= 0.0 { error } else { f32::INFINITY };
        estimate - error * self.direction - scale.abs() * self.lut - rounding
    }
}

impl QuantizedCodes {
    /// Copies already-encoded positions into a new code array, in the order given: entry `i` of
    /// `picks` is `(source, position)` and becomes position `i`. Codes and factors are copied
    /// bit for bit, so every estimate of a copied position is unchanged (valid as long as the
    /// sources were encoded by one quantizer, which the caller guarantees).
    ///
    /// # Panics
    /// When a source's shape differs from `(dims, bits)` or a position is out of range.
    pub(crate) fn gather(dims: usize, bits: u8, sources: &[CodesView<'_>], picks: &[(usize, usize)]) -> Self {
        let pairs = fastscan::nibbles(dims, bits) / 2;
        let stride = pairs * BLOCK;
        let n = picks.len();
        let mut codes = vec![0u8; n.div_ceil(BLOCK) * stride];
        let mut factors = vec![0f32; 2 * n];
        // Error factors survive only when every source has them.
        let mut errors = sources.iter().all(|s| s.errors.is_some()).then(|| vec![0f32; n]);
        for (to, &(source, from)) in picks.iter().enumerate() {
            let view = &sources[source];
            assert_eq!(view.shape(), (dims, bits), "codes of another shape");
            assert!(from < view.len, "position {from} outside {} codes", view.len);
            let (src_block, src_col) = (from / BLOCK * stride, from % BLOCK);
            let (dst_block, dst_col) = (to / BLOCK * stride, to % BLOCK);
            for pair in 0..pairs {
                codes[dst_block + pair * BLOCK + dst_col] = view.codes[src_block + pair * BLOCK + src_col];
            }
            factors[2 * to..2 * to + 2].copy_from_slice(&view.factors[2 * from..2 * from + 2]);
            if let (Some(out), Some(source)) = (errors.as_mut(), view.errors) {
                out[to] = source[from];
            }
        }
        Self { dims, bits, len: n, codes, factors, errors }
    }
}

/// Candidates kept for rerank: `⌈oversample · k⌉`, at least `k` (`NaN` or `< 1` count as 1).
pub fn pool_size(k: usize, oversample: f32) -> usize {
    let factor = if oversample.is_finite() && oversample > 1.0 { f64::from(oversample) } else { 1.0 };
    let size = (k as f64 * factor).ceil();
    if size >= usize::MAX as f64 {
        usize::MAX
    } else {
        (size as usize).max(k)
    }
}

/// Offers an estimate to the pool when it may enter and the row is accepted.
#[inline]
pub(crate) fn offer(pool: &mut TopK, predicate: &RowPredicate<'_>, row: usize, estimate: f32) {
    // A pool that is not full takes every accepted row, whatever its estimate (also `NaN` or
    // `±∞` from damaged or extreme data), so that `k` accepted rows always reach the rerank.
    if (!pool.is_full() || estimate < pool.threshold()) && predicate.accepts(row) {
        pool.push(Neighbor::new(row as u64, estimate));
    }
}

/// Exact distances of `rows`, the `k` nearest, sorted. Rows are visited in increasing order
/// and the next row is prefetched while the current one is computed (candidates are scattered,
/// so each would otherwise wait on memory).
pub(crate) fn rerank(
    store: &VectorStore<'_>,
    query: &Query,
    rows: impl IntoIterator<Item = usize>,
    k: usize,
) -> Vec<Neighbor> {
    let mut rows: Vec<usize> = rows.into_iter().collect();
    rows.sort_unstable();
    let mut top = TopK::new(k);
    for (i, &row) in rows.iter().enumerate() {
        if let Some(&next) = rows.get(i + 1) {
            prefetch_row(store, next);
        }
        top.push(Neighbor::new(row as u64, store.distance(query, row)));
    }
    top.into_sorted()
}

/// Hints the CPU to load row `row` of `store` into cache (no effect on other architectures).
#[inline]
pub(super) fn prefetch_row(store: &VectorStore<'_>, row: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let (ptr, bytes) = match store.elements() {
            crate::store::Elements::F32(e) | crate::store::Elements::Sparse(e) | crate::store::Elements::Bits(e) => {
                (e.as_ptr().wrapping_add(row * store.dims()).cast::<i8>(), store.dims() * 4)
            }
            crate::store::Elements::F16(e) => {
                (e.as_ptr().wrapping_add(row * store.dims()).cast::<i8>(), store.dims() * 2)
            }
        };
        for line in (0..bytes).step_by(64) {
            // SAFETY: prefetching is a hint that never faults, whatever the address; SSE is
            // part of the x86-64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_add(line)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (store, row);
}

/// Below this fraction of accepted rows a search computes exact distances of the filter's
/// members instead of scanning codes (exact results, less work).
pub(crate) const SPARSE_FILTER_FRACTION: f64 = 1.0 / 32.0;

/// The filter's members when they are few enough for an exact scan.
pub(crate) fn sparse_members<'p>(predicate: &RowPredicate<'p>, rows: usize) -> Option<&'p Bitset> {
    let filter = predicate.filter?;
    ((filter.count() as f64) < SPARSE_FILTER_FRACTION * rows as f64).then_some(filter)
}

/// Checks that `store` and `query` fit an index of `rows × dims` under `metric`.
pub(crate) fn check_search(
    store: &VectorStore<'_>,
    query: &Query,
    rows: usize,
    dims: usize,
    metric: Metric,
) -> Result<(), SearchError> {
    if store.len() != rows || store.dims() != dims {
        return Err(SearchError::StoreMismatch { rows, dims, store_rows: store.len(), store_dims: store.dims() });
    }
    if store.metric() != metric {
        return Err(SearchError::MetricMismatch);
    }
    check_query(query, dims, metric)
}

/// Checks that `query` fits an index of `dims` dimensions under `metric`.
pub(crate) fn check_query(query: &Query, dims: usize, metric: Metric) -> Result<(), SearchError> {
    if query.metric() != metric {
        return Err(SearchError::MetricMismatch);
    }
    if query.values().len() != dims {
        return Err(SearchError::QueryDimensions { expected: dims, actual: query.values().len() });
    }
    Ok(())
}
