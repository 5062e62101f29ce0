//! The key an index stores for a row: the indexed value widened to `f32`, checked and put in
//! stored form (normalised for cosine), as aminsert, builds and heap reads compute it.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::store::ColumnType;
use strata_engine::vector_value::Vector;

use crate::access::state;
use crate::fmgr::error;

/// Raises an error naming `index` when `values` holds a NaN or infinite element: such a row is
/// never indexed (its INSERT fails; nothing reaches a memtable or a segment build).
///
/// # Safety
/// `index` must be a valid, open relation.
pub unsafe fn check_indexable(index: pg_sys::Relation, element: strata_engine::store::ElementKind, values: &[f32]) {
    if element == strata_engine::store::ElementKind::Bits {
        // Packed bit rows hold raw bit patterns, not numbers.
        return;
    }
    if let Err(e) = strata_engine::vector_math::check_finite(values, "vector") {
        // SAFETY: `index` is an open relation (this function's contract: aminsert and the build
        // callback pass the Relation PostgreSQL gave them), as `relation_name` requires.
        let name = unsafe { crate::access::relation_name(index) };
        error(
            PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
            format!("{e}: index \"{name}\" cannot store a non-finite vector"),
        );
    }
}

/// Converts an indexed datum to stored form (normalised for cosine); `None` for a zero vector
/// under cosine distance, which has no direction and is not indexed (as in pgvector), and for a
/// vector with a NaN or infinite element, which no index can order (aminsert and builds reject
/// those first, with [`check_indexable`]).
///
/// # Safety
/// `index` must be the open relation of `handle`; `datum` a non-null value of `column`, the
/// index's column type.
pub unsafe fn stored_form(
    index: pg_sys::Relation,
    column: ColumnType,
    handle: &state::IndexHandle,
    datum: pg_sys::Datum,
) -> Option<Vec<f32>> {
    // SAFETY: `index` is `handle`'s open relation and `datum` a non-null value of `column` (this
    // function's contract; the heap reader checks isnull first), exactly what `row_values` requires.
    stored_form_of(handle, unsafe { row_values(index, column, &handle.config, datum) })
}

/// The elements of an indexed datum as an index configured as `config` keeps them: [`widened`],
/// or for a packed `sparsevec` index its packed row ([`strata_engine::sparse_rows`]; an error
/// for more non-zero elements than the index's `max_nnz`, naming `index`).
///
/// # Safety
/// `index` must be a valid, open relation; `datum` a non-null value of `column`.
pub unsafe fn row_values(
    index: pg_sys::Relation,
    column: ColumnType,
    config: &strata_lsm::manifest::IndexConfig,
    datum: pg_sys::Datum,
) -> Vec<f32> {
    match config.element {
        strata_engine::store::ElementKind::SparseF32 => {}
        strata_engine::store::ElementKind::Bits => {
            // SAFETY: `config.element` is Bits only for an index on a `bit` column, so the non-null
            // `datum` of `column` (this function's contract) is a bit string; `index` is open.
            return unsafe { packed_bits(index, datum) };
        }
        // SAFETY: `datum` is a non-null value of `column` (this function's contract: callers test
        // isnull first and pass the index's own column type), as `widened` requires.
        _ => return unsafe { widened(column, datum) },
    }
    let cap = strata_engine::sparse_rows::capacity_of(config.dims as usize).unwrap_or(0);
    // SAFETY: `config.element` is SparseF32 only for an index on a `sparsevec` column, so the
    // non-null `datum` of `column` (this function's contract) is a sparsevec.
    unsafe { packed(datum, Some(cap)) }.unwrap_or_else(|e| {
        // SAFETY: `index` is an open relation (this function's contract), so rd_rel is set; relname
        // is a NUL-terminated NameData.
        let name = unsafe { std::ffi::CStr::from_ptr((*(*index).rd_rel).relname.data.as_ptr()) };
        error(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "index \"{}\" cannot store this row: {e} (CREATE INDEX … WITH (max_nnz = …))",
                name.to_string_lossy()
            ),
        )
    })
}

/// A bit string datum as a packed bit row, after checking that it has the bits of the index's
/// column (a `varbit(n)` column may hold shorter strings; pgvector's "different bit lengths").
///
/// # Safety
/// `index` must be a valid, open relation whose first column has a typmod; `datum` a non-null
/// bit string.
pub unsafe fn packed_bits(index: pg_sys::Relation, datum: pg_sys::Datum) -> Vec<f32> {
    // SAFETY: `datum` is a non-null bit string (callers use this only for Bits indexes, with an
    // isnull-checked row value or an SK_ISNULL-checked query), and `index` is open, so rd_att has
    // attribute 0 (every index has a first column).
    let (bits, typmod) =
        unsafe { (crate::types::bit::bits(datum), (*crate::pg_compat::tuple_desc_attr((*index).rd_att, 0)).atttypmod) };
    let expected = u32::try_from(typmod).unwrap_or(0);
    if bits.len() != expected {
        error(
            PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
            strata_engine::vector_value::VectorError::DifferentBitLengths { a: expected, b: bits.len() }.to_string(),
        );
    }
    strata_engine::bit_rows::pack(bits)
}

