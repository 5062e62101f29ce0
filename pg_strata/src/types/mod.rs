//! The `vector` and `halfvec` SQL types: V1 entry points over [`strata_engine::vector_value`],
//! which owns the layout, the element types, every check and every computation. The functions
//! here only detoast and allocate datums and raise the engine's [`VectorError`]s.
//!
//! Both types share one generic implementation over [`VectorType`]; the exported V1 entry points
//! are thin monomorphic wrappers declared with `v1_functions!`.

mod aggregates;
pub(crate) mod bit;
mod casts;
mod io;
mod ops;
pub(crate) mod sparse;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::vector_value::{check_dimensions, stored_dimensions, ErrorClass, VectorError, HEADER_BYTES};
pub use strata_engine::vector_value::{HalfVec, Vector, VectorType};

use crate::fmgr::{error, error_with_detail};

/// Raises `e` with its message, DETAIL line and SQLSTATE (never returns).
pub fn raise(e: &VectorError) -> ! {
    let code = match e.class() {
        ErrorClass::InvalidTextRepresentation => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        ErrorClass::DataException => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        ErrorClass::ProgramLimitExceeded => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        ErrorClass::NumericValueOutOfRange => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        ErrorClass::InvalidParameterValue => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        ErrorClass::NullValueNotAllowed => PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        ErrorClass::ProtocolViolation => PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION,
        ErrorClass::InternalError => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
    };
    match e.detail() {
        Some(detail) => error_with_detail(code, e.to_string(), detail),
        None => error(code, e.to_string()),
    }
}

/// Unwraps an engine result, [`raise`]-ing its error.
pub trait OrRaise<T> {
    /// The value, or an SQL error that never returns.
    fn or_raise(self) -> T;
}

impl<T, E: Into<VectorError>> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> T {
        self.unwrap_or_else(|e| raise(&e.into()))
    }
}

/// Detoasts a `vector`/`halfvec` datum and borrows its elements.
///
/// The slice lives in the current memory context (at least until the function returns). A datum
/// whose dimension count disagrees with its size ([`stored_dimensions`]) raises
/// `data_corrupted` (XX001) instead of being read past its end.
///
/// # Safety
/// `datum` must be a non-null datum of type `K`.
pub unsafe fn elems<'a, K: VectorType>(datum: pg_sys::Datum) -> &'a [K::Elem] {
    // SAFETY: `datum` is a non-null varlena of type K (this function's contract);
    // `pg_detoast_datum` returns it (or a palloc'd copy) with a 4-byte header and int alignment,
    // so the size in the header covers the datum and, when it is at least 8 bytes, the i16
    // dimension count at offset 4 is inside it.
    let (varlena, size, dims) = unsafe {
        let varlena = pg_sys::pg_detoast_datum(datum.cast_mut_ptr::<pg_sys::varlena>());
        let size = pgrx::varsize_4b(varlena);
        let dims = if size >= HEADER_BYTES { varlena.cast::<u8>().add(4).cast::<i16>().read() } else { 0 };
        (varlena.cast::<u8>(), size, dims)
    };
    let Some(dims) = stored_dimensions::<K>(size, dims) else {
        error(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, format!("{} datum has an invalid layout", K::NAME))
    };
    // SAFETY: `stored_dimensions` checked that the datum's `size` bytes hold exactly the header
    // and `dims` elements; the element array at offset 8 of an int-aligned datum is aligned for
    // f32 and f16, and lives in the current memory context past this call.
    unsafe { std::slice::from_raw_parts(varlena.add(HEADER_BYTES).cast::<K::Elem>(), dims) }
}

/// Widens the elements of a datum of type `K` to `f32`.
///
/// # Safety
/// As [`elems`].
pub unsafe fn widened<K: VectorType>(datum: pg_sys::Datum) -> Vec<f32> {
    // SAFETY: `datum` is a non-null value of type K (this function's contract: a STRICT function's
    // argument declared K, or an index key or query checked for null), which is what `elems` requires.
    strata_engine::vector_value::widen::<K>(unsafe { elems::<K>(datum) })
}

/// Allocates a new value of type `K` in the current memory context, raising the dimension-count
/// errors for a value with no or too many elements.
pub fn new_datum<K: VectorType>(values: &[K::Elem]) -> pg_sys::Datum {
    check_dimensions::<K>(values.len()).or_raise();
    let size = HEADER_BYTES + std::mem::size_of_val(values);
    // SAFETY: palloc0 returns `size` zeroed bytes (or raises an error); we write the 4-byte varlena
    // header, the i16 dimension count (< 16,000 fits) and exactly `values.len()` elements, all
    // inside the allocation. palloc memory is maximally aligned.
    unsafe {
        let ptr = pg_sys::palloc0(size).cast::<u8>();
        pgrx::set_varsize_4b(ptr.cast(), size as i32);
        ptr.add(4).cast::<i16>().write(values.len() as i16);
        std::ptr::copy_nonoverlapping(values.as_ptr(), ptr.add(HEADER_BYTES).cast::<K::Elem>(), values.len());
        pg_sys::Datum::from(ptr)
    }
}
