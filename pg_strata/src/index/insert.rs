//! `aminsert` of a vector index: the row's stored-form vector and filter values, appended by
//! the core ([`crate::access::insert`]).

use pgrx::pg_sys;

use super::keys::{check_indexable, memtable_row, row_values, stored_form_of};

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
        let handle = crate::access::opening::open(index);
        let raw = row_values(index, super::column_of(index), &handle.config, *values);
        check_indexable(index, handle.config.element, &raw);
        let Some(vector) = stored_form_of(&handle, raw) else {
            return false;
        };
        let row = memtable_row(index, &handle, vector, values, isnull);
        crate::access::insert::append(index, &handle, heap_tid, &row);
        false
    }
}
