//! What `aminsert` does the same for every kind: append one memtable row to the index's active
//! memtable, its heap TID recorded in the memtable's status list while the memtable is pinned
//! ([`strata_lsm::writer::insert`]), so the memtable cannot be flushed (nor its group settled)
//! before the row is in it and its TID in the status pages. Each access method computes the row
//! (a vector in stored form with its filter values, a document's span row).

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::recovery::MemtableRow;

use super::state::{self, IndexHandle};
use super::status;
use crate::fmgr::error;
use crate::memtable::pack_tid;

/// Appends `row` as the row of heap TID `heap_tid` to `handle`'s index, settling flushed groups
/// first when the index service asked for it ([`state::settle_if_pending`]). Raises an error when
/// the row does not fit in any memtable of the index.
///
/// # Safety
/// `index` must be the open index of `handle` (an `aminsert` callback's); no status page lock
/// held; `heap_tid` a valid TID.
pub unsafe fn append<R: MemtableRow + ?Sized>(
    index: pg_sys::Relation,
    handle: &IndexHandle,
    heap_tid: pg_sys::ItemPointer,
    row: &R,
) {
    // SAFETY: `heap_tid` is valid (this function's contract).
    let tid = pack_tid(unsafe { *heap_tid });
    // SAFETY: `index` is the open index of `handle` with no status page lock held (this
    // function's contract), as settling, pinning and appending to the status pages need.
    let inserted = unsafe {
        state::settle_if_pending(index, handle);
        strata_lsm::writer::insert(
            || state::active_memtable(index, handle),
            tid,
            row,
            |segment_id| status::append(index, segment_id, tid),
            |slab, segment_id| state::seal(handle, slab, segment_id),
        )
    };
    if let Err(e) = inserted {
        error(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, format!("pg_strata: {e}"));
    }
}
