//! The `vector` and `halfvec` SQL types.
//!
//! On-disk and in-memory layout (identical to pgvector's, so dumps and binary COPY interoperate):
//!
//! ```text
//! offset 0  u32  varlena header (4-byte form; total size)
//! offset 4  i16  dimensions
//! offset 6  i16  unused, always 0
//! offset 8  [E]  elements: f32 (vector) or IEEE binary16 (halfvec)
//! ```
//!
//! Both types share one generic implementation over [`VecKind`]; the exported V1 entry points are
//! thin monomorphic wrappers declared with `v1_functions!`.

mod aggregates;
mod casts;
mod io;
mod ops;

use half::f16;
use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::kernels::{self, DotAndNorms};
use strata_engine::store::ElementKind;
use strata_engine::vector_math::{check_finite, ArithmeticError, ElementError};
use strata_engine::vector_text::write_float;
use strata_engine::MAX_DIMENSIONS;

use crate::fmgr::error;

/// Bytes before the first element.
const HEADER_BYTES: usize = 8;

/// One of the two vector types: its SQL name, element type and kernels.
pub trait VecKind: 'static {
    /// The stored element type.
    type Elem: Copy + 'static;
    /// The SQL type name, used in error messages.
    const NAME: &'static str;
    /// The text-format element precision.
    const ELEMENT: ElementKind;

    /// Widens one element.
    fn to_f32(elem: Self::Elem) -> f32;
    /// Rounds an `f32` to the element type without a range check (pgvector's
    /// `Float4ToHalfUnchecked`): a value beyond the element range becomes an infinity.
    fn from_f32_unchecked(value: f32) -> Self::Elem;
    /// The element's bit pattern as sent by binary send/recv.
    fn send_bits(elem: Self::Elem) -> u32;
    /// Reads an element from a binary message.
    ///
    /// # Safety
    /// `buf` must be a valid `StringInfo` message.
    unsafe fn recv(buf: pg_sys::StringInfo) -> Self::Elem;
    /// Bytes per element in binary messages.
    const SEND_BYTES: i32;

    /// Squared Euclidean distance.
    fn l2_squared(a: &[Self::Elem], b: &[Self::Elem]) -> f32;
    /// Inner product.
    fn dot(a: &[Self::Elem], b: &[Self::Elem]) -> f32;
    /// Manhattan distance.
    fn l1(a: &[Self::Elem], b: &[Self::Elem]) -> f32;
    /// Inner product and squared norms.
    fn dot_and_norms(a: &[Self::Elem], b: &[Self::Elem]) -> DotAndNorms;
}

/// `vector`: single-precision elements.
pub struct Vector;
/// `halfvec`: half-precision elements.
pub struct HalfVec;

impl VecKind for Vector {
    type Elem = f32;
    const NAME: &'static str = "vector";
    const ELEMENT: ElementKind = ElementKind::F32;
    const SEND_BYTES: i32 = 4;

    fn to_f32(elem: f32) -> f32 {
        elem
    }
    fn from_f32_unchecked(value: f32) -> f32 {
        value
    }
    fn send_bits(elem: f32) -> u32 {
        elem.to_bits()
    }
    unsafe fn recv(buf: pg_sys::StringInfo) -> f32 {
        // SAFETY: guaranteed by the caller.
        unsafe { pg_sys::pq_getmsgfloat4(buf) }
    }
    fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
        kernels::l2_squared(a, b)
    }
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        kernels::dot(a, b)
    }
    fn l1(a: &[f32], b: &[f32]) -> f32 {
        kernels::l1(a, b)
    }
    fn dot_and_norms(a: &[f32], b: &[f32]) -> DotAndNorms {
        kernels::dot_and_norms(a, b)
    }
}

impl VecKind for HalfVec {
    type Elem = f16;
    const NAME: &'static str = "halfvec";
    const ELEMENT: ElementKind = ElementKind::F16;
    const SEND_BYTES: i32 = 2;

    fn to_f32(elem: f16) -> f32 {
        elem.to_f32()
    }
    fn from_f32_unchecked(value: f32) -> f16 {
        f16::from_f32(value)
    }
    fn send_bits(elem: f16) -> u32 {
        u32::from(elem.to_bits())
    }
    unsafe fn recv(buf: pg_sys::StringInfo) -> f16 {
        // SAFETY: guaranteed by the caller.
        f16::from_bits(unsafe { pg_sys::pq_getmsgint(buf, 2) } as u16)
    }
    fn l2_squared(a: &[f16], b: &[f16]) -> f32 {
        kernels::l2_squared_f16(a, b)
    }
    fn dot(a: &[f16], b: &[f16]) -> f32 {
        kernels::dot_f16(a, b)
    }
    fn l1(a: &[f16], b: &[f16]) -> f32 {
        kernels::l1_f16(a, b)
    }
    fn dot_and_norms(a: &[f16], b: &[f16]) -> DotAndNorms {
        kernels::dot_and_norms_f16(a, b)
    }
}

