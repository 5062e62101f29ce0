//! Segments: immutable, searchable sets of vectors, each built once (from a sealed memtable or a
//! merge) into one segment file and then only read.
//!
//! Every kind answers the same [`Segment::search`] contract:
//! - results are `(row offset, exact distance)` sorted nearest first (ties by row) — except in a
//!   segment that keeps no vectors ([`Segment::stores_vectors`] false, IVF only), which returns
//!   its best `⌈oversample · k⌉` candidates with *estimated* distances, nearest estimate first,
//!   for the caller to rerank from its own copy of the vectors;
//! - rows outside the predicate's filter or inside its deletion bitmap never appear;
//! - when at least `k` rows are accepted, exactly `k` results come back — no kind has a fixed
//!   candidate cap that silently drops results (kinds widen their search, or scan exactly).
//!
//! A segment file holds the common sections `META` (see [`meta`]), `IDS` (one `u64` per row: the
//! caller's identifier, e.g. a heap TID) and `VECTORS` (row-major `f32` or `f16`, in stored form:
//! L2-normalised for cosine; absent when META says so), plus the sections of its index kind
//! (an IVF segment of packed bit rows has its own: [`crate::ivf::BitIvf`]).

mod build;
mod filtered;
mod flat;
mod merge;
pub mod meta;
pub mod structured;

pub use build::{
    build_memory_per_row, build_segment, build_segment_extending, build_segment_with_quantizer, BuildError,
    BuildMemory, BuildOptions, BuiltSegment,
};
pub use filtered::{AllowSet, FilteredSearch};
pub use merge::{merge_segments, MergeSource};
pub use meta::{IndexKind, KindCode, KindParts, SegmentMeta};

use std::path::Path;

use self_cell::self_cell;
use thiserror::Error;

use crate::bitset::RowPredicate;
use crate::format::{FormatError, SegmentBytes, SegmentFile};
use crate::store::{ElementKind, Elements, Query, VectorStore};
use crate::topk::Neighbor;

/// Section tag of the META section.
pub const TAG_META: u32 = 0x5347_0001;
/// Section tag of the row identifiers (`u64` per row).
pub const TAG_IDS: u32 = 0x5347_0002;
/// Section tag of the stored vectors.
pub const TAG_VECTORS: u32 = 0x5347_0003;

/// Per-query search settings; each kind reads the ones it has.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchParams {
    /// HNSW candidate list size (raised to at least `k`).
    pub ef_search: usize,
    /// IVF lists to scan; 0 chooses [`auto_probes`] of the segment's lists.
    pub probes: usize,
    /// Quantized kinds rerank `ceil(oversample × k)` candidates exactly.
    pub oversample: f32,
}

impl Default for SearchParams {
    fn default() -> Self {
        Self { ef_search: 100, probes: 0, oversample: 4.0 }
    }
}

impl SearchParams {
    /// The IVF lists a search of a segment with `lists` lists probes: `probes`, or
    /// [`auto_probes`] when it is 0.
    pub fn probes_for(&self, lists: usize) -> usize {
        if self.probes == 0 {
            auto_probes(lists)
        } else {
            self.probes
        }
    }
}

/// The probes used when none are set: a fifth of the lists (at least 8, at most all), which
/// keeps recall@10 near 0.95 or above on real text embeddings whatever the segment's size.
pub fn auto_probes(lists: usize) -> usize {
    lists.div_ceil(5).max(8).min(lists.max(1))
}

