//! The owned graph, its build parameters and its serialisation into sections.

use super::view::HnswView;
use super::{
    build, HnswError, DEFAULT_EF_CONSTRUCTION, DEFAULT_M, FORMAT_VERSION, TAG_HEADER, TAG_LAYER0, TAG_LEVELS,
    TAG_UPPER, TAG_UPPER_OFFSETS,
};
use crate::cancel::Cancel;
use crate::spill::{SectionBytes, SpillBuffer};
use crate::store::VectorStore;

/// The largest accepted `ef_construction`.
pub const MAX_EF_CONSTRUCTION: usize = 4096;

/// Build parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswParams {
    /// Links per node on layers ≥ 1; layer 0 holds up to `2 · m`. Valid range `2..=128`.
    pub m: usize,
    /// Size of the dynamic candidate list while inserting. Valid range `m..=4096`.
    pub ef_construction: usize,
    /// Seed of the ChaCha RNG that draws node levels.
    pub seed: u64,
}

impl Default for HnswParams {
    /// `m = 16`, `ef_construction = 64` (pgvector's defaults), a fixed seed.
    fn default() -> Self {
        Self { m: DEFAULT_M, ef_construction: DEFAULT_EF_CONSTRUCTION, seed: 0x5EED_5EED }
    }
}

impl HnswParams {
    /// Checks the ranges documented on the fields; `Ok` guarantees [`HnswGraph::build`] accepts
    /// the parameters.
    pub fn validate(&self) -> Result<(), HnswError> {
        if !(2..=128).contains(&self.m) {
            return Err(HnswError::InvalidM(self.m));
        }
        if self.ef_construction < self.m || self.ef_construction > MAX_EF_CONSTRUCTION {
            return Err(HnswError::InvalidEfConstruction {
                ef_construction: self.ef_construction,
                m: self.m,
                max: MAX_EF_CONSTRUCTION,
            });
        }
        Ok(())
    }
}

/// An owned HNSW graph over the rows of a store: flat arrays with offsets, no pointers and no
/// locks (see the [module documentation](super) for the layout). Search it through
/// [`view`](Self::view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HnswGraph {
    m: usize,
    ef_construction: usize,
    rows: usize,
    nodes: usize,
    entry_point: u32,
    max_level: u8,
    levels: Vec<u8>,
    /// Layer-0 slots as native-endian words, in memory or spilled ([`crate::spill`]).
    layer0: SpillBuffer,
    upper_offsets: Vec<u32>,
    upper: Vec<u32>,
    /// Searches descend the upper layers with a list ([`super::GraphPolicy::upper_list`]).
    upper_list: bool,
}

impl HnswGraph {
    /// Builds a graph over `store`.
    ///
    /// - `rows`: the row offsets to index, inserted in this order (`None`: every row, in order).
    ///   Rows not listed are not in the graph and are never returned by a search (use this for
    ///   deleted rows and for zero vectors under cosine distance).
    /// - `threads`: size of the rayon pool inserting rows (`0`: rayon's default).
    ///
    /// Guarantees: the graph satisfies every invariant [`HnswView::from_sections`] and
    /// [`HnswView::verify_links`] check; it is a deterministic function of the store, `rows` (and
    /// their order) and `params`, equal byte for byte whatever `threads` is and from run to run
    /// (the batched insertion of `batch.rs`). Memory: the graph's arrays plus a few kilobytes a
    /// batch; the vectors are read from `store`, never copied.
    ///
    /// Errors: invalid `params`, a row listed twice or outside the store, a store of `2³² − 1`
    /// rows or more, or a thread pool that cannot start.
    pub fn build(
        store: &VectorStore<'_>,
        rows: Option<&[usize]>,
        params: &HnswParams,
        threads: usize,
    ) -> Result<Self, HnswError> {
        build::build(store, rows, params, threads, None, &Cancel::default(), build::GraphBuildSupport::default())
    }

    /// Builds like [`HnswGraph::build`] over every row of `store`, polling `cancel` before each
    /// inserted row: once it is requested the build stops and returns [`HnswError::Cancelled`].
    pub fn build_cancellable(
        store: &VectorStore<'_>,
        params: &HnswParams,
        threads: usize,
        cancel: &Cancel,
    ) -> Result<Self, HnswError> {
        build::build(store, None, params, threads, None, cancel, build::GraphBuildSupport::default())
    }

    /// Extends like [`HnswGraph::extend`] (every row from `base.rows()` on), polling `cancel`
    /// as [`HnswGraph::build_cancellable`] does.
    pub fn extend_cancellable(
        store: &VectorStore<'_>,
        base: &HnswView<'_>,
        params: &HnswParams,
        threads: usize,
        cancel: &Cancel,
    ) -> Result<Self, HnswError> {
        build::build(store, None, params, threads, Some(base), cancel, build::GraphBuildSupport::default())
    }

