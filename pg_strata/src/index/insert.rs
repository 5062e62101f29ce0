//! `aminsert`: append to the index's memtable.

use pgrx::pg_sys;
use strata_lsm::writer::insert_row;

use super::keys::{check_indexable, memtable_row, row_values, stored_form_of};
use super::{state, status};

use crate::memtable::pack_tid;

/// `aminsert`.
// The signature is PostgreSQL's aminsert_function.
#[allow(clippy::too_many_arguments)]
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn aminsert(
    index: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    _heap: pg_sys::Relation,
    _check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _index_info: *mut pg_sys::IndexInfo,
) -> bool {
    // SAFETY: PostgreSQL passes one value/isnull pair per index column and a valid heap TID.
    unsafe {
        if *isnull {
            return false;
        }
        let handle = crate::index::opening::open(index);
        let raw = row_values(index, super::column_of(index), &handle.config, *values);
        check_indexable(index, handle.config.element, &raw);
        let Some(vector) = stored_form_of(&handle, raw) else {
            return false;
        };
        let row = memtable_row(index, &handle, vector, values, isnull);
        let tid = pack_tid(*heap_tid);
        state::settle_if_pending(index, &handle);
        // Pinned until the TID is recorded: the memtable cannot be flushed (nor its list settled)
        // before this row is in it and its TID in the status pages.
        insert_row(
            || state::active_memtable(index, &handle),
            tid,
            &row,
            |segment_id| status::append(index, segment_id, tid),
            |slab, segment_id| state::seal(&handle, slab, segment_id),
        );
        false
    }
}
