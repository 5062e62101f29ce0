//! `aminsert` of a bm25 index: the row's document ([`strata_text::Document::to_words`]) is
//! appended to the index's memtable as a span row by the core ([`crate::access::insert`]),
//! exactly as a vector row is.

use pgrx::pg_sys;
use strata_lsm::recovery::SpanRow;

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
        let handle = crate::access::opening::open(index);
        let document = super::tokens::document_of(super::text_config_of(index, &handle), *values);
        let words = document.to_words();
        super::check_span_fits(&handle, words.len());
        crate::access::insert::append(index, &handle, heap_tid, &SpanRow(words));
        false
    }
}