    /// Builds a graph over `store` by extending `base`, a graph over the first `base.rows()` rows
    /// of `store` (the same vectors in the same order, e.g. the largest input of a merge): base's
    /// nodes, levels and links are kept, and the remaining rows (`rows`, or every row from
    /// `base.rows()` on) are inserted as [`HnswGraph::build`] inserts them — so the cost is that of
    /// the new rows only. Existing nodes gain links to new ones as insertion prunes their lists.
    ///
    /// Guarantees as for `build` (every invariant of [`HnswView::from_sections`] and
    /// [`HnswView::verify_links`]). Errors as for
    /// `build`, plus a base with another `M` or more rows than `store`, or a listed row below
    /// `base.rows()`.
    pub fn extend(
        store: &VectorStore<'_>,
        base: &HnswView<'_>,
        rows: Option<&[usize]>,
        params: &HnswParams,
        threads: usize,
    ) -> Result<Self, HnswError> {
        build::build(store, rows, params, threads, Some(base), &Cancel::default(), build::GraphBuildSupport::default())
    }

    /// Builds over every row of `store` (extending `base` when given, as
    /// [`HnswGraph::extend`] does) with `support` ([`build::GraphBuildSupport`]: traversal codes
    /// to walk on, a directory for the link array), polling `cancel` as
    /// [`HnswGraph::build_cancellable`] does. Guarantees and errors as `build` and `extend`,
    /// plus [`HnswError::Spill`] when the link array's file cannot be made.
    pub fn build_supported(
        store: &VectorStore<'_>,
        base: Option<&HnswView<'_>>,
        params: &HnswParams,
        threads: usize,
        cancel: &Cancel,
        support: build::GraphBuildSupport<'_>,
    ) -> Result<Self, HnswError> {
        build::build(store, None, params, threads, base, cancel, support)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        m: usize,
        ef_construction: usize,
        rows: usize,
        nodes: usize,
        entry_point: u32,
        max_level: u8,
        levels: Vec<u8>,
        layer0: SpillBuffer,
        upper_offsets: Vec<u32>,
        upper: Vec<u32>,
    ) -> Self {
        Self {
            m,
            ef_construction,
            rows,
            nodes,
            entry_point,
            max_level,
            levels,
            layer0,
            upper_offsets,
            upper,
            upper_list: false,
        }
    }

    /// The graph with [`super::GraphPolicy::upper_list`] set as given (recorded in its header).
    pub(crate) fn with_upper_list(mut self, upper_list: bool) -> Self {
        self.upper_list = upper_list;
        self
    }

    /// A zero-copy view for searching.
    pub fn view(&self) -> HnswView<'_> {
        HnswView::from_parts(
            self.m,
            self.ef_construction,
            self.rows,
            self.nodes,
            self.entry_point,
            self.max_level,
            &self.levels,
            self.layer0.words(),
            &self.upper_offsets,
            &self.upper,
        )
        .with_upper_list(self.upper_list)
    }

    /// `M`.
    pub fn m(&self) -> usize {
        self.m
    }

    /// The number of rows the graph ranges over (the store's length at build time).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The number of nodes (indexed rows).
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// Bytes held by the graph's arrays (what [`sections`](Self::sections) writes, less the
    /// 32-byte header).
    pub fn memory_bytes(&self) -> usize {
        self.levels.len() + self.layer0.len() + 4 * (self.upper_offsets.len() + self.upper.len())
    }

    /// The stored form: `(tag, little-endian bytes)` for each of the five sections described in
    /// the [module documentation](super), in tag order. [`HnswView::from_sections`] accepts them
    /// (placed at 4-byte aligned addresses) and searches exactly like [`view`](Self::view).
    pub fn sections(&self) -> Vec<(u32, Vec<u8>)> {
        vec![
            (TAG_HEADER, le_bytes(&self.header())),
            (TAG_LEVELS, self.levels.clone()),
            (TAG_LAYER0, le_bytes(self.layer0.words())),
            (TAG_UPPER_OFFSETS, le_bytes(&self.upper_offsets)),
            (TAG_UPPER, le_bytes(&self.upper)),
        ]
    }

    /// The stored form as [`sections`](Self::sections) gives it, moving the arrays instead of
    /// copying them: the layer-0 links (the bulk) stay where the build put them, in memory or in
    /// its spill file.
    pub fn into_sections(self) -> Vec<(u32, SectionBytes)> {
        let header = le_bytes(&self.header());
        let Self { levels, mut layer0, upper_offsets, upper, .. } = self;
        layer0.words_to_le();
        vec![
            (TAG_HEADER, header.into()),
            (TAG_LEVELS, levels.into()),
            (TAG_LAYER0, SectionBytes::Buffer(layer0)),
            (TAG_UPPER_OFFSETS, le_bytes(&upper_offsets).into()),
            (TAG_UPPER, le_bytes(&upper).into()),
        ]
    }

    /// The HEADER section's words.
    fn header(&self) -> [u32; 8] {
        [
            FORMAT_VERSION,
            self.m as u32,
            self.rows as u32,
            self.nodes as u32,
            self.entry_point,
            u32::from(self.max_level),
            self.ef_construction as u32,
            if self.upper_list { super::FLAG_UPPER_LIST } else { 0 },
        ]
    }
}

fn le_bytes(words: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(words.len() * 4);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}
