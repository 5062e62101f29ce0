//! Vector segments ([`strata_engine::segment::Segment`]) as a [`SegmentType`]: built with the
//! index's kind, metric and element type; merged by extending the largest HNSW input's graph,
//! by copying codes between segments that keep no vectors, or by a fresh build.

use std::borrow::Cow;

use strata_engine::bitset::{Bitset, RowPredicate};
use strata_engine::format::SegmentFile;
use strata_engine::row_buffer::RowBuffer;
use strata_engine::segment::{
    build_segment, build_segment_extending, build_segment_with_quantizer, merge_segments, BuildError, BuildOptions,
    BuiltSegment, IndexKind, MergeSource, SearchParams, Segment,
};
use strata_engine::topk::Neighbor;

use crate::files::{FileError, IndexFiles};
use crate::manifest::{ConfigKind, IndexConfig};
use crate::segment_type::{BuildWork, MergeInput, OpenError, SegmentType};

/// The files of a vector index.
pub type VectorFiles = IndexFiles<Segment>;
/// The open segments of a vector index.
pub type VectorSegmentSet = crate::segment_set::SegmentSet<Segment>;
/// One open vector segment with its deletions.
pub type OpenVectorSegment = crate::segment_set::OpenSegment<Segment>;

/// The rows of a vector segment: TIDs, their vectors in stored form and their encoded filter
/// values, row-major.
#[derive(Debug, Clone, Default)]
pub struct VectorRows {
    /// Heap TIDs.
    pub ids: Vec<u64>,
    /// `ids.len() × dims` floats, in memory or in a build's mapped spill file.
    pub vectors: RowBuffer,
    /// `ids.len() ×` [`FilterSchema::row_words`](strata_engine::filter::FilterSchema::row_words)
    /// words: each row's filter values (empty for an index without filter columns).
    pub filters: Vec<u32>,
}

impl VectorRows {
    /// Appends row `tid` from its memtable form `row` (`dims` floats of the vector, then the
    /// filter words as `f32` bit patterns; see [`IndexConfig::row_words`]).
    pub fn push_row(&mut self, dims: usize, tid: u64, row: &[f32]) {
        self.ids.push(tid);
        self.vectors.extend_from_slice(&row[..dims]);
        self.filters.extend(row[dims..].iter().map(|w| w.to_bits()));
    }

    /// Puts the rows in TID order (stable; vectors moved in place with one row of scratch, also
    /// in a mapped spill file; no work when they are in order already): the order every node
    /// builds a segment of the same rows in, whatever order its memtable received them (a
    /// primary's memtable in the order concurrent writers claimed slots, a standby's in the order
    /// of the membership log). Each row keeps its vector words and filter words (both row-major,
    /// of equal width per row).
    pub fn sort_by_tid(&mut self) {
        if self.ids.is_sorted() {
            return;
        }
        let rows = self.ids.len();
        let (dims, width) = (self.vectors.len() / rows, self.filters.len() / rows);
        let mut order: Vec<usize> = (0..rows).collect();
        order.sort_by_key(|&row| self.ids[row]);
        self.ids = order.iter().map(|&row| self.ids[row]).collect();
        if width > 0 {
            self.filters =
                order.iter().flat_map(|&row| self.filters[row * width..(row + 1) * width].to_vec()).collect();
        }
        // Row `at` of the result is row `order[at]` of the input: follow each cycle of the
        // permutation once, holding its first row aside.
        let vectors = &mut self.vectors[..];
        let mut done = vec![false; rows];
        let mut held = vec![0.0f32; dims];
        for start in 0..rows {
            if done[start] || order[start] == start {
                continue;
            }
            held.copy_from_slice(&vectors[start * dims..(start + 1) * dims]);
            let mut at = start;
            loop {
                done[at] = true;
                let from = order[at];
                if from == start {
                    vectors[at * dims..(at + 1) * dims].copy_from_slice(&held);
                    break;
                }
                vectors.copy_within(from * dims..(from + 1) * dims, at * dims);
                at = from;
            }
        }
    }
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

