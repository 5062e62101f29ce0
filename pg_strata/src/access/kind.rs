//! What differs between the index kinds, and the one place that chooses a kind.
//!
//! [`Kind`] is implemented once per kind — vector indexes (`index::kind::Vector`) and bm25
//! indexes (`text::kind::Text`) — and says what the shared paths of [`super`] need to know: the
//! segment type, where a backend caches its open segments, how the table is read back into
//! memtable rows, how a segment is built and how a sealed memtable's rows are collected.
//!
//! [`AccessKind::of`](super::AccessKind::of) is the only place that looks at a configuration's
//! kind, and `access::dispatch` the only place that turns it into a [`Kind`] (and names the
//! kinds' modules):
//! the code of the shared paths is written once, generic over `K: Kind`, and runs as
//! `dispatch!(handle.access_kind, K => path::<K>(…))`.

use std::sync::Arc;

use pgrx::pg_sys;
use strata_engine::cancel::Cancel;
use strata_lsm::files::{FileError, IndexFiles};
use strata_lsm::follower::FollowedSegment;
use strata_lsm::memtable::Memtable;
use strata_lsm::recovery::HeapRows;
use strata_lsm::segment_set::{OpenSegment, SegmentSet};
use strata_lsm::segment_type::SegmentType;

use super::state::IndexHandle;
use crate::shmem::{IndexKey, SharedSlabs};

/// The rows a segment of kind `K` is built from.
pub type RowsOf<K> = <<K as Kind>::Segment as SegmentType>::Rows;
/// A built, not yet written, segment of kind `K`.
pub type BuiltOf<K> = <<K as Kind>::Segment as SegmentType>::Built;

/// What one index kind supplies to the shared paths (build, insert, flush, merge, VACUUM,
/// recovery, a standby's passes, the admin functions). Every method runs on a backend's (or the
/// service's) main thread unless it says otherwise.
pub trait Kind: 'static {
    /// The kind's segments; a standby builds them from heap rows of type [`Kind::Row`].
    type Segment: FollowedSegment<Row = Self::Row>;
    /// A memtable row read back from the table.
    type Row: strata_lsm::recovery::MemtableRow;
    /// The table of an index read back as memtable rows (crash recovery's refill, a standby's
    /// passes), open from [`Kind::open_table`] until [`Kind::close_table`].
    type Table<'a>: HeapRows<Row = Self::Row>;

    /// The index's files.
    fn files(handle: &IndexHandle) -> IndexFiles<Self::Segment>;

    /// The index's open segments at manifest generation `generation` (or newer), from this
    /// backend's cache; an error (index corrupted) when a segment does not open.
    fn segment_set(handle: &IndexHandle, generation: u64) -> Arc<SegmentSet<Self::Segment>>;

    /// Drops this backend's cached segments and memtables of `key` (after a rebuild).
    fn forget(key: IndexKey);

    /// Drops the cached entries of `key` now, or every entry at the caches' next use when one is
    /// in use (a relation cache invalidation).
    fn forget_soon(key: IndexKey);

    /// Drops every cached entry now, or at the caches' next use when one is in use.
    fn forget_all_soon();

    /// Opens the table of `index` to read rows back by TID, as CREATE INDEX computed them.
    ///
    /// # Safety
    /// `index` must be the open index of `handle`; [`Kind::close_table`] must be called before the
    /// transaction ends.
    unsafe fn open_table(index: pg_sys::Relation, handle: &IndexHandle) -> Self::Table<'_>;

    /// Closes a table opened by [`Kind::open_table`].
    fn close_table(table: Self::Table<'_>);

    /// Builds a segment of `rows`; `between` runs on the calling thread while a build on a helper
    /// thread goes on (a kind that builds on the calling thread never calls it).
    fn build(
        handle: &IndexHandle,
        rows: RowsOf<Self>,
        between: &mut dyn FnMut(&Cancel),
    ) -> Result<BuiltOf<Self>, FileError>;

    /// The live rows of a memtable being flushed (`None` when it has none); an error when a row
    /// does not decode.
    fn collect(handle: &IndexHandle, memtable: &Memtable<'_, SharedSlabs>) -> Result<Option<RowsOf<Self>>, FileError>;

    /// The kind's name of one open segment, as `strata_index_stats()` shows it.
    fn segment_kind(handle: &IndexHandle, open: &OpenSegment<Self::Segment>) -> String;
}