/// Why a segment could not be opened.
#[derive(Debug, Error)]
pub enum SegmentError {
    /// The container is damaged or unreadable.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The container is sound but its contents are inconsistent.
    #[error("corrupt segment: {0}")]
    Corrupt(String),
    /// The FILTER section is damaged or does not match the segment.
    #[error(transparent)]
    Filter(#[from] crate::filter::FilterError),
}

/// The kind-specific part of an opened segment.
enum IndexView<'a> {
    Flat,
    QuantizedFlat(crate::quant::FlatView<'a>),
    Ivf(crate::ivf::IvfView<'a>),
    /// IVF over packed bit rows: exact rows in lists around bit-string centroids.
    BitIvf(crate::ivf::BitIvfView<'a>),
    Hnsw(crate::hnsw::HnswView<'a>),
}

/// Zero-copy views into an opened segment file.
struct Views<'a> {
    meta: SegmentMeta,
    ids: &'a [u64],
    store: Option<VectorStore<'a>>,
    index: IndexView<'a>,
    /// The FILTER section, decoded (absent in segments written without filter columns).
    filters: Option<crate::filter::FilterColumns>,
}

self_cell!(
    struct SegmentCell {
        owner: SegmentFile,
        #[covariant]
        dependent: Views,
    }
);

/// An opened, validated segment that can be searched from many threads at once.
pub struct Segment {
    cell: SegmentCell,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("meta", &self.meta()).finish_non_exhaustive()
    }
}

fn cast<'a, T: bytemuck::Pod>(bytes: &'a [u8], what: &str) -> Result<&'a [T], SegmentError> {
    bytemuck::try_cast_slice(bytes).map_err(|e| SegmentError::Corrupt(format!("{what} section: {e}")))
}

/// Whether a query of `len` values fits a segment: its dimensions, or for packed sparse rows any
/// packed width (a query is packed at its own capacity).
pub(crate) fn query_fits(len: usize, meta: &SegmentMeta) -> bool {
    if meta.element == ElementKind::SparseF32 {
        crate::sparse_rows::capacity_of(len).is_some()
    } else {
        len == meta.dims as usize
    }
}

fn open_views(file: &SegmentFile) -> Result<Views<'_>, SegmentError> {
    let meta = SegmentMeta::decode(file.require(TAG_META)?).map_err(SegmentError::Corrupt)?;
    let rows = usize::try_from(meta.rows).map_err(|_| SegmentError::Corrupt("row count overflows".into()))?;
    let dims = meta.dims as usize;
    let ids: &[u64] = cast(file.require(TAG_IDS)?, "IDS")?;
    if ids.len() != rows {
        return Err(SegmentError::Corrupt(format!("{} ids for {rows} rows", ids.len())));
    }
    let store = if meta.vectors_stored {
        let vectors = file.require(TAG_VECTORS)?;
        let elements = match meta.element {
            ElementKind::F32 => Elements::F32(cast(vectors, "VECTORS")?),
            ElementKind::F16 => Elements::F16(cast(vectors, "VECTORS")?),
            ElementKind::SparseF32 => Elements::Sparse(cast(vectors, "VECTORS")?),
            ElementKind::Bits => Elements::Bits(cast(vectors, "VECTORS")?),
        };
        let store = VectorStore::new(elements, dims, meta.metric).map_err(|e| SegmentError::Corrupt(e.to_string()))?;
        if store.len() != rows {
            return Err(SegmentError::Corrupt(format!("{} stored vectors for {rows} rows", store.len())));
        }
        Some(store)
    } else {
        if file.section(TAG_VECTORS).is_some() {
            return Err(SegmentError::Corrupt("VECTORS section present although META says none".into()));
        }
        None
    };
    let get = |tag: u32| file.section(tag);
    let corrupt = |what: &str, e: &dyn std::fmt::Display| SegmentError::Corrupt(format!("{what}: {e}"));
    let index = match meta.kind {
        IndexKind::Flat => IndexView::Flat,
        IndexKind::QuantizedFlat { .. } => IndexView::QuantizedFlat(
            crate::quant::QuantizedFlat::from_sections(get, rows, dims).map_err(|e| corrupt("quantized codes", &e))?,
        ),
        IndexKind::Ivf { .. } if meta.element == ElementKind::Bits => IndexView::BitIvf(
            crate::ivf::BitIvf::from_sections(get, rows, dims, meta.metric)
                .map_err(|e| corrupt("bit IVF sections", &e))?,
        ),
        IndexKind::Ivf { .. } => {
            IndexView::Ivf(crate::ivf::Ivf::from_sections(get, rows, dims).map_err(|e| corrupt("IVF sections", &e))?)
        }
        IndexKind::Hnsw { .. } => {
            IndexView::Hnsw(crate::hnsw::HnswView::from_sections(get, rows).map_err(|e| corrupt("HNSW sections", &e))?)
        }
    };
    // Traversal codes stand for the stored f32 rows: other dimensions or rows are a damaged file.
    if let IndexView::Hnsw(view) = &index {
        if let Some(codes) = view.traversal_codes() {
            if codes.dims() != dims || meta.element != ElementKind::F32 || store.is_none() {
                return Err(SegmentError::Corrupt(format!(
                    "traversal codes of {} dimensions for {dims}-dimensional {:?} rows (stored: {})",
                    codes.dims(),
                    meta.element,
                    store.is_some()
                )));
            }
        }
    }
    // A quantized kind's codes were encoded under the quantizer's metric; searches check it
    // against META's, so a file where the two differ is corrupt (not a panic at search time).
    let quantizer_metric = match &index {
        IndexView::QuantizedFlat(view) => Some(view.quantizer().metric()),
        IndexView::Ivf(view) => Some(view.quantizer().metric()),
        IndexView::Flat | IndexView::BitIvf(_) | IndexView::Hnsw(_) => None,
    };
    if let Some(metric) = quantizer_metric.filter(|&metric| metric != meta.metric) {
        return Err(SegmentError::Corrupt(format!(
            "quantizer metric {metric:?} differs from META's {:?}",
            meta.metric
        )));
    }
    let filters = match file.section(crate::filter::TAG_FILTER) {
        Some(bytes) => Some(crate::filter::FilterColumns::decode(bytes, rows)?),
        None => None,
    };
    Ok(Views { meta, ids, store, index, filters })
}

