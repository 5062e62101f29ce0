//! Building a segment from `(ids, vectors)` in bounded memory.
//!
//! Memory: the caller hands over its `Vec<f32>` of raw vectors, which is normalised in place for
//! cosine (no copy); `f16` storage adds a half-size copy while converting (peak 1.5 × N × d × 4
//! bytes), after which the `f32` rows are dropped. Index structures come on top.

use half::f16;
use thiserror::Error;

use super::meta::{IndexKind, SegmentMeta};
use super::{TAG_IDS, TAG_META, TAG_VECTORS};
use crate::cancel::Cancel;
use crate::hnsw::{CodeResolution, GraphBuildSupport, GraphPolicy, HnswGraph, HnswParams, TraversalCodes};
use crate::ivf::{BitIvf, Ivf, IvfParams};
use crate::metric::Metric;
use crate::quant::{QuantizedFlat, Quantizer, QuantizerParams};
use crate::row_buffer::RowBuffer;
use crate::spill::SectionBytes;
use crate::store::{ElementKind, Elements, StoreError, VectorStore};

/// How to build a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOptions {
    /// The index kind and its parameters.
    pub kind: IndexKind,
    /// The distance metric.
    pub metric: Metric,
    /// The element type the vectors are stored as.
    pub element: ElementKind,
    /// Seed for every randomised step (deterministic builds).
    pub seed: u64,
    /// Worker threads for parallel build steps (at least 1).
    pub threads: usize,
    /// Whether the segment keeps the vectors (the VECTORS section). `false` is allowed for IVF
    /// of numeric rows only (packed bit rows are their own codes): the segment then holds codes alone, searches return estimated distances, and the
    /// caller reranks from its own copy of the vectors (a table's rows).
    pub store_vectors: bool,
    /// Polled between units of work: once requested, the build stops soon and returns
    /// [`BuildError::Cancelled`] (the default token never cancels).
    pub cancel: Cancel,
}

