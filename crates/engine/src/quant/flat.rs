//! Quantized flat search: scan every code, keep the best `⌈oversample · k⌉` accepted estimates,
//! rerank them exactly.

use std::borrow::Cow;

use super::codes::{
    check_search, offer, pool_size, rerank, sparse_members, Certainty, CodesView, QuantizedCodes, Quantizer,
};
use super::rerank::certified_rerank;
use super::sections::{cast, f32_bytes, require, Header, SectionError};
use super::{QuantError, QuantizerParams, SearchError};
use crate::bitset::RowPredicate;
use crate::cancel::Cancel;
use crate::metric::Metric;
use crate::store::{Query, VectorStore};
use crate::topk::{Neighbor, TopK};

/// Magic of the quantized flat header ("SQFL").
pub const QFLAT_MAGIC: u32 = u32::from_le_bytes(*b"SQFL");
/// Section tag: the 64-byte header (see [`super::sections`]).
pub const TAG_QFLAT_HEADER: u32 = 0x5146_0001;
/// Section tag: the rotated centre `c₀`, `dims` × `f32`.
pub const TAG_QFLAT_CENTER: u32 = 0x5146_0002;
/// Section tag: per-row `(add, scale)` factors, `rows × 2` × `f32`, row order.
pub const TAG_QFLAT_FACTORS: u32 = 0x5146_0003;
/// Section tag: blocked codes, `⌈rows/32⌉ × 32 × code_bytes` bytes, row order.
pub const TAG_QFLAT_CODES: u32 = 0x5146_0004;
/// Section tag (optional): per-row error factors, `rows` × `f32`, row order (see
/// [`super::Certainty`]); segments written before them have none and rerank a fixed pool.
pub const TAG_QFLAT_ERRORS: u32 = 0x5146_0005;

/// A quantized flat index over all rows of a store (row `i` ↔ code position `i`).
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedFlat {
    quantizer: Quantizer,
    codes: QuantizedCodes,
}

impl QuantizedFlat {
    /// Trains a quantizer on `store` and encodes every row (rayon-parallel in the current pool).
    /// Errors: invalid bits.
    pub fn build(store: &VectorStore<'_>, params: &QuantizerParams) -> Result<Self, QuantError> {
        Self::build_cancellable(store, params, &Cancel::default())
    }

    /// [`QuantizedFlat::build`], whose encoding stops at the next block of rows once `cancel` is
    /// requested (the index is then incomplete: the caller, which polls `cancel`, discards it).
    pub fn build_cancellable(
        store: &VectorStore<'_>,
        params: &QuantizerParams,
        cancel: &Cancel,
    ) -> Result<Self, QuantError> {
        let quantizer = Quantizer::train(store, params)?;
        Self::with_quantizer_cancellable(store, quantizer, cancel)
    }

    /// Encodes every row of `store` with an already trained quantizer.
    /// Errors: the quantizer has other dimensions or another metric than `store`.
    pub fn with_quantizer(store: &VectorStore<'_>, quantizer: Quantizer) -> Result<Self, QuantError> {
        Self::with_quantizer_cancellable(store, quantizer, &Cancel::default())
    }

    /// [`QuantizedFlat::with_quantizer`], stopping like [`QuantizedFlat::build_cancellable`].
    pub fn with_quantizer_cancellable(
        store: &VectorStore<'_>,
        quantizer: Quantizer,
        cancel: &Cancel,
    ) -> Result<Self, QuantError> {
        let codes = quantizer.encode_cancellable(store, cancel)?;
        Ok(Self { quantizer, codes })
    }

    /// The quantizer.
    pub fn quantizer(&self) -> &Quantizer {
        &self.quantizer
    }

    /// The codes.
    pub fn codes(&self) -> &QuantizedCodes {
        &self.codes
    }

