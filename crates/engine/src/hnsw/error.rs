//! Errors of building and loading HNSW graphs.

use thiserror::Error;

/// Everything that can go wrong building a graph or reading one from stored sections.
///
/// Build errors come from parameters and inputs; every other variant describes stored bytes
/// that do not form a valid graph, detected by [`HnswView::from_sections`](super::HnswView::from_sections)
/// before any search could touch them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HnswError {
    /// The build's cancellation token was requested.
    #[error("the graph build was cancelled")]
    Cancelled,
    /// `m` outside `2..=128`.
    #[error("m must be between 2 and 128, got {0}")]
    InvalidM(usize),
    /// `ef_construction` smaller than `m` or larger than the supported maximum.
    #[error("ef_construction must be between m ({m}) and {max}, got {ef_construction}")]
    InvalidEfConstruction {
        /// The requested `ef_construction`.
        ef_construction: usize,
        /// The graph's `m`.
        m: usize,
        /// The largest supported value.
        max: usize,
    },
    /// The store has too many rows for `u32` node ids.
    #[error("{0} rows exceed the graph's limit of 4294967294")]
    TooManyRows(usize),
    /// A row to index is not a row of the store.
    #[error("row {row} is outside a store of {rows} rows")]
    RowOutOfRange {
        /// The offending row.
        row: usize,
        /// Rows in the store.
        rows: usize,
    },
    /// A row to index is listed twice.
    #[error("row {0} is listed twice")]
    DuplicateRow(usize),
    /// A graph to extend does not fit the new build.
    #[error("cannot extend a graph of M = {base_m} over {base_rows} rows into M = {m} over {rows} rows")]
    BaseMismatch {
        /// M of the base graph.
        base_m: usize,
        /// M asked for.
        m: usize,
        /// Rows of the base graph.
        base_rows: usize,
        /// Rows of the new store.
        rows: usize,
    },
    /// The rayon thread pool could not be created.
    #[error("cannot start the build thread pool: {0}")]
    ThreadPool(String),
    /// The spill file of the build's link array could not be made (ENOSPC, EIO).
    #[error("cannot spill the graph's links: {message}")]
    Spill {
        /// The I/O error's kind (`StorageFull` for ENOSPC).
        kind: std::io::ErrorKind,
        /// The I/O error's message.
        message: String,
    },
    /// A required section is missing.
    #[error("HNSW section {tag:#010x} is missing")]
    MissingSection {
        /// The tag of the missing section.
        tag: u32,
    },
    /// A section has the wrong length.
    #[error("HNSW section {tag:#010x} has {actual} bytes, expected {expected}")]
    SectionLength {
        /// The section's tag.
        tag: u32,
        /// Bytes expected.
        expected: usize,
        /// Bytes found.
        actual: usize,
    },
    /// A `u32` section is not 4-byte aligned in memory (or the target is big-endian), so it cannot
    /// be read in place.
    #[error("HNSW section {tag:#010x} cannot be read in place as u32 (misaligned or big-endian target)")]
    Unaligned {
        /// The section's tag.
        tag: u32,
    },
    /// The header is inconsistent (unknown version, bad `m`, row count differs, …).
    #[error("invalid HNSW header: {0}")]
    BadHeader(String),
    /// The entry point is not a node of the top level.
    #[error("invalid HNSW entry point {0}")]
    BadEntryPoint(u32),
    /// A row's level is above the header's maximum level, or the node count differs.
    #[error("invalid HNSW level for row {row}: {level}")]
    BadLevel {
        /// The row.
        row: usize,
        /// Its stored level byte.
        level: u8,
    },
    /// The upper-layer offset table is not monotone, out of bounds or disagrees with the levels.
    #[error("invalid HNSW upper-layer offset for row {row}")]
    BadOffset {
        /// The first row whose offset is wrong.
        row: usize,
    },
    /// A neighbour slot holds an id that is not a node of at least the list's layer, or a
    /// neighbour follows an empty slot, or a row that is not a node has neighbours.
    #[error("invalid HNSW neighbour {neighbor} of row {row} on layer {layer}")]
    BadNeighbor {
        /// The row whose list is wrong.
        row: usize,
        /// The layer of the list.
        layer: usize,
        /// The offending slot value.
        neighbor: u32,
    },
}
