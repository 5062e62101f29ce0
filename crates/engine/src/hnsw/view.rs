//! A borrowed, validated view over a graph's arrays (owned or read in place from a file).

use super::codes::TraversalCodes;
use super::layer::Links;
use super::{
    HnswError, HnswGraph, ABSENT_LEVEL, FLAG_UPPER_LIST, FORMAT_VERSION, MAX_LEVEL, NO_NODE, TAG_HEADER, TAG_LAYER0,
    TAG_LEVELS, TAG_UPPER, TAG_UPPER_OFFSETS,
};

/// A zero-copy view over an HNSW graph's arrays.
///
/// Guarantees: every view satisfies the stored-layout invariants of the
/// [module documentation](super) except, for a view read from sections, the contents of the
/// neighbour lists — it is made either from an [`HnswGraph`] (which upholds them all) or by
/// [`from_sections`](Self::from_sections), which checks everything whose size is the row count.
/// A neighbour slot is checked where it is read instead: a link that names no node of the
/// list's layer (only in a damaged file) is skipped, and [`verify_links`](Self::verify_links)
/// checks every list at once. So searching a view never panics on its own data, never indexes
/// out of bounds and only ever reaches nodes of the graph.
#[derive(Debug, Clone, Copy)]
pub struct HnswView<'a> {
    pub(crate) m: usize,
    ef_construction: usize,
    pub(crate) rows: usize,
    nodes: usize,
    pub(crate) entry_point: u32,
    pub(crate) max_level: u8,
    pub(crate) levels: &'a [u8],
    layer0: &'a [u32],
    upper_offsets: &'a [u32],
    upper: &'a [u32],
    /// The rows' traversal codes, when the segment has them (never for a graph being built).
    pub(crate) codes: Option<TraversalCodes<'a>>,
    /// Searches descend the upper layers with a list ([`super::GraphPolicy::upper_list`]).
    pub(crate) upper_list: bool,
}

impl Links for HnswView<'_> {
    #[inline]
    fn for_each_neighbor(&self, node: u32, layer: usize, mut f: impl FnMut(u32)) {
        for &n in self.slots(node, layer) {
            if n == NO_NODE {
                break;
            }
            if self.links_to_layer(n, layer) {
                f(n);
            }
        }
    }

    #[inline]
    fn prefetch_links(&self, node: u32, layer: usize) {
        if layer == 0 {
            super::prefetch::prefetch_row(self.layer0, node as usize * 2 * self.m, 2 * self.m);
        }
    }
}

/// Reads a `u32` section in place.
fn words(tag: u32, bytes: &[u8], expected_len: Option<usize>) -> Result<&[u32], HnswError> {
    if let Some(len) = expected_len {
        if Some(bytes.len()) != len.checked_mul(4) {
            return Err(HnswError::SectionLength { tag, expected: len.saturating_mul(4), actual: bytes.len() });
        }
    }
    if bytes.is_empty() {
        return Ok(&[]);
    }
    if cfg!(target_endian = "big") {
        return Err(HnswError::Unaligned { tag });
    }
    bytemuck::try_cast_slice(bytes).map_err(|e| match e {
        bytemuck::PodCastError::TargetAlignmentGreaterAndInputNotAligned => HnswError::Unaligned { tag },
        _ => HnswError::SectionLength { tag, expected: bytes.len() / 4 * 4, actual: bytes.len() },
    })
}

/// The number of upper layers a row's level byte gives it (0 for absent rows).
fn node_level(level: u8) -> usize {
    if level == ABSENT_LEVEL {
        0
    } else {
        usize::from(level)
    }
}

/// The header's words, checked against each other and the store.
#[derive(Clone, Copy)]
struct Header {
    m: usize,
    nodes: usize,
    entry_point: u32,
    max_level: u8,
    ef_construction: usize,
    upper_list: bool,
}

