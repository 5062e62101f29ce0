//! `aminsert` of a bm25 index: the row's document ([`strata_text::Document::to_words`]) is
//! appended to the index's memtable as a span row, its TID recorded in the status pages while
//! the memtable is pinned, exactly as a vector row is.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::writer::insert_span_row;

use crate::fmgr::error;
use crate::index::state;
use crate::index::status;
use crate::memtable::pack_tid;

/// `aminsert` of `USING bm25`.
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
    // SAFETY: PostgreSQL passes one value/isnull pair (the indexed text) and a valid heap TID.
    unsafe {
        if *isnull {
            return false;
        }
        let handle = crate::index::opening::open(index);
        let document = super::tokens::document_of(super::text_config_of(index, &handle), *values);
        let words = document.to_words();
        state::check_span_fits(&handle, words.len());
        let tid = pack_tid(*heap_tid);
        state::settle_if_pending(index, &handle);
        // Pinned until the TID is recorded, as for a vector row.
        let inserted = insert_span_row(
            || state::active_memtable(index, &handle),
            tid,
            &words,
            |segment_id| status::append(index, segment_id, tid),
            |slab, segment_id| state::seal(&handle, slab, segment_id),
        );
        if let Err(e) = inserted {
            error(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, format!("pg_strata: {e}"));
        }
        false
    }
}
