//! Traversal codes: every row's vector in 8 bits per dimension, for walking the graph.
//!
//! A graph search reads one stored row per distance, at random. With `f32` rows (1,536 bytes at
//! 384 dimensions) the walk is bound by memory traffic, not arithmetic: one search at
//! `ef_search` 100 over 100,000 rows reads about 3 MB. Each row is therefore also stored as
//! per-dimension 8-bit scalar codes (a quarter of the bytes); searches walk the graph on the
//! codes' distance estimates and then compute the exact distance of every row the walk kept
//! (the `ef` best, read once each), so results still carry exact distances.
//!
//! Codes: for dimension `j`, `min[j]` and `step[j] = (max[j] − min[j]) / 255` over all rows;
//! a value `x` is stored as `c = round((x − min[j]) / step[j])` and stands for
//! `x̂ = min[j] + step[j] · c`, so `|x − x̂| ≤ step[j] / 2`. For a query `q`,
//! `q · x̂ = Σ q[j] · min[j] + Σ (q[j] · step[j]) · c[j]`: one `f32 × u8` dot product
//! ([`crate::kernels::dot_u8`]) per row. Estimates:
//!
//! | metric | estimate | from |
//! |---|---|---|
//! | inner product | `−q · x̂` | |
//! | cosine | `1 − q · x̂` | rows and query stored L2-normalised |
//! | L2 | `‖q‖² − 2 q · x̂ + ‖x̂‖²` | `‖x̂‖²` stored per row ([`TAG_CODE_NORMS`]) |
//!
//! Codes exist only for dense `f32` rows under these three metrics; other segments walk the
//! graph on their stored rows as before, and so does a segment written before codes existed.
//!
//! Sections:
//!
//! | tag | constant | type | length | content |
//! |---|---|---|---|---|
//! | `0x484E_0006` | [`TAG_CODE_RANGES`] | `f32` | `2 · dims` | `min[0..dims]`, then `step[0..dims]` |
//! | `0x484E_0007` | [`TAG_CODES`] | `u8` | `rows · dims` | row `i`'s codes at `[i · dims, (i + 1) · dims)` |
//! | `0x484E_0008` | [`TAG_CODE_NORMS`] | `f32` | `rows` | `‖x̂ᵢ‖²` (L2 segments only) |
//!
//! Measured (`cargo run --release -p strata-bench --example ef_growth`; see
//! docs/ARCHITECTURE.md for the figures).

use std::io;
use std::path::Path;

use super::layer::Target;
use super::prefetch::prefetch_row;
use super::HnswError;
use crate::metric::Metric;
use crate::spill::{SectionBytes, SpillBuffer};
use crate::store::{Elements, Query, VectorStore};

/// Section tag of the per-dimension ranges (`min`, then `step`).
pub const TAG_CODE_RANGES: u32 = 0x484E_0006;
/// Section tag of the rows' 8-bit codes.
pub const TAG_CODES: u32 = 0x484E_0007;
/// Section tag of the decoded rows' squared norms (L2 only).
pub const TAG_CODE_NORMS: u32 = 0x484E_0008;

/// The largest code.
pub(super) const LEVELS: f32 = 255.0;

/// Whether rows under `metric` get traversal codes.
pub(super) fn coded_metric(metric: Metric) -> bool {
    matches!(metric, Metric::L2 | Metric::InnerProduct | Metric::Cosine)
}

/// A per-dimension grid of scalar codes `0..=levels` over a store's rows, spanning each
/// dimension's range: code `c` of dimension `j` stands for `min[j] + step[j] · c`. Both the
/// segment's 8-bit traversal codes and a build's 4-bit walk codes ([`super::nibble_codes`]) are
/// made on one.
pub(super) struct ScalarGrid<'s> {
    /// The rows, `dims` values each.
    pub(super) rows: &'s [f32],
    pub(super) dims: usize,
    /// Per dimension, the least value of the rows (0 when there are none).
    pub(super) min: Vec<f32>,
    /// Per dimension, `(max − min) / levels`, never negative.
    pub(super) step: Vec<f32>,
    levels: f32,
}

impl<'s> ScalarGrid<'s> {
    /// The grid of `levels + 1` codes over `store`'s rows, or `None` when its rows get no codes
    /// (not dense `f32`, no dimensions, or a metric other than L2, inner product and cosine).
    pub(super) fn over(store: &VectorStore<'s>, levels: f32) -> Option<Self> {
        let Elements::F32(rows) = store.elements() else { return None };
        let dims = store.dims();
        if !coded_metric(store.metric()) || dims == 0 {
            return None;
        }
        let mut min = vec![f32::INFINITY; dims];
        let mut max = vec![f32::NEG_INFINITY; dims];
        for row in rows.chunks_exact(dims) {
            for ((lo, hi), &v) in min.iter_mut().zip(&mut max).zip(row) {
                *lo = lo.min(v);
                *hi = hi.max(v);
            }
        }
        if rows.len() < dims {
            min.fill(0.0);
            max.fill(0.0);
        }
        let step = min.iter().zip(&max).map(|(&lo, &hi)| ((hi - lo) / levels).max(0.0)).collect();
        Some(Self { rows, dims, min, step, levels })
    }

