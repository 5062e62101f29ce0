//! IVF over packed bit rows (`bit` columns under Hamming or Jaccard distance): lists of rows
//! around bit-string centroids, searched with exact distances.
//!
//! Bit rows are already compact (one bit a dimension) and their distances are popcounts, so
//! these lists hold no quantized codes: a list is a range of positions whose rows are read from
//! the segment's VECTORS section (which such a segment always keeps) and compared exactly.
//!
//! # Build
//!
//! 1. [`crate::kmeans::binary::train`] `lists` bit-string centroids under the index's metric;
//! 2. [`crate::kmeans::binary::assign`] every row to its nearest centroid under that metric;
//! 3. the same counting sort as the quantized IVF ([`super::positions`]): list `l` owns positions
//!    `offsets[l]..offsets[l+1]`, position `p` holds row `ids[p]` (ascending within a list).
//!
//! Deterministic: same rows, lists and seed give identical sections, whatever the thread count.
//!
//! # Search
//!
//! Lists are ranked by the query's distance to their centroid under the metric (ties: lower
//! list first); the `probes` nearest are scanned, then further lists nearest first until at least
//! `k` accepted rows were seen; every accepted row's exact distance competes for the top `k`
//! (ties: lower row). Probing every list is therefore exactly the flat scan's answer.
//!
//! # Sections (little-endian)
//!
//! | tag | content |
//! |---|---|
//! | [`TAG_IVF_BIT_HEADER`] | 32 bytes: magic `"SIVB"`, `u32` version 1, `u32` lists, `u32` words per row, `u64` rows, `u8` metric (4 Hamming, 5 Jaccard), 7 zero bytes |
//! | [`TAG_IVF_BIT_CENTROIDS`] | `lists × words` `u32`: each centroid a packed bit row ([`crate::bit_rows`]: the bit length, then the bits) |
//! | [`super::TAG_IVF_OFFSETS`] | as the quantized IVF's: `(lists + 1) × u32` list offsets |
//! | [`super::TAG_IVF_IDS`] | as the quantized IVF's: `rows × u32`, the row at each position |
//!
//! [`BitIvf::from_sections`] validates the header against META's rows, width and metric, the
//! centroids' length and bit lengths, and the offsets and the permutation as the quantized IVF
//! does, so no byte pattern makes a search panic or return a row outside `0..rows`.

use thiserror::Error;

use super::{list_layout, positions, IvfError, IvfParams, TAG_IVF_IDS, TAG_IVF_OFFSETS};
use crate::bit_rows;
use crate::bitset::RowPredicate;
use crate::kmeans::{self, KMeansParams};
use crate::metric::Metric;
use crate::quant::{cast, require, rerank, sparse_members, u32_bytes, SectionError};
use crate::store::{ElementKind, Query, VectorStore};
use crate::topk::{Neighbor, TopK};

/// Magic of the bit IVF header ("SIVB").
pub const BIT_IVF_MAGIC: u32 = u32::from_le_bytes(*b"SIVB");
/// Section tag: the 32-byte header of an IVF over bit rows.
pub const TAG_IVF_BIT_HEADER: u32 = 0x4956_0009;
/// Section tag: the packed bit-string centroids of an IVF over bit rows.
pub const TAG_IVF_BIT_CENTROIDS: u32 = 0x4956_000A;
/// Bytes of the bit IVF header.
pub const BIT_HEADER_BYTES: usize = 32;
const BIT_VERSION: u32 = 1;

/// Why a bit IVF search could not run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BitSearchError {
    /// The store is not the one the lists were built over (rows, width, element type or metric).
    #[error("the store ({store_rows} rows of {store_words} words) is not the one the lists index ({rows} rows of {words} words, packed bit rows under {metric:?})")]
    StoreMismatch {
        /// Rows the lists index.
        rows: usize,
        /// Words per row of the lists.
        words: usize,
        /// The lists' metric.
        metric: Metric,
        /// Rows of the store given.
        store_rows: usize,
        /// Words per row of the store given.
        store_words: usize,
    },
}

/// An IVF over packed bit rows (owned).
#[derive(Debug, Clone, PartialEq)]
pub struct BitIvf {
    metric: Metric,
    words: usize,
    centroids: Vec<f32>,
    offsets: Vec<u32>,
    ids: Vec<u32>,
}