    /// A borrowed view (no copy of codes or factors).
    pub fn view(&self) -> FlatView<'_> {
        FlatView { quantizer: Cow::Borrowed(&self.quantizer), codes: self.codes.view() }
    }

    /// See [`FlatView::search`].
    pub fn search(
        &self,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        oversample: f32,
        predicate: RowPredicate<'_>,
    ) -> Result<Vec<Neighbor>, SearchError> {
        self.view().search(store, query, k, oversample, predicate)
    }

    /// See [`FlatView::estimate_nearest`].
    pub fn estimate_nearest(&self, query: &Query, count: usize) -> Result<Vec<Neighbor>, SearchError> {
        self.view().estimate_nearest(query, count)
    }

    /// The serialised form: `(tag, little-endian bytes)` for the header, centre, factors and
    /// codes (layouts in the module docs). Position-independent: no pointers or file offsets.
    pub fn sections(&self) -> Vec<(u32, Vec<u8>)> {
        let mut out = self.sections_but_codes();
        out.push((TAG_QFLAT_CODES, self.codes.code_blocks().to_vec()));
        out
    }

    /// [`QuantizedFlat::sections`], moving the codes instead of copying them, so that a build
    /// holds them once (a quarter of the f32 data at 4 bits).
    pub fn into_sections(self) -> Vec<(u32, Vec<u8>)> {
        let mut out = self.sections_but_codes();
        out.push((TAG_QFLAT_CODES, self.codes.into_code_blocks()));
        out
    }

    fn sections_but_codes(&self) -> Vec<(u32, Vec<u8>)> {
        let q = &self.quantizer;
        let header = Header {
            magic: QFLAT_MAGIC,
            dims: q.dims(),
            bits: q.bits(),
            metric: q.metric(),
            scheme: q.scheme(),
            flags: 0,
            rows: self.codes.len(),
            seed: q.seed(),
            lists: 0,
        };
        let mut out = vec![
            (TAG_QFLAT_HEADER, header.encode()),
            (TAG_QFLAT_CENTER, f32_bytes(q.center())),
            (TAG_QFLAT_FACTORS, f32_bytes(self.codes.factors())),
        ];
        if let Some(errors) = self.codes.errors() {
            out.push((TAG_QFLAT_ERRORS, f32_bytes(errors)));
        }
        out
    }

    /// Opens serialised sections as a zero-copy view for a store of `rows × dims`. Validates the
    /// header against `rows`/`dims`, every section length and alignment; `O(dims)` work.
    pub fn from_sections<'a>(
        get: impl Fn(u32) -> Option<&'a [u8]>,
        rows: usize,
        dims: usize,
    ) -> Result<FlatView<'a>, SectionError> {
        let header = Header::decode(TAG_QFLAT_HEADER, require(&get, TAG_QFLAT_HEADER)?, QFLAT_MAGIC, rows, dims, 0)?;
        if header.lists != 0 {
            return Err(SectionError::InvalidField { field: "lists", value: header.lists as u64 });
        }
        let center: &[f32] = cast(TAG_QFLAT_CENTER, require(&get, TAG_QFLAT_CENTER)?, dims)?;
        let factors: &[f32] = cast(
            TAG_QFLAT_FACTORS,
            require(&get, TAG_QFLAT_FACTORS)?,
            rows.checked_mul(2).ok_or(SectionError::Overflow)?,
        )?;
        let codes = require(&get, TAG_QFLAT_CODES)?;
        let errors = match get(TAG_QFLAT_ERRORS) {
            Some(bytes) => Some(cast(TAG_QFLAT_ERRORS, bytes, rows)?),
            None => None,
        };
        let codes = CodesView::new(
            dims,
            header.bits,
            rows,
            codes,
            factors,
            errors,
            TAG_QFLAT_CODES,
            TAG_QFLAT_FACTORS,
            TAG_QFLAT_ERRORS,
        )?;
        let quantizer =
            Quantizer::from_parts(dims, header.bits, header.seed, header.metric, header.scheme, center.to_vec());
        Ok(FlatView { quantizer: Cow::Owned(quantizer), codes })
    }

    /// Bytes of the serialised form (header + centre + factors + codes).
    pub fn size_bytes(&self) -> usize {
        self.view().size_bytes()
    }
}

/// A searchable quantized flat index borrowing its codes (from [`QuantizedFlat::view`] or
/// [`QuantizedFlat::from_sections`]).
#[derive(Debug, Clone)]
pub struct FlatView<'a> {
    quantizer: Cow<'a, Quantizer>,
    codes: CodesView<'a>,
}

