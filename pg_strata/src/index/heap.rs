//! Reading indexed vectors back from the table.
//!
//! Used where the index itself does not hold a row's vector: crash recovery refilling lost
//! memtables, a standby's passes, and scans of indexes built with `rerank = 'heap'`, whose
//! segments keep only quantized codes and whose candidates are reranked with the exact vectors
//! of their rows. The key ([`HeapReader`]) is converted to stored form (normalised for cosine).
//! Runs on the backend's own thread.

use pgrx::pg_sys;
use strata_engine::store::ColumnType;

use super::keys::{memtable_row, stored_form};
use crate::access::heap::HeapReader;
use crate::access::state::IndexHandle;

/// An open reader of one vector index's heap. Must be closed with [`HeapVectors::end`] before
/// the relations it was opened on are closed.
pub struct HeapVectors {
    reader: HeapReader,
    /// The vector column's type.
    column: ColumnType,
}

impl HeapVectors {
    /// Opens a reader for `index`'s key over `heap` (see [`HeapReader::begin`]).
    ///
    /// # Safety
    /// As for [`HeapReader::begin`]; `index` is a vector index.
    pub unsafe fn begin(index: pg_sys::Relation, heap: pg_sys::Relation) -> Self {
        // SAFETY: this function's contract is `HeapReader::begin`'s, and `index` is an open
        // vector index, as `column_of` needs.
        unsafe { Self { reader: HeapReader::begin(index, heap), column: super::column_of(index) } }
    }

    /// The stored-form vector of the row at `packed` (following its HOT chain) that `snapshot`
    /// sees, followed by its filter values when `with_filters` (its memtable row); `None` when
    /// no version is visible, the key is NULL, or it is a zero vector under cosine (not indexed).
    ///
    /// # Safety
    /// `snapshot` must be valid for the heap; `handle` must be the index's handle.
    pub unsafe fn fetch(
        &mut self,
        handle: &IndexHandle,
        packed: u64,
        snapshot: pg_sys::Snapshot,
        with_filters: bool,
    ) -> Option<Vec<f32>> {
        let (index, column) = (self.reader.index(), self.column);
        // SAFETY: `snapshot` is valid for the heap (this function's contract; callers pass their
        // scan's snapshot); the key datums are valid while the closure runs.
        unsafe {
            self.reader.fetch_with(packed, snapshot, |values, isnull| {
                vector_row(index, column, handle, values, isnull, with_filters)
            })
        }
    }

    /// Closes the reader.
    ///
    /// # Safety
    /// As for [`HeapReader::end`].
    pub unsafe fn end(self) {
        // SAFETY: this function's contract is `HeapReader::end`'s.
        unsafe { self.reader.end() }
    }
}

/// The stored-form vector of an index key (`FormIndexDatum`'s `values` and `isnull`), followed
/// by its filter values when `with_filters` (its memtable row); `None` when the key is NULL or a
/// zero vector under cosine (not indexed).
///
/// # Safety
/// `index` must be the open vector index of `handle` with vector column type `column`; the
/// datums must be valid.
pub unsafe fn vector_row(
    index: pg_sys::Relation,
    column: ColumnType,
    handle: &IndexHandle,
    values: &[pg_sys::Datum],
    isnull: &[bool],
    with_filters: bool,
) -> Option<Vec<f32>> {
    // SAFETY: this function's contract is what `stored_form` and `memtable_row` need.
    unsafe {
        let vector = if isnull[0] { None } else { stored_form(index, column, handle, values[0]) };
        if with_filters {
            vector.map(|v| memtable_row(index, handle, v, values.as_ptr(), isnull.as_ptr()))
        } else {
            vector
        }
    }
}
