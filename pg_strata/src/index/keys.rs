//! The key an index stores for a row: the indexed value widened to `f32`, checked and put in
//! stored form (normalised for cosine), as aminsert, builds and heap reads compute it.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::store::ElementKind;

use super::state;
use crate::fmgr::error;

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
pub unsafe fn widened(handle: &state::IndexHandle, datum: pg_sys::Datum) -> Vec<f32> {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if handle.config.element == ElementKind::F16 {
            crate::types::widened::<crate::types::HalfVec>(datum)
        } else {
            crate::types::widened::<crate::types::Vector>(datum)
        }
    }
}

/// [`stored_form`] of already widened elements ([`strata_lsm::rows::stored_form`]; other
/// dimensions than the index's are an error).
pub fn stored_form_of(handle: &state::IndexHandle, values: Vec<f32>) -> Option<Vec<f32>> {
    strata_lsm::rows::stored_form(&handle.config, values)
        .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, e.to_string()))
}