/// Detoasts a `vector`/`halfvec` datum and borrows its elements.
///
/// The slice lives in the current memory context (at least until the function returns).
///
/// # Safety
/// `datum` must be a non-null datum of type `K`.
pub unsafe fn elems<'a, K: VecKind>(datum: pg_sys::Datum) -> &'a [K::Elem] {
    // SAFETY: the caller guarantees a varlena of type K; `pg_detoast_datum` returns it (or a
    // palloc'd copy) with a 4-byte header and int alignment, so the element array at offset 8 is
    // aligned for f32 and f16, and the stored dimension count says how many elements follow.
    unsafe {
        let varlena = pg_sys::pg_detoast_datum(datum.cast_mut_ptr::<pg_sys::varlena>()).cast::<u8>();
        let dims = varlena.add(4).cast::<i16>().read();
        let dims = usize::try_from(dims).unwrap_or(0);
        std::slice::from_raw_parts(varlena.add(HEADER_BYTES).cast::<K::Elem>(), dims)
    }
}

/// Widens the elements of a datum of type `K` to `f32`.
///
/// # Safety
/// As [`elems`].
pub unsafe fn widened<K: VecKind>(datum: pg_sys::Datum) -> Vec<f32> {
    // SAFETY: guaranteed by the caller.
    unsafe { elems::<K>(datum) }.iter().map(|&e| K::to_f32(e)).collect()
}

/// Allocates a new value of type `K` in the current memory context.
pub fn new_datum<K: VecKind>(values: &[K::Elem]) -> pg_sys::Datum {
    check_dimensions::<K>(values.len());
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

/// pgvector's `Float4ToHalf`: rounds `value` to K's element type, raising
/// `"…" is out of range for type K` (22003) when a finite value does not fit. NaN and infinities
/// pass through unchanged; [`check_element`] rejects them.
pub fn narrow_element<K: VecKind>(value: f32) -> K::Elem {
    let elem = K::from_f32_unchecked(value);
    if K::to_f32(elem).is_infinite() && value.is_finite() {
        let mut text = String::new();
        write_float(&mut text, value);
        error(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("\"{text}\" is out of range for type {}", K::NAME),
        );
    }
    elem
}

/// pgvector's `CheckElement`: raises "NaN not allowed in K" / "infinite value not allowed in K"
/// (22000) for an element a value of type K may not hold.
pub fn check_element<K: VecKind>(elem: K::Elem) {
    if let Err(e) = check_finite(&[K::to_f32(elem)], K::NAME) {
        element_error(e);
    }
}

/// Allocates a value of type K from elements converted with [`narrow_element`], after checking
/// every one with [`check_element`] (pgvector converts all elements first, then checks them).
pub fn new_datum_checked<K: VecKind>(elems: &[K::Elem]) -> pg_sys::Datum {
    for &elem in elems {
        check_element::<K>(elem);
    }
    new_datum::<K>(elems)
}

/// Rounds computed `f32` values to K and allocates a value of type K, checking element by element
/// as pgvector does for computed values: [`narrow_element`], then [`check_element`]. Every function
/// that computes new elements (text input, averages, arithmetic, normalisation) stores them
/// through here, so no computed NaN, infinity or out-of-range value can reach a stored vector.
pub fn new_datum_from_f32<K: VecKind>(values: &[f32]) -> pg_sys::Datum {
    let elems: Vec<K::Elem> = values
        .iter()
        .map(|&value| {
            let elem = narrow_element::<K>(value);
            check_element::<K>(elem);
            elem
        })
        .collect();
    new_datum::<K>(&elems)
}

/// Raises "K must have at least 1 dimension" / "K cannot have more than 16000 dimensions".
pub fn check_dimensions<K: VecKind>(dims: usize) {
    if dims < 1 {
        error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, format!("{} must have at least 1 dimension", K::NAME));
    }
    if dims > MAX_DIMENSIONS {
        error(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{} cannot have more than {MAX_DIMENSIONS} dimensions", K::NAME),
        );
    }
}

/// Raises "expected N dimensions, not M" when a typmod is set and differs.
pub fn check_typmod(typmod: i32, dims: usize) {
    if typmod != -1 && usize::try_from(typmod).ok() != Some(dims) {
        error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, format!("expected {typmod} dimensions, not {dims}"));
    }
}

/// Raises "expected N dimensions, not M" unless `actual == expected` (pgvector's
/// `CheckExpectedDim` with a known dimension count, as the aggregate state functions use it).
pub fn check_expected_dimensions(expected: usize, actual: usize) {
    if expected != actual {
        error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, format!("expected {expected} dimensions, not {actual}"));
    }
}

/// Raises "different vector dimensions A and B" unless the operands agree.
pub fn check_same_dimensions<K: VecKind>(a: usize, b: usize) {
    if a != b {
        error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, format!("different {} dimensions {a} and {b}", K::NAME));
    }
}

/// Raises an arithmetic error with PostgreSQL's SQLSTATE for it.
pub fn arithmetic_error(e: ArithmeticError) -> ! {
    let code = match e {
        ArithmeticError::Overflow | ArithmeticError::Underflow => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        ArithmeticError::EmptyResult(_) => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
    };
    error(code, e.to_string())
}

/// Raises a NaN / infinity error.
pub fn element_error(e: ElementError) -> ! {
    error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, e.to_string())
}