/// Why a build failed.
#[derive(Debug, Error)]
pub enum BuildError {
    /// `ids` and `vectors` disagree, or dimensions are invalid.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The number of ids differs from the number of vectors.
    #[error("{ids} ids for {rows} vectors")]
    IdCount {
        /// Ids supplied.
        ids: usize,
        /// Vectors supplied.
        rows: usize,
    },
    /// A vector element is NaN or infinite.
    #[error("row {0} holds a non-finite element")]
    NonFinite(usize),
    /// The index kind's parameters are invalid.
    #[error("invalid {kind} parameters: {reason}")]
    Parameters {
        /// The kind.
        kind: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The build's [`Cancel`] token was requested.
    #[error(transparent)]
    Cancelled(#[from] crate::cancel::Cancelled),
    /// A build over spilled rows could not make the spill file of its own arrays in their
    /// directory ([`crate::spill`]): ENOSPC, EIO.
    #[error("build spill file in {dir}: {source}")]
    Spill {
        /// The directory.
        dir: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// Stored vectors of a built segment.
#[derive(Debug, Clone)]
enum StoredVectors {
    F32(RowBuffer),
    F16(Vec<f16>),
    /// Packed sparse rows ([`crate::sparse_rows`]).
    Sparse(RowBuffer),
    /// Packed bit rows ([`crate::bit_rows`]).
    Bits(RowBuffer),
}

/// A segment built in memory, ready to be written as a segment file.
#[derive(Debug, Clone)]
pub struct BuiltSegment {
    meta: SegmentMeta,
    ids: Vec<u64>,
    vectors: Option<StoredVectors>,
    index_sections: Vec<(u32, SectionBytes)>,
    /// Ids of rows left out: zero vectors under cosine distance have no direction and, as in
    /// pgvector, are not indexed.
    pub skipped_ids: Vec<u64>,
}

impl BuiltSegment {
    /// The META section contents.
    pub fn meta(&self) -> SegmentMeta {
        self.meta
    }

    /// The heap TIDs of its rows, in row order.
    pub fn ids(&self) -> &[u64] {
        &self.ids
    }

    /// The file's sections, borrowed: `(tag, bytes)` in file order.
    pub fn sections(&self) -> Vec<(u32, std::borrow::Cow<'_, [u8]>)> {
        let mut out = vec![
            (TAG_META, std::borrow::Cow::Owned(self.meta.encode().to_vec())),
            (TAG_IDS, std::borrow::Cow::Borrowed(bytemuck::cast_slice(&self.ids))),
        ];
        match &self.vectors {
            Some(StoredVectors::F32(v) | StoredVectors::Sparse(v) | StoredVectors::Bits(v)) => {
                out.push((TAG_VECTORS, std::borrow::Cow::Borrowed(bytemuck::cast_slice(v))));
            }
            Some(StoredVectors::F16(v)) => out.push((TAG_VECTORS, std::borrow::Cow::Borrowed(bytemuck::cast_slice(v)))),
            None => {}
        }
        out.extend(self.index_sections.iter().map(|(tag, bytes)| (*tag, std::borrow::Cow::Borrowed(&bytes[..]))));
        out
    }

    /// Adds the FILTER section holding `columns` (replacing any earlier one).
    ///
    /// Guarantees: the segment then opens with [`Segment::filter_columns`](super::Segment::filter_columns)
    /// equal to `columns`; fails when `columns` covers another number of rows than the segment.
    pub fn set_filter_columns(
        &mut self,
        columns: &crate::filter::FilterColumns,
    ) -> Result<(), crate::filter::FilterError> {
        if columns.rows() != self.ids.len() {
            return Err(crate::filter::FilterError::RowCount { expected: self.ids.len(), actual: columns.rows() });
        }
        self.index_sections.retain(|(tag, _)| *tag != crate::filter::TAG_FILTER);
        self.index_sections.push((crate::filter::TAG_FILTER, columns.encode().into()));
        Ok(())
    }

    /// The whole segment file as bytes in memory.
    pub fn to_bytes(&self) -> Vec<u8> {
        let sections = self.sections();
        let refs: Vec<(u32, &[u8])> = sections.iter().map(|(t, b)| (*t, b.as_ref())).collect();
        crate::format::encode(&refs).expect("a built segment has distinct section tags")
    }
}

/// The memory a build uses per row besides the rows' own words and ids ([`build_memory_per_row`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildMemory {
    /// Bytes a row that stay in the process's own memory.
    pub private: usize,
    /// Bytes a row that live beside the rows: in memory while the rows are, in unnamed files in
    /// the rows' spill directory when they come from a spill file ([`RowBuffer::spill_dir`],
    /// [`crate::spill`]).
    pub spillable: usize,
}

/// The memory a build of `kind` over rows of `dims` dimensions uses per row besides the rows'
/// own words and ids:
/// - HNSW: the layer-0 links (`8 · m`, written to the file from where the build put them) and
///   codes are spillable: the 4-bit walk codes the graph build walks on (`16 · ⌈dims / 32⌉`),
///   then, once they are freed, the segment's traversal codes (`dims`), so the larger of the
///   two; private are a level (1), 8 bytes that per-node locks took before the build went
///   lock-free (kept, so that a budget makes the segments it made), the insertion order (4),
///   upper-layer offsets (4) and slots (`⌈4m / (m − 1)⌉` bytes expected), the last two also
///   copied into their sections, the visited stamps of two build threads (4 each;
///   `strata.build_threads` is 2 by default, each more thread adds 4 a row) and the codes' norm
///   (4, L2 only, counted always; again one kind of codes at a time): `29 + 2 · ⌈4m / (m − 1)⌉`,
///   39 at m = 16;
/// - IVF and quantized flat: their codes and training, `dims · bits / 8 + 200`, private (they
///   do not spill);
/// - flat: nothing.
///
/// Before links and codes could spill, the benchmark's counting allocator measured 267 bytes a
/// row for HNSW m = 16 at 100k × 384 while it linked the rows (links, locks and levels, then the
/// links' section copies, `16 · m + 16` = 272 counted); the copy of the layer-0 section is gone.
pub fn build_memory_per_row(kind: IndexKind, dims: usize) -> BuildMemory {
    match kind {
        IndexKind::Flat => BuildMemory { private: 0, spillable: 0 },
        IndexKind::Hnsw { m, .. } => {
            let m = (m as usize).max(2);
            let codes = dims.max(crate::hnsw::walk_code_row_bytes(dims));
            BuildMemory { private: 29 + 2 * (4 * m).div_ceil(m - 1), spillable: 8 * m + codes }
        }
        IndexKind::Ivf { bits, .. } | IndexKind::QuantizedFlat { bits } => {
            BuildMemory { private: (dims * bits as usize).div_ceil(8) + 200, spillable: 0 }
        }
    }
}

/// Builds a segment over `vectors` (row-major, `dims` per row, in memory or in a mapped spill
/// file: [`RowBuffer`]) identified by `ids`. The segment keeps the buffer as its vectors until it
/// is dropped.
pub fn build_segment(
    options: &BuildOptions,
    ids: Vec<u64>,
    vectors: impl Into<RowBuffer>,
    dims: usize,
) -> Result<BuiltSegment, BuildError> {
    build_segment_with_quantizer(options, ids, vectors, dims, None)
}

/// Builds like [`build_segment`]; a quantized kind encodes with `quantizer` when one is given
/// instead of training its own (so that segments of one index can be merged by copying codes,
/// see [`super::merge_segments`]). Errors as `build_segment`, plus a quantizer made for other
/// dimensions or another metric.
pub fn build_segment_with_quantizer(
    options: &BuildOptions,
    ids: Vec<u64>,
    vectors: impl Into<RowBuffer>,
    dims: usize,
    quantizer: Option<&Quantizer>,
) -> Result<BuiltSegment, BuildError> {
    build(options, ids, vectors.into(), dims, quantizer, None)
}

/// Builds an HNSW segment whose first rows are exactly the rows of `base` (same ids, same
/// vectors, same order — a merge puts its largest input first) by extending `base`'s graph
/// ([`crate::hnsw::HnswGraph::extend`]): only the other rows are inserted, so a merge costs what
/// its smaller inputs cost. Errors as [`build_segment`], plus `base` not an HNSW segment of the
/// same `M`, metric and element type, or its ids not the first ids given.
pub fn build_segment_extending(
    options: &BuildOptions,
    ids: Vec<u64>,
    vectors: impl Into<RowBuffer>,
    dims: usize,
    base: &super::Segment,
) -> Result<BuiltSegment, BuildError> {
    build(options, ids, vectors.into(), dims, None, Some(base))
}

fn build(
    options: &BuildOptions,
    ids: Vec<u64>,
    mut vectors: RowBuffer,
    dims: usize,
    quantizer: Option<&Quantizer>,
    base: Option<&super::Segment>,
) -> Result<BuiltSegment, BuildError> {
    if !options.store_vectors && !matches!(options.kind, IndexKind::Ivf { .. }) {
        return Err(BuildError::Parameters {
            kind: options.kind.name(),
            reason: "only IVF segments can leave their vectors out".into(),
        });
    }
    if !options.store_vectors && options.element == ElementKind::Bits {
        return Err(BuildError::Parameters {
            kind: options.kind.name(),
            reason: "packed bit rows are their own codes: an IVF segment of them keeps them".into(),
        });
    }
    if dims == 0 {
        return Err(StoreError::ZeroDimensions.into());
    }
    if !vectors.len().is_multiple_of(dims) {
        return Err(StoreError::RaggedRows { elements: vectors.len(), dims }.into());
    }
    let rows = vectors.len() / dims;
    if ids.len() != rows {
        return Err(BuildError::IdCount { ids: ids.len(), rows });
    }
    // Packed bit rows hold raw bit patterns, not numbers.
    let numeric = options.element != ElementKind::Bits;
    if let Some(bad) = vectors.iter().position(|v| numeric && !v.is_finite()) {
        return Err(BuildError::NonFinite(bad / dims));
    }
    let (ids, skipped_ids) = normalise_rows(&mut vectors, ids, dims, options.metric, options.element);
    let spill_dir = vectors.spill_dir().map(std::path::Path::to_path_buf);
    let base_graph = match base {
        Some(base) => Some(base_graph(options, base, &ids)?),
        None => None,
    };
    let rows = ids.len();
    let stored = match options.element {
        ElementKind::F32 => StoredVectors::F32(vectors),
        ElementKind::SparseF32 => StoredVectors::Sparse(vectors),
        ElementKind::Bits => StoredVectors::Bits(vectors),
        ElementKind::F16 => {
            let halves = vectors.iter().map(|&v| f16::from_f32(v)).collect();
            drop(vectors);
            StoredVectors::F16(halves)
        }
    };
    let meta = SegmentMeta {
        kind: options.kind,
        metric: options.metric,
        element: options.element,
        dims: dims as u32,
        rows: rows as u64,
        seed: options.seed,
        vectors_stored: options.store_vectors,
    };
    let elements = match &stored {
        StoredVectors::F32(v) => Elements::F32(v),
        StoredVectors::F16(v) => Elements::F16(v),
        StoredVectors::Sparse(v) => Elements::Sparse(v),
        StoredVectors::Bits(v) => Elements::Bits(v),
    };
    let store = VectorStore::new(elements, dims, options.metric)?;
    options.cancel.check()?;
    let index_sections = build_index(options, &store, quantizer, base_graph.as_ref(), spill_dir.as_deref())?;
    options.cancel.check()?;
    let vectors = options.store_vectors.then_some(stored);
    Ok(BuiltSegment { meta, ids, vectors, index_sections, skipped_ids })
}

impl BuiltSegment {
    /// Assembles a segment from parts made elsewhere (a merge).
    pub(crate) fn from_parts(meta: SegmentMeta, ids: Vec<u64>, index_sections: Vec<(u32, Vec<u8>)>) -> Self {
        let index_sections = index_sections.into_iter().map(|(tag, bytes)| (tag, bytes.into())).collect();
        Self { meta, ids, vectors: None, index_sections, skipped_ids: Vec::new() }
    }
}

/// Builds the kind-specific structure over `store` on a pool of `options.threads` threads.
/// The graph of `base` when it can seed the build of `ids` under `options`.
fn base_graph<'b>(
    options: &BuildOptions,
    base: &'b super::Segment,
    ids: &[u64],
) -> Result<crate::hnsw::HnswView<'b>, BuildError> {
    let refuse = |reason: &str| BuildError::Parameters { kind: options.kind.name(), reason: reason.into() };
    let views = base.cell.borrow_dependent();
    let (super::IndexView::Hnsw(view), IndexKind::Hnsw { m, .. }) = (&views.index, options.kind) else {
        return Err(refuse("only an HNSW segment can be extended into an HNSW segment"));
    };
    if view.m() != m as usize || views.meta.metric != options.metric || views.meta.element != options.element {
        return Err(refuse("the base segment has another M, metric or element type"));
    }
    if ids.len() < views.ids.len() || ids[..views.ids.len()] != *views.ids {
        return Err(refuse("the base segment's rows must come first, in its order"));
    }
    // Opening read only what is sized by the rows; the links are copied into the new graph, so
    // every one is checked first (a merge costs far more than this pass).
    view.verify_links().map_err(|e| refuse(&format!("the base segment's graph is damaged: {e}")))?;
    Ok(*view)
}

fn build_index(
    options: &BuildOptions,
    store: &VectorStore<'_>,
    quantizer: Option<&Quantizer>,
    base: Option<&crate::hnsw::HnswView<'_>>,
    spill_dir: Option<&std::path::Path>,
) -> Result<Vec<(u32, SectionBytes)>, BuildError> {
    let parameters = |kind: IndexKind, reason: String| BuildError::Parameters { kind: kind.name(), reason };
    if store.is_empty() {
        return match options.kind {
            IndexKind::Flat => Ok(Vec::new()),
            other => Err(parameters(other, "a segment needs at least one row".into())),
        };
    }
    let pool = crate::pool::JoinedPool::new(options.threads.max(1))
        .map_err(|e| parameters(options.kind, format!("cannot start build threads: {e}")))?;
    let cancelled = || options.cancel.is_requested();
    let owned = |sections: Vec<(u32, Vec<u8>)>| sections.into_iter().map(|(tag, bytes)| (tag, bytes.into())).collect();
    let outcome = pool.install(|| match options.kind {
        IndexKind::Flat => Ok(Vec::new()),
        IndexKind::QuantizedFlat { bits } => {
            let params = QuantizerParams { bits, seed: options.seed };
            let built = match quantizer {
                Some(q) => QuantizedFlat::with_quantizer_cancellable(store, q.clone(), &options.cancel),
                None => QuantizedFlat::build_cancellable(store, &params, &options.cancel),
            };
            built.map(|q| owned(q.into_sections())).map_err(|e| parameters(options.kind, e.to_string()))
        }
        IndexKind::Ivf { lists, .. } if store.element_kind() == ElementKind::Bits => {
            if quantizer.is_some() {
                return Err(parameters(options.kind, "IVF lists of packed bit rows take no quantizer".into()));
            }
            let params = IvfParams {
                lists: lists as usize,
                seed: options.seed,
                threads: 0,
                cancel: options.cancel.clone(),
                ..IvfParams::default()
            };
            BitIvf::build(store, &params)
                .map(|ivf| owned(ivf.into_sections()))
                .map_err(|e| parameters(options.kind, e.to_string()))
        }
        IndexKind::Ivf { lists, bits } => {
            let params = IvfParams {
                lists: lists as usize,
                bits,
                seed: options.seed,
                threads: 0,
                cancel: options.cancel.clone(),
                ..IvfParams::default()
            };
            Ivf::build_with_quantizer(store, &params, quantizer)
                .map(|ivf| owned(ivf.into_sections()))
                .map_err(|e| parameters(options.kind, e.to_string()))
        }
        IndexKind::Hnsw { m, ef_construction } => {
            let params = HnswParams { m: m as usize, ef_construction: ef_construction as usize, seed: options.seed };
            let spill_failed = |source: std::io::Error| BuildError::Spill {
                dir: spill_dir.map_or_else(String::new, |d| d.display().to_string()),
                source,
            };
            // Codes only where they tell the rows' neighbours apart (`hnsw::CodeResolution`).
            // The graph first (walking on its own 4-bit codes, freed when it is done), then the
            // segment's 8-bit codes: the two never take memory at once.
            let resolution = CodeResolution::of(store);
            let policy = GraphPolicy::for_rows(store, resolution);
            let support = GraphBuildSupport { walk_codes: resolution.walk_codes, spill_dir, policy };
            let graph =
                HnswGraph::build_supported(store, base, &params, options.threads.max(1), &options.cancel, support)
                    .map_err(|e| match e {
                        crate::hnsw::HnswError::Spill { kind, message } => {
                            spill_failed(std::io::Error::new(kind, message))
                        }
                        other => parameters(options.kind, other.to_string()),
                    })?;
            let codes = if resolution.traversal_codes {
                TraversalCodes::encode_sections(store, spill_dir).map_err(spill_failed)?
            } else {
                None
            };
            let mut sections = graph.into_sections();
            sections.extend(codes.unwrap_or_default());
            Ok(sections)
        }
    });
    // Whatever error a cancelled step reported, the build was cancelled.
    if cancelled() {
        return Err(crate::cancel::Cancelled.into());
    }
    outcome
}

/// Normalises rows for cosine in place (`f16` rows only lose their zero rows: they are stored as
/// given, see [`crate::store`]), compacting away zero rows; returns the kept and skipped ids.
fn normalise_rows(
    vectors: &mut RowBuffer,
    ids: Vec<u64>,
    dims: usize,
    metric: Metric,
    element: ElementKind,
) -> (Vec<u64>, Vec<u64>) {
    if metric != Metric::Cosine {
        return (ids, Vec::new());
    }
    let normalise = |row: &mut [f32]| {
        if element == ElementKind::SparseF32 {
            crate::sparse_rows::normalize_in_place(row)
        } else if element == ElementKind::F16 {
            row.iter().any(|&v| v != 0.0)
        } else {
            crate::vector_math::normalize_in_place(row)
        }
    };
    let mut kept = Vec::with_capacity(ids.len());
    let mut skipped = Vec::new();
    let mut write = 0;
    for (read, id) in ids.into_iter().enumerate() {
        if normalise(&mut vectors[read * dims..(read + 1) * dims]) {
            vectors.copy_within(read * dims..(read + 1) * dims, write * dims);
            write += 1;
            kept.push(id);
        } else {
            skipped.push(id);
        }
    }
    vectors.truncate(write * dims);
    (kept, skipped)
}
