//! Reading indexed vectors back from the table.
//!
//! Used where the index itself does not hold a row's vector: crash recovery refilling lost
//! memtables, and scans of indexes built with `rerank = 'heap'`, whose segments keep only
//! quantized codes and whose candidates are reranked with the exact vectors of their rows.
//! The key is computed the way CREATE INDEX computes it (`FormIndexDatum`, so expression indexes
//! work) and converted to stored form (normalised for cosine). Runs on the backend's own thread.

use pgrx::pg_sys;

use super::keys::{memtable_row, stored_form};
use super::state::IndexHandle;
use crate::memtable::unpack_tid;

/// An open reader of one index's heap. Must be closed with [`HeapVectors::end`] (which releases
/// the buffer pin it may hold) before the relations it was opened on are closed.
pub struct HeapVectors {
    index: pg_sys::Relation,
    heap: pg_sys::Relation,
    opened_heap: bool,
    /// The vector column's type (`None` for a bm25 index, whose key is text).
    column: Option<strata_engine::store::ColumnType>,
    info: *mut pg_sys::IndexInfo,
    estate: *mut pg_sys::EState,
    econtext: *mut pg_sys::ExprContext,
    slot: *mut pg_sys::TupleTableSlot,
    fetch: *mut pg_sys::IndexFetchTableData,
}

impl HeapVectors {
    /// Opens a reader for `index`'s key over `heap` (the index's table; null opens it here with
    /// AccessShareLock, and [`HeapVectors::end`] closes it).
    ///
    /// # Safety
    /// `index` must be an open strata index and `heap` null or its open table; call from a
    /// backend inside a transaction.
    pub unsafe fn begin(index: pg_sys::Relation, heap: pg_sys::Relation) -> Self {
        // SAFETY: `index` is an open strata index (so rd_index is set) and `heap` null or its open
        // table, in a transaction (this function's contract): the standard executor setup for
        // FormIndexDatum.
        unsafe {
            let opened_heap = heap.is_null();
            let heap = if opened_heap {
                pg_sys::table_open((*(*index).rd_index).indrelid, pg_sys::AccessShareLock as pg_sys::LOCKMODE)
            } else {
                heap
            };
            let info = pg_sys::BuildIndexInfo(index);
            let estate = pg_sys::CreateExecutorState();
            let econtext = pg_sys::MakePerTupleExprContext(estate);
            let slot = pg_sys::table_slot_create(heap, std::ptr::null_mut());
            (*econtext).ecxt_scantuple = slot;
            let fetch = pg_sys::table_index_fetch_begin(heap);
            let column = (!crate::text::options::is_bm25(index)).then(|| super::column_of(index));
            Self { index, heap, opened_heap, column, info, estate, econtext, slot, fetch }
        }
    }

    /// The heap relation read.
    pub fn heap(&self) -> pg_sys::Relation {
        self.heap
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
        let (index, column) = (self.index, self.column.expect("a vector index's reader"));
        // SAFETY: `snapshot` is valid for the heap (this function's contract; callers pass their scan's
        // snapshot or recovery's non-vacuumable one); the key datums are valid while `convert` runs.
        unsafe {
            self.fetch_with(packed, snapshot, |values, isnull| {
                let vector = if isnull[0] { None } else { stored_form(index, column, handle, values[0]) };
                if with_filters {
                    vector.map(|v| memtable_row(index, handle, v, values.as_ptr(), isnull.as_ptr()))
                } else {
                    vector
                }
            })
        }
    }

    /// `convert` of the index key (`FormIndexDatum`'s values and null flags) of the row at
    /// `packed` (following its HOT chain) that `snapshot` sees; `None` when no version is visible.
    /// `convert` runs in a per-tuple memory context, reset afterwards: what it returns must not
    /// point into PostgreSQL memory.
    ///
    /// # Safety
    /// `snapshot` must be valid for the heap.
    pub unsafe fn fetch_with<R>(
        &mut self,
        packed: u64,
        snapshot: pg_sys::Snapshot,
        convert: impl FnOnce(&[pg_sys::Datum], &[bool]) -> Option<R>,
    ) -> Option<R> {
        let mut tid = unpack_tid(packed);
        let (mut call_again, mut all_dead) = (false, false);
        let mut values = [pg_sys::Datum::from(0); pg_sys::INDEX_MAX_KEYS as usize];
        let mut isnull = [true; pg_sys::INDEX_MAX_KEYS as usize];
        // SAFETY: the reader's objects were set up in `begin` and stay valid until `end`;
        // detoasting and expression evaluation allocate in the per-tuple context, reset below.
        unsafe {
            let found = pg_sys::table_index_fetch_tuple(
                self.fetch,
                &raw mut tid,
                snapshot,
                self.slot,
                &raw mut call_again,
                &raw mut all_dead,
            );
            if !found {
                return None;
            }
            let previous = pg_sys::CurrentMemoryContext;
            pg_sys::CurrentMemoryContext = (*self.econtext).ecxt_per_tuple_memory;
            pg_sys::FormIndexDatum(self.info, self.slot, self.estate, values.as_mut_ptr(), isnull.as_mut_ptr());
            let converted = convert(&values, &isnull);
            pg_sys::CurrentMemoryContext = previous;
            pg_sys::MemoryContextReset((*self.econtext).ecxt_per_tuple_memory);
            converted
        }
    }

    /// Releases everything `begin` set up (and closes the heap if `begin` opened it).
    ///
    /// # Safety
    /// Call once, in the transaction that called `begin`.
    pub unsafe fn end(self) {
        // SAFETY: each object was created in `begin` and is released exactly once here.
        unsafe {
            pg_sys::table_index_fetch_end(self.fetch);
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            pg_sys::FreeExecutorState(self.estate);
            if self.opened_heap {
                pg_sys::table_close(self.heap, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            }
        }
    }
}