impl BitIvf {
    /// Builds lists over every row of `store`, packed bit rows under Hamming or Jaccard distance
    /// (module docs), with `params.lists` (0: `⌈√rows⌉`, clamped to the rows), `seed`,
    /// `threads`, `max_iterations` and `cancel` (`bits` and `residual` do not apply).
    ///
    /// Errors: no rows, more rows than `u32` offsets address, a store of other rows or metric
    /// (`KMeans(NotBitRows)`), cancellation.
    pub fn build(store: &VectorStore<'_>, params: &IvfParams) -> Result<Self, IvfError> {
        let rows = store.len();
        if rows == 0 {
            return Err(IvfError::Empty);
        }
        if u32::try_from(rows).is_err() {
            return Err(IvfError::TooManyRows(rows));
        }
        let lists = if params.lists == 0 { (rows as f64).sqrt().ceil() as usize } else { params.lists }.clamp(1, rows);
        let kparams = KMeansParams {
            max_iterations: params.max_iterations,
            seed: params.seed,
            threads: params.threads,
            cancel: params.cancel.clone(),
            ..KMeansParams::default()
        };
        let centroids = kmeans::binary::train(store, lists, &kparams)?;
        let assignment = kmeans::binary::assign(store, &centroids, params.threads, &params.cancel)?;
        let (offsets, ids, _) = positions(&assignment, lists);
        Ok(Self { metric: store.metric(), words: store.dims(), centroids: centroids.into_vec(), offsets, ids })
    }

    /// A borrowed view.
    pub fn view(&self) -> BitIvfView<'_> {
        BitIvfView {
            metric: self.metric,
            words: self.words,
            centroids: &self.centroids,
            offsets: &self.offsets,
            ids: &self.ids,
        }
    }

    /// The serialised sections (layouts in the module docs).
    pub fn into_sections(self) -> Vec<(u32, Vec<u8>)> {
        let lists = self.offsets.len() - 1;
        let mut header = Vec::with_capacity(BIT_HEADER_BYTES);
        header.extend_from_slice(&BIT_IVF_MAGIC.to_le_bytes());
        header.extend_from_slice(&BIT_VERSION.to_le_bytes());
        header.extend_from_slice(&(lists as u32).to_le_bytes());
        header.extend_from_slice(&(self.words as u32).to_le_bytes());
        header.extend_from_slice(&(self.ids.len() as u64).to_le_bytes());
        header.push(self.metric as u8);
        header.resize(BIT_HEADER_BYTES, 0);
        let centroids: Vec<u8> = self.centroids.iter().flat_map(|w| w.to_bits().to_le_bytes()).collect();
        vec![
            (TAG_IVF_BIT_HEADER, header),
            (TAG_IVF_BIT_CENTROIDS, centroids),
            (TAG_IVF_OFFSETS, u32_bytes(&self.offsets)),
            (TAG_IVF_IDS, u32_bytes(&self.ids)),
        ]
    }

    /// Opens serialised sections as a zero-copy view for `rows` packed bit rows of `words` words
    /// under `metric` (META's), validating everything listed in the module docs.
    /// `O(rows + lists · words)`.
    pub fn from_sections<'a>(
        get: impl Fn(u32) -> Option<&'a [u8]>,
        rows: usize,
        words: usize,
        metric: Metric,
    ) -> Result<BitIvfView<'a>, SectionError> {
        let tag = TAG_IVF_BIT_HEADER;
        let header = require(&get, tag)?;
        if header.len() != BIT_HEADER_BYTES {
            return Err(SectionError::Length { tag, expected: BIT_HEADER_BYTES, actual: header.len() });
        }
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        if u32_at(0) != BIT_IVF_MAGIC {
            return Err(SectionError::BadMagic { tag, found: u32_at(0) });
        }
        if u32_at(4) != BIT_VERSION {
            return Err(SectionError::UnsupportedVersion(u32_at(4)));
        }
        let lists = u32_at(8) as usize;
        if lists == 0 || lists > rows.max(1) {
            return Err(SectionError::InvalidField { field: "lists", value: lists as u64 });
        }
        let mismatch = |field, stored: u64, expected: u64| SectionError::Mismatch { field, stored, expected };
        if u32_at(12) as usize != words || words < 2 {
            return Err(mismatch("words", u64::from(u32_at(12)), words as u64));
        }
        let stored_rows = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
        if stored_rows != rows as u64 {
            return Err(mismatch("rows", stored_rows, rows as u64));
        }
        if header[24] != metric as u8 || !matches!(metric, Metric::Hamming | Metric::Jaccard) {
            return Err(SectionError::InvalidField { field: "metric", value: u64::from(header[24]) });
        }
        if let Some(i) = (25..BIT_HEADER_BYTES).find(|&i| header[i] != 0) {
            return Err(SectionError::InvalidField { field: "reserved", value: i as u64 });
        }
        let count = lists.checked_mul(words).ok_or(SectionError::Overflow)?;
        let centroids: &[f32] = cast(TAG_IVF_BIT_CENTROIDS, require(&get, TAG_IVF_BIT_CENTROIDS)?, count)?;
        for (index, centroid) in centroids.chunks_exact(words).enumerate() {
            let bits = bit_rows::bit_len(centroid);
            if bits == 0 || bit_rows::row_words(bits) != words {
                return Err(SectionError::OutOfRange {
                    tag: TAG_IVF_BIT_CENTROIDS,
                    index: index * words,
                    value: u64::from(bits),
                    bound: 32 * (words as u64 - 1),
                });
            }
        }
        let (offsets, ids) = list_layout(&get, rows, lists)?;
        Ok(BitIvfView { metric, words, centroids, offsets, ids })
    }
}

