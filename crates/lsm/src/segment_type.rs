//! [`SegmentType`]: the one trait the LSM runtime needs from a kind of immutable segment.
//!
//! Files, publishing, merges, deletion bitmaps, segment sets and crash recovery
//! ([`crate::files`], [`crate::merge`], [`crate::segment_set`], [`crate::recovery`]) are written
//! once, over this trait: a segment is built from a memtable's rows, merged from other
//! segments, searched, and has one TID per row so that deletions (bitmaps over rows) and
//! recovery (TID lists per memtable) apply to every type alike. Vector segments implement it
//! ([`crate::vector`]); text segments for BM25 are the next.

use std::borrow::Cow;

use strata_engine::bitset::Bitset;
use strata_engine::cancel::Cancel;
use strata_engine::format::SegmentFile;
use strata_engine::topk::Neighbor;

use crate::files::{FileError, IndexFiles};
use crate::manifest::ManifestConfig;

/// An error opening a segment file whose container is sound but whose contents are not a
/// segment of this type.
pub type OpenError = Box<dyn std::error::Error + Send + Sync>;

/// How a build or merge runs: its threads and its cancellation token (polled by the build;
/// a cancelled build returns [`FileError::Cancelled`]).
#[derive(Clone)]
pub struct BuildWork {
    /// Threads it may use (at least 1).
    pub threads: usize,
    /// Requested when the build must stop (shutdown, a query cancel).
    pub cancel: Cancel,
}

impl BuildWork {
    /// A build on `threads` threads with a fresh, cancellable token.
    pub fn new(threads: usize) -> Self {
        Self { threads: threads.max(1), cancel: Cancel::new() }
    }
}

/// An input of a merge: a segment and the rows its deletion bitmap excludes.
pub struct MergeInput<S> {
    /// The segment.
    pub segment: S,
    /// Rows deleted from it (`None`: none), left out of the merged segment.
    pub deleted: Option<Bitset>,
}

/// A kind of immutable segment the LSM manages.
///
/// Contract: every segment has a fixed number of rows, row `i` carries the heap TID `ids()[i]`,
/// and a built segment written with [`SegmentType::sections`] and read back with
/// [`SegmentType::open`] has the same rows with the same TIDs. `build` and `merge` keep every row
/// they are given (merges all rows not deleted), once.
pub trait SegmentType: Sized + Send + Sync + 'static {
    /// The index configuration its manifests record.
    type Config: ManifestConfig + Send + Sync + 'static;
    /// The rows a segment is built from (TIDs with their payload).
    type Rows: Send;
    /// A built segment, not yet written.
    type Built: Send + Sync;
    /// What a search looks for.
    type Query: ?Sized;
    /// Search settings.
    type Params;

    /// Opens a segment from its validated file.
    fn open(file: SegmentFile) -> Result<Self, OpenError>;

    /// The heap TID of every row, in row order.
    fn ids(&self) -> &[u64];

    /// Builds a segment of `files`' index from `rows` (it may read the index's other segments,
    /// e.g. to share their encoding).
    fn build(
        files: &IndexFiles<Self>,
        config: &Self::Config,
        rows: Self::Rows,
        work: &BuildWork,
    ) -> Result<Self::Built, FileError>;

    /// Builds one segment holding every row of `inputs` that is not deleted.
    fn merge(config: &Self::Config, inputs: Vec<MergeInput<Self>>, work: &BuildWork) -> Result<Self::Built, FileError>;

    /// The built segment's file sections `(tag, bytes)`, in file order.
    fn sections(built: &Self::Built) -> Vec<(u32, Cow<'_, [u8]>)>;

    /// Rows in a built segment.
    fn built_rows(built: &Self::Built) -> u64;

    /// The best `k` rows for `query`, best first, never a row of `deleted`.
    fn search(&self, query: &Self::Query, k: usize, params: &Self::Params, deleted: Option<&Bitset>) -> Vec<Neighbor>;
}