    /// Rows are built in TID order ([`VectorRows::sort_by_tid`]), so that every node builds the
    /// same segment of a group. An index without stored vectors encodes with the quantizer its
    /// segments share, so that they can be merged by copying codes.
    fn build(
        files: &IndexFiles<Self>,
        config: &IndexConfig,
        mut rows: VectorRows,
        work: &BuildWork,
    ) -> Result<BuiltSegment, FileError> {
        rows.sort_by_tid();
        let VectorRows { ids, vectors, filters } = rows;
        let options = build_options(config, ids.len(), work);
        let kind = options.kind.name();
        let quantizer = shared_quantizer(files, config);
        let input_ids = (!config.filters.is_empty()).then(|| ids.clone());
        let mut built = build_segment_with_quantizer(&options, ids, vectors, config.dims as usize, quantizer.as_ref())
            .map_err(build_failed(kind))?;
        if let Some(input_ids) = input_ids {
            attach_filters(config, &input_ids, &filters, &mut built)?;
        }
        Ok(built)
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
    let base = matches!(config.kind, ConfigKind::Vector(IndexKind::Hnsw { .. }))
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
    let width = config.filters.row_words();
    // Every kept row's TID and filter words, in input order (filter words only when the index has
    // filter columns).
    let (mut ids, mut filters) = (Vec::with_capacity(kept), Vec::with_capacity(kept * width));
    for input in &inputs {
        let words = if width == 0 { Vec::new() } else { segment_filter_rows(config, &input.segment)? };
        for row in 0..input.segment.len() {
            if !input.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                ids.push(input.segment.id(row));
                filters.extend_from_slice(&words[row * width..(row + 1) * width]);
            }
        }
    }
    let mut built = if inputs.iter().all(|i| !i.segment.stores_vectors()) {
        let sources: Vec<MergeSource<'_>> =
            inputs.iter().map(|i| MergeSource { segment: &i.segment, deleted: i.deleted.as_ref() }).collect();
        merge_segments(&options, &sources).map_err(build_failed("merged"))?
    } else {
        if inputs.iter().any(|i| !i.segment.stores_vectors()) {
            return Err(FileError::Inconsistent("cannot merge segments with and without stored vectors".into()));
        }
        let mut vectors = Vec::with_capacity(kept * dims);
        for input in &inputs {
            // Copying a large input takes a while: a cancel does not wait for it.
            work.cancel.check().map_err(|_| FileError::Cancelled)?;
            let store = input.segment.store().expect("checked: every input stores vectors");
            for row in 0..input.segment.len() {
                if !input.deleted.as_ref().is_some_and(|d| d.contains(row)) {
                    vectors.extend_from_slice(&store.stored_row_f32(row));
                }
            }
        }
        let ids = if width == 0 { std::mem::take(&mut ids) } else { ids.clone() };
        match base {
            Some(_) => build_segment_extending(&options, ids, vectors, dims, &inputs[0].segment),
            None => build_segment(&options, ids, vectors, dims),
        }
        .map_err(build_failed("merged"))?
    };
    if width > 0 {
        attach_filters(config, &ids, &filters, &mut built)?;
    }
    Ok(built)
}

/// The encoded filter values of every row of `segment` (an index with filter columns), in row
/// order.
fn segment_filter_rows(config: &IndexConfig, segment: &Segment) -> Result<Vec<u32>, FileError> {
    let columns = segment.filter_columns().ok_or_else(|| {
        FileError::Inconsistent("a segment of an index with filter columns has no FILTER section".into())
    })?;
    let mut words = Vec::with_capacity(segment.len() * config.filters.row_words());
    config.filters.encode_segment_rows(columns, &mut words).map_err(|e| filter_failed(&e))?;
    Ok(words)
}

fn filter_failed(e: &strata_engine::filter::FilterError) -> FileError {
    FileError::Build { kind: "filter columns of a", message: e.to_string() }
}

/// Adds the FILTER section to `built` from the filter words of the rows given to its build
/// (`input_ids`, row-major `filters`): the built segment may hold them in another order or
/// leave rows out (zero vectors under cosine distance), so each row's words are found by TID.
fn attach_filters(
    config: &IndexConfig,
    input_ids: &[u64],
    filters: &[u32],
    built: &mut BuiltSegment,
) -> Result<(), FileError> {
    let width = config.filters.row_words();
    let payload: Cow<'_, [u32]> = if built.ids() == input_ids {
        Cow::Borrowed(filters)
    } else {
        let position: std::collections::HashMap<u64, usize> =
            input_ids.iter().enumerate().map(|(at, &tid)| (tid, at)).collect();
        let mut words = Vec::with_capacity(built.ids().len() * width);
        for tid in built.ids() {
            let at = *position
                .get(tid)
                .ok_or_else(|| FileError::Inconsistent(format!("built segment row {tid} was not among its inputs")))?;
            words.extend_from_slice(&filters[at * width..(at + 1) * width]);
        }
        Cow::Owned(words)
    };
    let columns = config.filters.build_columns(built.ids().len(), &payload).map_err(|e| filter_failed(&e))?;
    built.set_filter_columns(&columns).map_err(|e| filter_failed(&e))
}

#[cfg(test)]
mod tests;
