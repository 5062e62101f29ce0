//! Vector segments ([`strata_engine::segment::Segment`]) as a [`SegmentType`]: built with the
//! index's kind, metric and element type; merged by extending the largest HNSW input's graph,
//! by copying codes between segments that keep no vectors, or by a fresh build.

use std::borrow::Cow;

use strata_engine::bitset::{Bitset, RowPredicate};
use strata_engine::format::SegmentFile;
use strata_engine::segment::{
    build_segment, build_segment_extending, build_segment_with_quantizer, merge_segments, BuildError, BuildOptions,
    BuiltSegment, IndexKind, MergeSource, SearchParams, Segment,
};
use strata_engine::topk::Neighbor;

use crate::files::{FileError, IndexFiles};
use crate::manifest::IndexConfig;
use crate::segment_type::{BuildWork, MergeInput, OpenError, SegmentType};

/// The files of a vector index.
pub type VectorFiles = IndexFiles<Segment>;
/// The open segments of a vector index.
pub type VectorSegmentSet = crate::segment_set::SegmentSet<Segment>;
/// One open vector segment with its deletions.
pub type OpenVectorSegment = crate::segment_set::OpenSegment<Segment>;

/// The rows of a vector segment: TIDs and their vectors in stored form, row-major.
#[derive(Debug, Clone, Default)]
pub struct VectorRows {
    /// Heap TIDs.
    pub ids: Vec<u64>,
    /// `ids.len() × dims` floats.
    pub vectors: Vec<f32>,
}

/// How a segment of `rows` rows of an index configured as `config` is built (the seed depends
/// only on the row count, so equal input builds equal segments).
pub fn build_options(config: &IndexConfig, rows: usize, work: &BuildWork) -> BuildOptions {
    BuildOptions {
        kind: config.index_kind(rows),
        metric: config.metric,
        element: config.element,
        seed: 0x5354_5241 ^ rows as u64,
        threads: work.threads.max(1),
        store_vectors: !config.rerank_from_heap,
        cancel: work.cancel.clone(),
    }
}

fn build_failed(kind: &'static str) -> impl Fn(BuildError) -> FileError {
    move |e| match e {
        BuildError::Cancelled(_) => FileError::Cancelled,
        other => FileError::Build { kind, message: other.to_string() },
    }
}

impl SegmentType for Segment {
    type Config = IndexConfig;
    type Rows = VectorRows;
    type Built = BuiltSegment;
    type Query = [f32];
    type Params = SearchParams;

    fn open(file: SegmentFile) -> Result<Self, OpenError> {
        Ok(Segment::from_file(file)?)
    }

    fn ids(&self) -> &[u64] {
        Segment::ids(self)
    }

    /// An index without stored vectors encodes with the quantizer its segments share, so that
    /// they can be merged by copying codes.
    fn build(
        files: &IndexFiles<Self>,
        config: &IndexConfig,
        rows: VectorRows,
        work: &BuildWork,
    ) -> Result<BuiltSegment, FileError> {
        let VectorRows { ids, vectors } = rows;
        let options = build_options(config, ids.len(), work);
        let kind = options.kind.name();
        let quantizer = shared_quantizer(files, config);
        build_segment_with_quantizer(&options, ids, vectors, config.dims as usize, quantizer.as_ref())
            .map_err(build_failed(kind))
    }

    fn merge(config: &IndexConfig, inputs: Vec<MergeInput<Self>>, work: &BuildWork) -> Result<BuiltSegment, FileError> {
        merge_vectors(config, inputs, work)
    }

    fn sections(built: &BuiltSegment) -> Vec<(u32, Cow<'_, [u8]>)> {
        built.sections()
    }

    fn built_rows(built: &BuiltSegment) -> u64 {
        built.meta().rows
    }

    fn search(&self, query: &[f32], k: usize, params: &SearchParams, deleted: Option<&Bitset>) -> Vec<Neighbor> {
        Segment::search(self, query, k, params, RowPredicate { filter: None, deleted })
    }
}

/// The quantizer every segment of an index without stored vectors is encoded with: the one of
/// the first listed segment; `None` for other indexes, or while the index has no segment (the
/// build then trains one). Tries again when a merge replaced the listed files meanwhile.
pub fn shared_quantizer(files: &IndexFiles<Segment>, config: &IndexConfig) -> Option<strata_engine::quant::Quantizer> {
    if !config.rerank_from_heap {
        return None;
    }
    for _attempt in 0..5 {
        let manifest = files.load_manifest().ok().flatten()?;
        if manifest.segments.is_empty() {
            return None;
        }
        for entry in &manifest.segments {
            // Checksums were verified by the segment's writer; only the quantizer is read.
            if let Some(quantizer) = files.open_segment(entry, false).ok().and_then(|s| s.quantizer()) {
                return Some(quantizer);
            }
        }
    }
    None
}

/// A merge of vector segments. An HNSW merge extends the graph of its largest input without
/// deletions (its rows go first), so it costs what the other inputs cost instead of a rebuild of
/// everything; segments without vectors merge their codes bit for bit.
fn merge_vectors(
    config: &IndexConfig,
    mut inputs: Vec<MergeInput<Segment>>,
    work: &BuildWork,
) -> Result<BuiltSegment, FileError> {
    let base = matches!(config.kind, IndexKind::Hnsw { .. })
        .then(|| {
            (0..inputs.len())
                .filter(|&i| {
                    inputs[i].deleted.as_ref().is_none_or(|d| d.count() == 0) && inputs[i].segment.stores_vectors()
                })
                .max_by_key(|&i| (inputs[i].segment.len(), std::cmp::Reverse(i)))
        })
        .flatten();
    if let Some(first) = base {
        inputs.swap(0, first);
    }
    let kept: usize = inputs.iter().map(|i| i.segment.len() - i.deleted.as_ref().map_or(0, Bitset::count)).sum();
    let options = build_options(config, kept, work);
    let dims = config.dims as usize;
    if inputs.iter().all(|i| !i.segment.stores_vectors()) {
        let sources: Vec<MergeSource<'_>> =
            inputs.iter().map(|i| MergeSource { segment: &i.segment, deleted: i.deleted.as_ref() }).collect();
        return merge_segments(&options, &sources).map_err(build_failed("merged"));
    }
    if inputs.iter().any(|i| !i.segment.stores_vectors()) {
        return Err(FileError::Inconsistent("cannot merge segments with and without stored vectors".into()));
    }
    let (mut ids, mut vectors) = (Vec::with_capacity(kept), Vec::with_capacity(kept * dims));
    for input in &inputs {
        // Copying a large input takes a while: a cancel does not wait for it.
        work.cancel.check().map_err(|_| FileError::Cancelled)?;
        let store = input.segment.store().expect("checked: every input stores vectors");
        for row in 0..input.segment.len() {
            if !input.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                ids.push(input.segment.id(row));
                vectors.extend_from_slice(&store.row_f32(row));
            }
        }
    }
    match base {
        Some(_) => build_segment_extending(&options, ids, vectors, dims, &inputs[0].segment),
        None => build_segment(&options, ids, vectors, dims),
    }
    .map_err(build_failed("merged"))
}