/// A `sparsevec` datum as a packed row of capacity `cap`, or of its own number of non-zero
/// elements when `cap` is `None` (a query); an error when it holds more than `cap`.
///
/// # Safety
/// `datum` must be a non-null `sparsevec` datum.
pub unsafe fn packed(
    datum: pg_sys::Datum,
    cap: Option<usize>,
) -> Result<Vec<f32>, strata_engine::sparse_rows::PackError> {
    // SAFETY: `datum` is a non-null sparsevec (this function's contract: a sparsevec index's
    // isnull-checked row value, or a scan's SK_ISNULL-checked query), which is what `sparse` requires.
    let value = unsafe { crate::types::sparse::sparse(datum) };
    let indices: Vec<u32> = value.indices().iter().map(|&i| i as u32).collect();
    let cap = cap.unwrap_or(indices.len());
    strata_engine::sparse_rows::pack(&indices, value.values(), cap)
}

/// The elements of an indexed datum as `f32`, in the form its index stores
/// ([`ColumnType`]: bits as `0`/`1`, a sparse vector densified).
///
/// # Safety
/// `datum` must be a non-null value of `column`.
pub unsafe fn widened(column: ColumnType, datum: pg_sys::Datum) -> Vec<f32> {
    // SAFETY: `datum` is a non-null value of `column` (this function's contract: the index's own
    // column type with an isnull/SK_ISNULL-checked datum), so each arm reads it as its own type.
    unsafe {
        match column {
            ColumnType::Vector => crate::types::widened::<crate::types::Vector>(datum),
            ColumnType::Halfvec => crate::types::widened::<crate::types::HalfVec>(datum),
            ColumnType::Bit => strata_engine::bit_value::to_elements(crate::types::bit::bits(datum)),
            ColumnType::Sparsevec => {
                use crate::types::OrRaise;
                strata_engine::sparse_value::to_dense::<Vector>(crate::types::sparse::sparse(datum), -1).or_raise()
            }
        }
    }
}

/// [`stored_form`] of already widened elements ([`strata_lsm::rows::stored_form`]; other
/// dimensions than the index's are an error).
pub fn stored_form_of(handle: &state::IndexHandle, values: Vec<f32>) -> Option<Vec<f32>> {
    strata_lsm::rows::stored_form(&handle.config, values)
        .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, e.to_string()))
}

/// The memtable row of a row whose index columns hold `values` / `isnull`: `vector` (its key in
/// stored form) followed by its filter values ([`strata_lsm::rows::memtable_row`]); an error
/// naming `index` for filter values it cannot keep.
///
/// # Safety
/// `index` must be the open relation of `handle`; `values` and `isnull` must hold one entry per
/// index column.
pub unsafe fn memtable_row(
    index: pg_sys::Relation,
    handle: &state::IndexHandle,
    vector: Vec<f32>,
    values: *const pg_sys::Datum,
    isnull: *const bool,
) -> Vec<f32> {
    if handle.config.filters.is_empty() {
        return vector;
    }
    // SAFETY: `index` is `handle`'s open strata index (this function's contract), and
    // `handle.config.filters` was derived from this relation's filter columns when it was built.
    let columns = unsafe { super::filters::columns_of(index, &handle.config.filters) };
    // SAFETY: `columns` were just read from this relation; `values` and `isnull` hold one entry
    // per index column (this function's contract); the texts borrowed live in the current
    // memory context, past this call.
    let filter_values = unsafe { super::filters::row_values(&columns, values, isnull) };
    strata_lsm::rows::memtable_row(&handle.config, vector, &filter_values).unwrap_or_else(|e| {
        // SAFETY: `index` is `handle`'s open index (this function's contract), so rd_rel and rd_att
        // are set; relname and attname are NUL-terminated NameData, and
        // filter column c is the index's attribute c + 2.
        let (index_name, column_name) = unsafe {
            let column = match e {
                strata_engine::filter::RowError::ArrayTooLong { column, .. }
                | strata_engine::filter::RowError::WrongKind { column, .. } => column,
                _ => 0,
            };
            let attribute = &*crate::pg_compat::tuple_desc_attr((*index).rd_att, column + 1);
            (
                std::ffi::CStr::from_ptr((*(*index).rd_rel).relname.data.as_ptr()).to_string_lossy(),
                std::ffi::CStr::from_ptr(attribute.attname.data.as_ptr()).to_string_lossy(),
            )
        };
        let message = match e {
            strata_engine::filter::RowError::ArrayTooLong { elements, slots, .. } => format!(
                "index \"{index_name}\" cannot store an array of {elements} distinct elements in column \"{column_name}\": \
                 it keeps at most max_array_elements = {slots} (ALTER INDEX … SET (max_array_elements = …), then REINDEX)"
            ),
            other => format!("index \"{index_name}\" cannot store this row: {other}"),
        };
        error(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, message)
    })
}
