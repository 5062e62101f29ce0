//! `aminsert`: append to the index's memtable.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::metric::Metric;
use strata_engine::store::ElementKind;

use super::{state, status};
use crate::fmgr::error;
use strata_lsm::memtable::Insert;

use crate::memtable::pack_tid;

/// Raises an error naming `index` when `values` holds a NaN or infinite element: such a row is
/// never indexed (its INSERT fails; nothing reaches a memtable or a segment build).
///
/// # Safety
/// `index` must be a valid, open relation.
pub unsafe fn check_indexable(index: pg_sys::Relation, values: &[f32]) {
    if let Err(e) = strata_engine::vector_math::check_finite(values, "vector") {
        // SAFETY: guaranteed by the caller; relname is a NUL-terminated NameData.
        let name = unsafe { std::ffi::CStr::from_ptr((*(*index).rd_rel).relname.data.as_ptr()) };
        error(
            PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
            format!("{e}: index \"{}\" cannot store a non-finite vector", name.to_string_lossy()),
        );
    }
}

/// Converts an indexed datum to stored form (normalised for cosine); `None` for a zero vector
/// under cosine distance, which has no direction and is not indexed (as in pgvector), and for a
/// vector with a NaN or infinite element, which no index can order (aminsert and builds reject
/// those first, with [`check_indexable`]).
///
/// # Safety
/// `datum` must be a non-null value of the index's column type.
pub unsafe fn stored_form(handle: &state::IndexHandle, datum: pg_sys::Datum) -> Option<Vec<f32>> {
    // SAFETY: guaranteed by the caller.
    stored_form_of(handle, unsafe { widened(handle, datum) })
}

/// The elements of an indexed datum as `f32`.
///
/// # Safety
/// `datum` must be a non-null value of the index's column type.
unsafe fn widened(handle: &state::IndexHandle, datum: pg_sys::Datum) -> Vec<f32> {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if handle.config.element == ElementKind::F16 {
            crate::types::widened::<crate::types::HalfVec>(datum)
        } else {
            crate::types::widened::<crate::types::Vector>(datum)
        }
    }
}

/// [`stored_form`] of already widened elements.
fn stored_form_of(handle: &state::IndexHandle, mut values: Vec<f32>) -> Option<Vec<f32>> {
    if values.len() != handle.config.dims as usize {
        error(
            PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
            format!("expected {} dimensions, not {}", handle.config.dims, values.len()),
        );
    }
    if values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    if handle.config.metric == Metric::Cosine && !strata_engine::vector_math::normalize_in_place(&mut values) {
        return None;
    }
    Some(values)
}

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
    // SAFETY: PostgreSQL passes one value/isnull pair (one column) and a valid heap TID.
    unsafe {
        if *isnull {
            return false;
        }
        let handle = state::open(index);
        let raw = widened(&handle, *values);
        check_indexable(index, &raw);
        let Some(vector) = stored_form_of(&handle, raw) else {
            return false;
        };
        let tid = pack_tid(*heap_tid);
        if handle.shared().release_pending.swap(0, std::sync::atomic::Ordering::AcqRel) == 1 {
            state::release_flushed(index, &handle);
        }
        loop {
            // Pinned until the TID is recorded: the memtable cannot be flushed (nor its list
            // released) before this row is in it and its TID in the status pages.
            let pinned = state::active_memtable(index, &handle);
            match pinned.insert(tid, &vector) {
                Insert::Done => {
                    status::append(index, pinned.segment_id(), tid);
                    return false;
                }
                Insert::Full => {
                    let (slab, segment_id) = (pinned.slab(), pinned.segment_id());
                    drop(pinned);
                    state::seal(&handle, slab, segment_id);
                }
            }
        }
    }
}