/// A searchable IVF over packed bit rows borrowing its arrays (from [`BitIvf::view`] or
/// [`BitIvf::from_sections`]).
#[derive(Debug, Clone, Copy)]
pub struct BitIvfView<'a> {
    metric: Metric,
    words: usize,
    centroids: &'a [f32],
    offsets: &'a [u32],
    ids: &'a [u32],
}

impl BitIvfView<'_> {
    /// Number of lists.
    pub fn lists(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Rows covered.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no rows are covered.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The metric the lists were built under.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Centroid `list` as a packed bit row. Panics when `list >= lists()`.
    pub fn centroid(&self, list: usize) -> &[f32] {
        &self.centroids[list * self.words..(list + 1) * self.words]
    }

    /// The rows of list `list`, ascending. Panics when `list >= lists()`.
    pub fn list_rows(&self, list: usize) -> &[u32] {
        &self.ids[self.offsets[list] as usize..self.offsets[list + 1] as usize]
    }

    /// The `k` nearest rows of `store` accepted by `predicate`, with exact distances, nearest
    /// first (ties: lower row).
    ///
    /// Scans the `probes` lists whose centroids are nearest the query, then further lists,
    /// nearest first, while fewer than `k` accepted rows were seen. A filter accepting fewer
    /// than 1/32 of the rows is answered from its members directly. Guarantees: only accepted
    /// rows; exactly `min(k, accepted rows)` results; exact distances; the top `k` of the
    /// scanned lists, so with `probes ≥ lists` exactly the flat scan's answer. Errors: `store`
    /// is not the one the lists were built over.
    pub fn search(
        &self,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        probes: usize,
        predicate: RowPredicate<'_>,
    ) -> Result<Vec<Neighbor>, BitSearchError> {
        let rows = self.ids.len();
        if store.len() != rows
            || store.dims() != self.words
            || store.element_kind() != ElementKind::Bits
            || store.metric() != self.metric
        {
            return Err(BitSearchError::StoreMismatch {
                rows,
                words: self.words,
                metric: self.metric,
                store_rows: store.len(),
                store_words: store.dims(),
            });
        }
        if k == 0 || rows == 0 {
            return Ok(Vec::new());
        }
        if let Some(members) = sparse_members(&predicate, rows) {
            return Ok(rerank(store, query, members.iter().filter(|&r| r < rows && predicate.accepts(r)), k));
        }
        let mut top = TopK::new(k);
        let (mut scanned, mut accepted) = (0usize, 0usize);
        for list in self.list_order(query.values()) {
            if scanned >= probes && accepted >= k {
                break;
            }
            for &row in self.list_rows(list) {
                let row = row as usize;
                if predicate.accepts(row) {
                    accepted += 1;
                    top.push(Neighbor::new(row as u64, store.distance(query, row)));
                }
            }
            scanned += 1;
        }
        Ok(top.into_sorted())
    }

    /// The lists in the order a query (a packed bit row) probes them: by its distance to their
    /// centroids under the metric, ties by list number.
    pub fn list_order(&self, query: &[f32]) -> Vec<usize> {
        let mut order: Vec<(f32, usize)> = (0..self.lists())
            .map(|list| (bit_rows::distance_between(query, self.centroid(list), self.metric), list))
            .collect();
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        order.into_iter().map(|(_, list)| list).collect()
    }

    /// Bytes of the serialised form.
    pub fn size_bytes(&self) -> usize {
        BIT_HEADER_BYTES + 4 * (self.centroids.len() + self.offsets.len() + self.ids.len())
    }
}