impl Header {
    fn parse(bytes: &[u8], rows: usize) -> Result<Self, HnswError> {
        if bytes.len() != 32 {
            return Err(HnswError::SectionLength { tag: TAG_HEADER, expected: 32, actual: bytes.len() });
        }
        let mut header = [0u32; 8];
        for (word, chunk) in header.iter_mut().zip(bytes.chunks_exact(4)) {
            *word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        let [version, m, stored_rows, nodes, entry_point, max_level, ef_construction, flags] = header;
        if version != FORMAT_VERSION {
            return Err(HnswError::BadHeader(format!("unsupported format version {version}")));
        }
        if !(2..=128).contains(&m) {
            return Err(HnswError::BadHeader(format!("m = {m}")));
        }
        if rows >= NO_NODE as usize || stored_rows as usize != rows {
            return Err(HnswError::BadHeader(format!("graph over {stored_rows} rows, store has {rows}")));
        }
        if flags & !FLAG_UPPER_LIST != 0 {
            return Err(HnswError::BadHeader(format!("unknown flags {flags:#x}")));
        }
        if max_level > u32::from(MAX_LEVEL) {
            return Err(HnswError::BadHeader(format!("maximum level {max_level}")));
        }
        Ok(Self {
            m: m as usize,
            nodes: nodes as usize,
            entry_point,
            max_level: max_level as u8,
            ef_construction: ef_construction as usize,
            upper_list: flags & FLAG_UPPER_LIST != 0,
        })
    }

    /// Levels: one byte per row, each absent or ≤ the maximum level, as many nodes as the header
    /// says, and an entry point of the maximum level.
    fn check_levels(&self, levels: &[u8], rows: usize) -> Result<(), HnswError> {
        if levels.len() != rows {
            return Err(HnswError::SectionLength { tag: TAG_LEVELS, expected: rows, actual: levels.len() });
        }
        let mut present = 0usize;
        for (row, &level) in levels.iter().enumerate() {
            if level == ABSENT_LEVEL {
                continue;
            }
            if level > self.max_level {
                return Err(HnswError::BadLevel { row, level });
            }
            present += 1;
        }
        if present != self.nodes {
            return Err(HnswError::BadHeader(format!("{} nodes in the header, {present} in the levels", self.nodes)));
        }
        let entry_ok = if self.nodes == 0 {
            self.entry_point == NO_NODE && self.max_level == 0
        } else {
            levels.get(self.entry_point as usize) == Some(&self.max_level)
        };
        if entry_ok {
            Ok(())
        } else {
            Err(HnswError::BadEntryPoint(self.entry_point))
        }
    }
}

/// The offset table starts at 0, grows by `m · level` per row and ends at `upper_len`.
fn check_offsets(levels: &[u8], m: usize, offsets: &[u32], upper_len: usize) -> Result<(), HnswError> {
    if offsets.first() != Some(&0) {
        return Err(HnswError::BadOffset { row: 0 });
    }
    for (row, (pair, &level)) in offsets.windows(2).zip(levels).enumerate() {
        let span = (pair[1] as usize).checked_sub(pair[0] as usize);
        if span != Some(node_level(level) * m) {
            return Err(HnswError::BadOffset { row });
        }
    }
    let end = offsets.last().map_or(0, |&o| o as usize);
    if end != upper_len {
        return Err(HnswError::SectionLength { tag: TAG_UPPER, expected: end * 4, actual: upper_len * 4 });
    }
    Ok(())
}

/// Checks one neighbour list: ids of nodes whose level is at least `layer`, then only
/// [`NO_NODE`]; an absent row's lists are empty.
fn check_list(levels: &[u8], row: usize, layer: usize, slots: &[u32]) -> Result<(), HnswError> {
    let absent = levels[row] == ABSENT_LEVEL;
    let mut ended = absent;
    for &n in slots {
        if n == NO_NODE {
            ended = true;
            continue;
        }
        let level = levels.get(n as usize).copied().unwrap_or(ABSENT_LEVEL);
        if ended || level == ABSENT_LEVEL || usize::from(level) < layer {
            return Err(HnswError::BadNeighbor { row, layer, neighbor: n });
        }
    }
    Ok(())
}

impl<'a> HnswView<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        m: usize,
        ef_construction: usize,
        rows: usize,
        nodes: usize,
        entry_point: u32,
        max_level: u8,
        levels: &'a [u8],
        layer0: &'a [u32],
        upper_offsets: &'a [u32],
        upper: &'a [u32],
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
            codes: None,
            upper_list: false,
        }
    }

    /// The view with [`super::GraphPolicy::upper_list`] set as given.
    pub(crate) fn with_upper_list(mut self, upper_list: bool) -> Self {
        self.upper_list = upper_list;
        self
    }

    /// A view over stored sections (`get(tag)` returns a section's bytes), for a store of `rows`
    /// rows.
    ///
    /// Validates, in `O(rows)`: the header (version, `m` in `2..=128`, row count equal to `rows`,
    /// no flag but [`FLAG_UPPER_LIST`](super::FLAG_UPPER_LIST), maximum level ≤ [`MAX_LEVEL`]); every section's exact length; every level
    /// (≤ the maximum level or [`ABSENT_LEVEL`]) and the node count; the entry point (a node of
    /// the maximum level, or [`NO_NODE`] with level 0 for an empty graph); the offset table
    /// (starts at 0, grows by exactly `M · level` per row, ends at the upper section's length);
    /// the traversal codes' sections, when present ([`TraversalCodes::from_sections`]).
    /// Any violation is an [`HnswError`]; this function never panics. The `u32` sections must be
    /// 4-byte aligned ([`HnswError::Unaligned`] otherwise).
    ///
    /// The neighbour lists (`rows · 2M` slots and more, most of the file) are not read: every
    /// process that opens a segment would otherwise pay for reading the whole graph before its
    /// first search (5 ms at 100k rows, 50 ms at 1M). Searches skip a slot that names no node of
    /// its layer; [`verify_links`](Self::verify_links) checks them all.
    pub fn from_sections(get: impl Fn(u32) -> Option<&'a [u8]>, rows: usize) -> Result<Self, HnswError> {
        let section = |tag: u32| get(tag).ok_or(HnswError::MissingSection { tag });
        let header = Header::parse(section(TAG_HEADER)?, rows)?;
        let Header { m, nodes, entry_point, max_level, ef_construction, upper_list } = header;
        let levels = section(TAG_LEVELS)?;
        header.check_levels(levels, rows)?;
        // rows < 2³² and m ≤ 128: the product only overflows a 32-bit usize.
        let Some(layer0_len) = rows.checked_mul(2 * m) else {
            return Err(HnswError::BadHeader(format!("{rows} rows of {m} links do not fit in memory")));
        };
        let layer0 = words(TAG_LAYER0, section(TAG_LAYER0)?, Some(layer0_len))?;
        let upper_offsets = words(TAG_UPPER_OFFSETS, section(TAG_UPPER_OFFSETS)?, Some(rows + 1))?;
        let upper = words(TAG_UPPER, section(TAG_UPPER)?, None)?;
        check_offsets(levels, m, upper_offsets, upper.len())?;
        let codes = TraversalCodes::from_sections(&get, rows)?;
        let view = Self::from_parts(
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
        );
        Ok(Self { codes, upper_list, ..view })
    }

    /// The segment's traversal codes, when it has them (searches then walk the graph on them).
    pub fn traversal_codes(&self) -> Option<TraversalCodes<'a>> {
        self.codes
    }

    /// This view without its traversal codes: searches walk the graph on the stored rows.
    #[must_use]
    pub fn without_traversal_codes(self) -> Self {
        Self { codes: None, ..self }
    }

    /// Checks every neighbour slot, in `O(size)`: each names a node whose level is at least the
    /// list's layer, all empty slots come after the last neighbour, and absent rows have no
    /// neighbours. A view that passes upholds every invariant of an [`HnswGraph`], so its links
    /// may be copied into a new graph (an HNSW merge's base).
    pub fn verify_links(&self) -> Result<(), HnswError> {
        let m = self.m;
        for (row, (list0, &level)) in self.layer0.chunks_exact(2 * m).zip(self.levels).enumerate() {
            check_list(self.levels, row, 0, list0)?;
            let start = self.upper_offsets[row] as usize;
            for layer in 1..=node_level(level) {
                let list = start + (layer - 1) * m;
                check_list(self.levels, row, layer, &self.upper[list..list + m])?;
            }
        }
        Ok(())
    }

    /// Whether a link to `n` on `layer` reaches a node of that layer (false only for a damaged
    /// list, see [`verify_links`](Self::verify_links)).
    #[inline]
    fn links_to_layer(&self, n: u32, layer: usize) -> bool {
        matches!(self.levels.get(n as usize), Some(&level) if level != ABSENT_LEVEL && usize::from(level) >= layer)
    }

    /// The neighbour slots of `node` on `layer` (which the node must have).
    #[inline]
    pub(crate) fn slots(&self, node: u32, layer: usize) -> &'a [u32] {
        if layer == 0 {
            let start = node as usize * 2 * self.m;
            &self.layer0[start..start + 2 * self.m]
        } else {
            let start = self.upper_offsets[node as usize] as usize + (layer - 1) * self.m;
            &self.upper[start..start + self.m]
        }
    }

    /// `M`.
    pub fn m(&self) -> usize {
        self.m
    }

    /// The `ef_construction` recorded at build time (informational).
    pub fn ef_construction(&self) -> usize {
        self.ef_construction
    }

    /// The number of rows the graph ranges over; searches need a store of exactly this length.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The number of nodes (indexed rows).
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// The highest layer (0 for an empty graph).
    pub fn max_level(&self) -> u8 {
        self.max_level
    }

    /// The entry point, `None` for an empty graph.
    pub fn entry_point(&self) -> Option<u32> {
        (self.nodes > 0).then_some(self.entry_point)
    }

    /// The top layer of `row`'s node; `None` when the row is not in the graph (or out of range).
    pub fn level(&self, row: usize) -> Option<u8> {
        self.levels.get(row).copied().filter(|&l| l != ABSENT_LEVEL)
    }

    /// The neighbours of `row` on `layer`, empty when the row is not a node of that layer.
    pub fn neighbors(&self, row: usize, layer: usize) -> impl Iterator<Item = u32> + 'a {
        let slots: &'a [u32] = match self.level(row) {
            Some(level) if usize::from(level) >= layer => self.slots(row as u32, layer),
            _ => &[],
        };
        let view = *self;
        slots.iter().copied().take_while(|&n| n != NO_NODE).filter(move |&n| view.links_to_layer(n, layer))
    }

    /// Copies the view into an owned graph (equal to the graph the view was made from).
    pub fn to_graph(&self) -> HnswGraph {
        HnswGraph::from_parts(
            self.m,
            self.ef_construction,
            self.rows,
            self.nodes,
            self.entry_point,
            self.max_level,
            self.levels.to_vec(),
            self.layer0.to_vec().into(),
            self.upper_offsets.to_vec(),
            self.upper.to_vec(),
        )
        .with_upper_list(self.upper_list)
    }
}