    /// The code of `value` in dimension `j`: the nearest level, clamped to `0..=levels` (0 where
    /// the dimension has one value).
    #[inline]
    pub(super) fn code(&self, j: usize, value: f32) -> f32 {
        let step = self.step[j];
        if step > 0.0 {
            ((value - self.min[j]) / step).round().clamp(0.0, self.levels)
        } else {
            0.0
        }
    }

    /// Row `row`'s values.
    pub(super) fn row(&self, row: usize) -> &'s [f32] {
        &self.rows[row * self.dims..(row + 1) * self.dims]
    }

    /// The value code `code` of dimension `j` stands for, in `f64` (for decoded norms).
    #[inline]
    pub(super) fn decoded(&self, j: usize, code: f32) -> f64 {
        f64::from(self.min[j]) + f64::from(self.step[j]) * f64::from(code)
    }
}

/// A zero-copy view over a segment's traversal codes.
///
/// Guarantees: the ranges hold `2 · dims` finite values with non-negative steps, the codes
/// `rows · dims` bytes and the norms, when present, `rows` values (checked by
/// [`from_sections`](Self::from_sections)), so reading any row below `rows` never panics.
#[derive(Clone, Copy)]
pub struct TraversalCodes<'a> {
    dims: usize,
    min: &'a [f32],
    step: &'a [f32],
    codes: &'a [u8],
    norms: Option<&'a [f32]>,
}

impl std::fmt::Debug for TraversalCodes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraversalCodes")
            .field("dims", &self.dims)
            .field("rows", &self.codes.len().checked_div(self.dims).unwrap_or(0))
            .field("norms", &self.norms.is_some())
            .finish()
    }
}

/// Reads an `f32` section in place.
fn floats(tag: u32, bytes: &[u8]) -> Result<&[f32], HnswError> {
    bytemuck::try_cast_slice(bytes).map_err(|_| {
        if bytes.len().is_multiple_of(4) {
            HnswError::Unaligned { tag }
        } else {
            HnswError::SectionLength { tag, expected: bytes.len() / 4 * 4, actual: bytes.len() }
        }
    })
}

impl<'a> TraversalCodes<'a> {
    /// The codes of a segment of `rows` rows (`get(tag)` returns a section's bytes): `None` when
    /// it has none ([`TAG_CODES`] absent). Checks every section's length and the ranges (finite,
    /// steps ≥ 0); a violation is an [`HnswError`], never a panic.
    pub fn from_sections(get: impl Fn(u32) -> Option<&'a [u8]>, rows: usize) -> Result<Option<Self>, HnswError> {
        let Some(codes) = get(TAG_CODES) else { return Ok(None) };
        let ranges =
            floats(TAG_CODE_RANGES, get(TAG_CODE_RANGES).ok_or(HnswError::MissingSection { tag: TAG_CODE_RANGES })?)?;
        let dims = ranges.len() / 2;
        if dims == 0 || ranges.len() % 2 != 0 {
            return Err(HnswError::BadHeader(format!("{} traversal code ranges", ranges.len())));
        }
        let (min, step) = ranges.split_at(dims);
        if !min.iter().chain(step).all(|v| v.is_finite()) || step.iter().any(|&s| s < 0.0) {
            return Err(HnswError::BadHeader("traversal code ranges are not finite and non-negative".into()));
        }
        let expected = rows.checked_mul(dims).ok_or_else(|| HnswError::BadHeader("traversal codes overflow".into()))?;
        if codes.len() != expected {
            return Err(HnswError::SectionLength { tag: TAG_CODES, expected, actual: codes.len() });
        }
        let norms = match get(TAG_CODE_NORMS) {
            Some(bytes) => {
                let norms = floats(TAG_CODE_NORMS, bytes)?;
                if norms.len() != rows {
                    return Err(HnswError::SectionLength {
                        tag: TAG_CODE_NORMS,
                        expected: rows * 4,
                        actual: bytes.len(),
                    });
                }
                Some(norms)
            }
            None => None,
        };
        Ok(Some(Self { dims, min, step, codes, norms }))
    }

    /// The dimensions of the coded rows.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The number of coded rows.
    pub fn rows(&self) -> usize {
        self.codes.len() / self.dims
    }

    /// The sections holding `store`'s rows as traversal codes, or `None` when its rows get none
    /// (not dense `f32`, or a metric other than L2, inner product and cosine). The rows must be
    /// in stored form (L2-normalised for cosine), as the store's are.
    pub fn encode(store: &VectorStore<'_>) -> Option<Vec<(u32, Vec<u8>)>> {
        let sections = Self::encode_sections(store, None).expect("codes in memory cannot fail to be made")?;
        Some(sections.into_iter().map(|(tag, bytes)| (tag, bytes.into_vec())).collect())
    }

