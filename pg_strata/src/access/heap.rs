//! Reading an index's keys back from the table, by TID.
//!
//! Used where the index itself does not hold a row: crash recovery refilling lost memtables, a
//! standby's passes, and (vector indexes) reranks from the table. The key is computed the way
//! CREATE INDEX computes it (`FormIndexDatum`, so expression indexes work); each kind converts
//! it to its memtable row. Runs on the backend's own thread.

use pgrx::pg_sys;

use crate::memtable::unpack_tid;

/// An open reader of one index's heap. Must be closed with [`HeapReader::end`] (which releases
/// the buffer pin it may hold) before the relations it was opened on are closed.
pub struct HeapReader {
    index: pg_sys::Relation,
    heap: pg_sys::Relation,
    opened_heap: bool,
    info: *mut pg_sys::IndexInfo,
    estate: *mut pg_sys::EState,
    econtext: *mut pg_sys::ExprContext,
    slot: *mut pg_sys::TupleTableSlot,
    fetch: *mut pg_sys::IndexFetchTableData,
}

impl HeapReader {
    /// Opens a reader for `index`'s key over `heap` (the index's table; null opens it here with
    /// AccessShareLock, and [`HeapReader::end`] closes it).
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
            Self { index, heap, opened_heap, info, estate, econtext, slot, fetch }
        }
    }

    /// The index whose keys are read.
    pub fn index(&self) -> pg_sys::Relation {
        self.index
    }

    /// The heap relation read.
    pub fn heap(&self) -> pg_sys::Relation {
        self.heap
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

/// The table of an index as recovery and a standby's passes read it: every version some
/// transaction may still see is fetched (the executor's visibility check runs at scan time, as
/// for every index entry); versions no one can see any more — aborted inserts, deletions older
/// than every snapshot — are skipped, since their TOAST data may already be gone. Each kind
/// converts the keys to its memtable rows ([`Kind::Table`]).
pub struct Table {
    reader: HeapReader,
    not_removable: pg_sys::SnapshotData,
}

impl Table {
    /// Opens `index`'s table for recovery.
    ///
    /// # Safety
    /// `index` must be an open index of pg_strata; [`Table::end`] must be called before the
    /// transaction ends.
    pub unsafe fn begin(index: pg_sys::Relation) -> Self {
        // SAFETY: a non-vacuumable snapshot (what InitNonVacuumableSnapshot sets up) sees every
        // row version a concurrent transaction may still need, and never a version whose TOAST
        // may be gone.
        unsafe {
            let reader = HeapReader::begin(index, std::ptr::null_mut());
            let mut not_removable: pg_sys::SnapshotData = std::mem::zeroed();
            not_removable.snapshot_type = pg_sys::SnapshotType::SNAPSHOT_NON_VACUUMABLE;
            not_removable.vistest = pg_sys::GlobalVisTestFor(reader.heap());
            Self { reader, not_removable }
        }
    }

    /// `convert` of the index key of the row at `tid` ([`HeapReader::fetch_with`]) under the
    /// non-vacuumable snapshot.
    pub fn fetch_with<R>(
        &mut self,
        tid: u64,
        convert: impl FnOnce(&[pg_sys::Datum], &[bool]) -> Option<R>,
    ) -> Option<R> {
        let snapshot = &raw mut self.not_removable;
        // SAFETY: the snapshot lives in `self` for the reader's lifetime.
        unsafe { self.reader.fetch_with(tid, snapshot, convert) }
    }

    /// The index whose keys are read.
    pub fn index(&self) -> pg_sys::Relation {
        self.reader.index()
    }

    /// Closes the table reader.
    pub fn end(self) {
        // SAFETY: called once, in the transaction that called `begin`.
        unsafe { self.reader.end() };
    }
}