impl FlatView<'_> {
    /// The quantizer the codes were made with.
    pub fn quantizer(&self) -> &Quantizer {
        &self.quantizer
    }

    /// Rows covered.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether no rows are covered.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// Dimensions of the indexed vectors.
    pub fn dims(&self) -> usize {
        self.quantizer.dims()
    }

    /// Bits per dimension.
    pub fn bits(&self) -> u8 {
        self.quantizer.bits()
    }

    /// The metric the index was built for (searches with another metric are refused).
    pub fn metric(&self) -> Metric {
        self.quantizer.metric()
    }

    /// Bytes of the serialised form.
    pub fn size_bytes(&self) -> usize {
        super::sections::HEADER_BYTES + 4 * self.quantizer.dims() + self.codes.size_bytes()
    }

    /// The `k` nearest rows accepted by `predicate`, with exact distances, nearest first.
    ///
    /// Every code is scanned (SIMD lookup tables); the `⌈oversample · k⌉` accepted rows with the
    /// smallest estimates are reranked with [`VectorStore::distance`]. Guarantees: only accepted
    /// rows; exactly `min(k, accepted rows)` results (the pool only ever holds accepted rows, so
    /// no filter can starve it); distances are exact. When the filter accepts fewer than 1/32 of
    /// the rows, its members are ranked exactly instead (exact results). Errors: the store's
    /// rows, dims or metric, or the query's, differ from the index.
    pub fn search(
        &self,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        oversample: f32,
        predicate: RowPredicate<'_>,
    ) -> Result<Vec<Neighbor>, SearchError> {
        let rows = self.codes.len();
        check_search(store, query, rows, self.quantizer.dims(), self.quantizer.metric())?;
        if k == 0 || rows == 0 {
            return Ok(Vec::new());
        }
        if let Some(members) = sparse_members(&predicate, rows) {
            let accepted = members.iter().filter(|&r| r < rows && predicate.accepts(r));
            return Ok(rerank(store, query, accepted, k));
        }
        let prepared = self.quantizer.prepare(query);
        let constant = self.quantizer.center_constant(&prepared, self.quantizer.center());
        let pool = pool_size(k, oversample).min(rows);
        if let Some(bounds) = self.codes.lower_bounds(&prepared, constant, Certainty::Probable) {
            return Ok(certified_rerank(store, query, k, pool, |offers| {
                self.codes.scan(&prepared, constant, 0..rows, |pos, estimate| {
                    if offers.takes_from(bounds.at_most(estimate)) && predicate.accepts(pos) {
                        offers.offer(pos, bounds.of(pos, estimate));
                    }
                });
            }));
        }
        let mut pool = TopK::new(pool);
        self.codes.scan(&prepared, constant, 0..rows, |pos, estimate| offer(&mut pool, &predicate, pos, estimate));
        Ok(rerank(store, query, pool.into_sorted().into_iter().map(|n| n.row as usize), k))
    }

    /// The `count` rows with the smallest *estimated* distances to `query`, nearest first
    /// (`row` = code position, `distance` = the estimate, not exact): for callers that rerank
    /// from their own copy of the rows. Errors: the query's dimensions or metric differ from the
    /// index.
    pub fn estimate_nearest(&self, query: &Query, count: usize) -> Result<Vec<Neighbor>, SearchError> {
        super::codes::check_query(query, self.quantizer.dims(), self.quantizer.metric())?;
        let rows = self.codes.len();
        if count == 0 || rows == 0 {
            return Ok(Vec::new());
        }
        let prepared = self.quantizer.prepare(query);
        let constant = self.quantizer.center_constant(&prepared, self.quantizer.center());
        let mut pool = TopK::new(count.min(rows));
        self.codes.scan(&prepared, constant, 0..rows, |pos, estimate| {
            pool.push(Neighbor::new(pos as u64, estimate));
        });
        Ok(pool.into_sorted())
    }

    /// Estimated distances of every row (no rerank), in row order; for measurements. The query
    /// must have the index's dimensions.
    #[cfg(test)]
    pub(crate) fn estimates(&self, query: &Query) -> Vec<f32> {
        let prepared = self.quantizer.prepare(query);
        let constant = self.quantizer.center_constant(&prepared, self.quantizer.center());
        let mut out = Vec::with_capacity(self.codes.len());
        self.codes.scan(&prepared, constant, 0..self.codes.len(), |_, e| out.push(e));
        out
    }
}