    /// The sections [`encode`](Self::encode) gives, with the codes (`dims` bytes a row) in an
    /// unnamed file in `spill_dir` when one is given ([`crate::spill`]); an error only when that
    /// file cannot be made.
    pub fn encode_sections(
        store: &VectorStore<'_>,
        spill_dir: Option<&Path>,
    ) -> io::Result<Option<Vec<(u32, SectionBytes)>>> {
        let Some(grid) = ScalarGrid::over(store, LEVELS) else { return Ok(None) };
        let dims = grid.dims;
        let mut codes = SpillBuffer::zeroed(grid.rows.len(), spill_dir)?;
        let mut norms = Vec::new();
        let l2 = store.metric() == Metric::L2;
        for (row, out) in grid.rows.chunks_exact(dims).zip(codes.bytes_mut().chunks_exact_mut(dims)) {
            let mut norm = 0.0f64;
            for (j, (&v, out)) in row.iter().zip(out).enumerate() {
                let code = grid.code(j, v);
                *out = code as u8;
                let decoded = grid.decoded(j, code);
                norm += decoded * decoded;
            }
            if l2 {
                norms.push(norm as f32);
            }
        }
        let ranges: Vec<u8> = grid.min.iter().chain(&grid.step).flat_map(|v| v.to_le_bytes()).collect();
        let mut sections = vec![(TAG_CODE_RANGES, ranges.into()), (TAG_CODES, SectionBytes::Buffer(codes))];
        if l2 {
            sections.push((TAG_CODE_NORMS, norms.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>().into()));
        }
        Ok(Some(sections))
    }

    /// `query` prepared for estimates against these codes, or `None` when they cannot serve it:
    /// other dimensions, a metric without codes, an L2 query on codes without norms, or a query
    /// that is not a dense vector with a direction (those keep the exact walk).
    pub(crate) fn prepare(&self, query: &Query) -> Option<CodedQuery> {
        self.serves(query).then(|| CodedQuery::new(query, self.min, self.step, self.dims))
    }

    /// Whether estimates from these codes can serve `query` (see [`prepare`](Self::prepare)).
    fn serves(&self, query: &Query) -> bool {
        query.values().len() == self.dims
            && query.is_dense_with_direction()
            && coded_metric(query.metric())
            && (query.metric() != Metric::L2 || self.norms.is_some())
    }

    /// Row `row`'s codes.
    #[inline]
    fn row(&self, row: usize) -> &'a [u8] {
        &self.codes[row * self.dims..(row + 1) * self.dims]
    }
}

/// A query prepared for one segment's codes ([`TraversalCodes::prepare`]).
#[derive(Debug, Clone)]
pub(crate) struct CodedQuery {
    /// `q[j] · step[j]`.
    weights: Vec<f32>,
    /// `Σ q[j] · min[j]`.
    offset: f32,
    /// `‖q‖²` (L2).
    query_norm: f32,
    metric: Metric,
}

/// Distance estimates from a prepared query to coded rows, counting the estimates made.
pub(crate) struct CodedTarget<'a, 'c> {
    pub(crate) codes: &'a TraversalCodes<'c>,
    pub(crate) query: &'a CodedQuery,
    pub(crate) computed: std::cell::Cell<usize>,
}

impl CodedQuery {
    /// `query` prepared for codes with per-dimension `min` and `step` (`x̂ = min + step · c`),
    /// its weights padded with zeros to `padded` (at least the query's dimensions).
    pub(crate) fn new(query: &Query, min: &[f32], step: &[f32], padded: usize) -> Self {
        let values = query.values();
        let mut weights: Vec<f32> = values.iter().zip(step).map(|(&q, &s)| q * s).collect();
        weights.resize(padded.max(weights.len()), 0.0);
        let offset = values.iter().zip(min).map(|(&q, &lo)| f64::from(q) * f64::from(lo)).sum::<f64>() as f32;
        let query_norm = values.iter().map(|&q| f64::from(q) * f64::from(q)).sum::<f64>() as f32;
        Self { weights, offset, query_norm, metric: query.metric() }
    }

    /// The weights `q[j] · step[j]` (zero past the query's dimensions).
    #[inline]
    pub(crate) fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// The distance estimate from `Σ weights · codes` of a row whose decoded squared norm is
    /// `norm` (used by L2 only; see the module docs).
    #[inline]
    pub(crate) fn estimate(&self, weighted_codes: f32, norm: f32) -> f32 {
        let dot = self.offset + weighted_codes;
        match self.metric {
            Metric::L2 => self.query_norm - 2.0 * dot + norm,
            Metric::InnerProduct => -dot,
            _ => 1.0 - dot,
        }
    }
}

impl CodedTarget<'_, '_> {
    /// The estimate of the query's distance to row `row` (see the module docs).
    #[inline]
    pub(crate) fn estimate(&self, row: usize) -> f32 {
        let norm = self.codes.norms.map_or(0.0, |norms| norms[row]);
        self.query.estimate(crate::kernels::dot_u8(&self.query.weights, self.codes.row(row)), norm)
    }
}

impl Target for CodedTarget<'_, '_> {
    #[inline]
    fn distance(&self, id: u32) -> f32 {
        self.computed.set(self.computed.get() + 1);
        self.estimate(id as usize)
    }

    #[inline]
    fn prefetch(&self, id: u32) {
        prefetch_row(self.codes.codes, id as usize * self.codes.dims, self.codes.dims);
    }
}