impl Segment {
    /// Opens and validates the segment file at `path` (memory-mapped; section checksums verified).
    pub fn open(path: &Path) -> Result<Self, SegmentError> {
        Self::from_file(SegmentFile::open(path, true)?)
    }

    /// Validates an already-read segment file.
    pub fn from_file(file: SegmentFile) -> Result<Self, SegmentError> {
        let cell = SegmentCell::try_new(file, open_views)?;
        Ok(Self { cell })
    }

    /// Opens a segment from bytes in memory (tests, freshly built segments).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SegmentError> {
        Self::from_file(SegmentFile::from_bytes(SegmentBytes::copy_from(bytes), true)?)
    }

    /// The segment's META section.
    pub fn meta(&self) -> SegmentMeta {
        self.cell.borrow_dependent().meta
    }

    /// Rows in the segment.
    pub fn len(&self) -> usize {
        self.cell.borrow_dependent().ids.len()
    }

    /// Whether the segment holds no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The identifier stored for `row`.
    ///
    /// # Panics
    /// When `row >= len()`.
    pub fn id(&self, row: usize) -> u64 {
        self.cell.borrow_dependent().ids[row]
    }

    /// All row identifiers, in row order.
    pub fn ids(&self) -> &[u64] {
        self.cell.borrow_dependent().ids
    }

    /// The stored vectors (`None` when the segment keeps none).
    pub fn store(&self) -> Option<VectorStore<'_>> {
        self.cell.borrow_dependent().store
    }

    /// Whether the segment keeps its vectors, i.e. whether [`Segment::search`] returns exact
    /// distances.
    pub fn stores_vectors(&self) -> bool {
        self.cell.borrow_dependent().store.is_some()
    }

    /// The quantizer of a quantized kind (flat or IVF); `None` for flat and HNSW segments and
    /// for IVF segments of packed bit rows (which hold no codes).
    pub fn quantizer(&self) -> Option<crate::quant::Quantizer> {
        match &self.cell.borrow_dependent().index {
            IndexView::QuantizedFlat(view) => Some(view.quantizer().clone()),
            IndexView::Ivf(view) => Some(view.quantizer().clone()),
            IndexView::Flat | IndexView::BitIvf(_) | IndexView::Hnsw(_) => None,
        }
    }

    /// The segment's filter columns (`None` when it was written without a FILTER section).
    pub fn filter_columns(&self) -> Option<&crate::filter::FilterColumns> {
        self.cell.borrow_dependent().filters.as_ref()
    }

    /// Bytes of the segment file.
    pub fn byte_len(&self) -> usize {
        self.cell.borrow_owner().byte_len()
    }

    /// Whether [`Segment::search`] for `k` rows with `params` returns the `k` nearest rows
    /// without missing one that a deeper search would find: flat and quantized flat segments
    /// (whose reranks run until the codes' error bounds settle the top k), IVF (of vectors or
    /// of bits) probing every list, and HNSW whose candidate list covers enough of the graph to be scanned exactly. A
    /// graph walk, or IVF probing some lists, may miss rows.
    pub fn search_is_exact(&self, k: usize, params: &SearchParams) -> bool {
        match &self.cell.borrow_dependent().index {
            IndexView::Flat | IndexView::QuantizedFlat(_) => true,
            IndexView::Ivf(view) => params.probes_for(view.lists()) >= view.lists(),
            IndexView::BitIvf(view) => params.probes_for(view.lists()) >= view.lists(),
            IndexView::Hnsw(view) => view.list_covers_the_graph(k, params.ef_search),
        }
    }

    /// The `k` nearest accepted rows to `query` (raw values; normalised here for cosine), sorted
    /// nearest first with exact distances — or, in a segment without stored vectors, the best
    /// `⌈oversample · k⌉` accepted candidates by estimated distance. See the module docs.
    ///
    /// # Panics
    /// When `query` has a different number of dimensions than the segment.
    pub fn search(&self, query: &[f32], k: usize, params: &SearchParams, predicate: RowPredicate<'_>) -> Vec<Neighbor> {
        let views = self.cell.borrow_dependent();
        assert!(query_fits(query.len(), &views.meta), "query dimensions differ from the segment's");
        let query = Query::new_for(query, views.meta.metric, views.meta.element);
        let Some(store) = views.store.as_ref() else {
            let IndexView::Ivf(view) = &views.index else {
                unreachable!("META validation admits only IVF segments without vectors")
            };
            let probes = params.probes_for(view.lists());
            return view
                .candidates(&query, k, probes, params.oversample, predicate)
                .expect("the query's metric and dimensions were checked against the segment's");
        };
        let results = match &views.index {
            IndexView::Flat => Ok(flat::search(store, &query, k, predicate)),
            IndexView::QuantizedFlat(view) => view.search(store, &query, k, params.oversample, predicate),
            IndexView::Ivf(view) => {
                let probes = params.probes_for(view.lists());
                view.search(store, &query, k, probes, params.oversample, predicate)
            }
            IndexView::BitIvf(view) => {
                let probes = params.probes_for(view.lists());
                return view
                    .search(store, &query, k, probes, predicate)
                    .expect("bit IVF lists were validated against this store at open");
            }
            IndexView::Hnsw(view) => Ok(view.search(store, &query, k, params.ef_search.max(k), predicate)),
        };
        // The views were validated against this store at open and the query's dimensions were
        // checked above, so the kinds' mismatch errors cannot occur.
        results.expect("segment views match their own store")
    }

    /// [`Segment::search`], continuing `state`'s graph walk in an HNSW segment (a deeper search
    /// of the same query expands only what the shorter one left, [`crate::hnsw::ResumableSearch`]);
    /// other kinds search as [`Segment::search`] does and leave the state alone. The same
    /// guarantees. `state` must only be continued with the same query and predicate.
    ///
    /// # Panics
    /// As [`Segment::search`].
    pub fn search_resumable(
        &self,
        state: &mut crate::hnsw::ResumableSearch,
        query: &[f32],
        k: usize,
        params: &SearchParams,
        predicate: RowPredicate<'_>,
    ) -> Vec<Neighbor> {
        let views = self.cell.borrow_dependent();
        let (IndexView::Hnsw(view), Some(store)) = (&views.index, views.store.as_ref()) else {
            return self.search(query, k, params, predicate);
        };
        assert!(query_fits(query.len(), &views.meta), "query dimensions differ from the segment's");
        let query = Query::new_for(query, views.meta.metric, views.meta.element);
        let hnsw_params = crate::hnsw::SearchParams { ef_search: params.ef_search.max(k), ..Default::default() };
        crate::hnsw::with_thread_scratch(|scratch| {
            view.search_resumable(state, scratch, store, &query, k, &hnsw_params, predicate).0
        })
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bits;
#[cfg(test)]
mod tests_bits_ivf;
#[cfg(test)]
mod tests_compact;
#[cfg(test)]
mod tests_filtered;
#[cfg(test)]
mod tests_halfvec;
#[cfg(test)]
mod tests_shapes;
#[cfg(test)]
mod tests_sparse;
