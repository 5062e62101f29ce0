//! Casts: arrays ↔ vectors and `vector` ↔ `halfvec`.

use std::ffi::c_char;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::vector_math;

use super::{
    check_dimensions, check_typmod, elems, narrow_element, new_datum_checked, widened, HalfVec, VecKind, Vector,
};
use crate::fmgr::{arg, arg_i32, error, v1_functions};

v1_functions! {
    array_to_vector => array_to::<Vector>;
    array_to_halfvec => array_to::<HalfVec>;
    vector_to_float4 => to_array::<Vector, Float4Array>;
    halfvec_to_float4 => to_array::<HalfVec, Float4Array>;
    vector_to_float8 => to_array::<Vector, Float8Array>;
    halfvec_to_float8 => to_array::<HalfVec, Float8Array>;
    vector_to_numeric => to_array::<Vector, NumericArray>;
    halfvec_to_numeric => to_array::<HalfVec, NumericArray>;
    vector_to_int4 => to_array::<Vector, Int4Array>;
    halfvec_to_int4 => to_array::<HalfVec, Int4Array>;
    halfvec_to_vector => convert::<HalfVec, Vector>;
    vector_to_halfvec => convert::<Vector, HalfVec>;
}

/// Converts one array element datum to `f32`.
type ElementToF32 = unsafe fn(pg_sys::Datum) -> f32;

/// `int4` → `f32` (rounded, as C's `(float)` cast).
fn int4_to_f32(datum: pg_sys::Datum) -> f32 {
    datum.value() as i32 as f32
}

/// `float4` → `f32`.
fn float4_to_f32(datum: pg_sys::Datum) -> f32 {
    f32::from_bits(datum.value() as u32)
}

/// `float8` → `f32` (rounded; beyond the `f32` range it becomes an infinity, as in C).
fn float8_to_f32(datum: pg_sys::Datum) -> f32 {
    f64::from_bits(datum.value() as u64) as f32
}

/// `numeric` → `f32` through PostgreSQL's `numeric_float4`, which raises its own errors.
///
/// # Safety
/// `datum` must be a non-null `numeric` datum.
unsafe fn numeric_to_f32(datum: pg_sys::Datum) -> f32 {
    // SAFETY: numeric_float4 takes one numeric datum (guaranteed by the caller) and returns a
    // float4 datum.
    let float4 = unsafe { pgrx::direct_function_call_as_datum(pg_sys::numeric_float4, &[Some(datum)]) }
        .expect("numeric_float4 never returns NULL for a non-null input");
    f32::from_bits(float4.value() as u32)
}

/// `array_to_K(integer[] | real[] | double precision[] | numeric[], integer, boolean)`, in
/// pgvector's order: 1-D, no nulls, dimensions, typmod, then every element converted (a finite
/// value beyond K's range fails there), then every element checked for NaN and infinity.
unsafe fn array_to<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is an array (declared so for each cast), argument 1 the typmod. The
    // array is detoasted before its header is read; deconstruct_array returns `count` datums of
    // the element type read from the header, and the nulls check ran first, so each datum is a
    // non-null value of that type, which is what the chosen ElementToF32 reads.
    unsafe {
        let array = pg_sys::pg_detoast_datum(arg(fcinfo, 0).cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        let typmod = arg_i32(fcinfo, 1);
        if (*array).ndim > 1 {
            error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, "array must be 1-D");
        }
        if pg_sys::array_contains_nulls(array) {
            error(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, "array must not contain nulls");
        }
        let element_type = (*array).elemtype;
        let (mut typlen, mut typbyval, mut typalign) = (0i16, false, 0 as c_char);
        pg_sys::get_typlenbyvalalign(element_type, &raw mut typlen, &raw mut typbyval, &raw mut typalign);
        let mut datums: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut count = 0;
        pg_sys::deconstruct_array(
            array,
            element_type,
            i32::from(typlen),
            typbyval,
            typalign,
            &raw mut datums,
            std::ptr::null_mut(),
            &raw mut count,
        );
        let datums: &[pg_sys::Datum] = if count > 0 { std::slice::from_raw_parts(datums, count as usize) } else { &[] };
        check_dimensions::<K>(datums.len());
        check_typmod(typmod, datums.len());
        let to_f32: ElementToF32 = match element_type {
            pg_sys::INT4OID => int4_to_f32,
            pg_sys::FLOAT4OID => float4_to_f32,
            pg_sys::FLOAT8OID => float8_to_f32,
            pg_sys::NUMERICOID => numeric_to_f32,
            _ => error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, "unsupported array type"),
        };
        let elems: Vec<K::Elem> = datums.iter().map(|&d| narrow_element::<K>(to_f32(d))).collect();
        new_datum_checked::<K>(&elems)
    }
}

/// The element type of an array a vector is cast to.
trait ArrayTarget {
    const OID: pg_sys::Oid;
    const LEN: i32;
    const BYVAL: bool;
    const ALIGN: u8;
    /// Converts one element.
    ///
    /// # Safety
    /// Must run in a backend (may call PostgreSQL conversion functions).
    unsafe fn datum(value: f32) -> pg_sys::Datum;
}

struct Float4Array;
struct Float8Array;
struct NumericArray;
struct Int4Array;

impl ArrayTarget for Float4Array {
    const OID: pg_sys::Oid = pg_sys::FLOAT4OID;
    const LEN: i32 = 4;
    const BYVAL: bool = true;
    const ALIGN: u8 = b'i';
    unsafe fn datum(value: f32) -> pg_sys::Datum {
        pg_sys::Datum::from(value.to_bits())
    }
}

impl ArrayTarget for Float8Array {
    const OID: pg_sys::Oid = pg_sys::FLOAT8OID;
    const LEN: i32 = 8;
    const BYVAL: bool = true;
    const ALIGN: u8 = b'd';
    unsafe fn datum(value: f32) -> pg_sys::Datum {
        pg_sys::Datum::from(f64::from(value).to_bits())
    }
}

impl ArrayTarget for NumericArray {
    const OID: pg_sys::Oid = pg_sys::NUMERICOID;
    const LEN: i32 = -1;
    const BYVAL: bool = false;
    const ALIGN: u8 = b'i';
    unsafe fn datum(value: f32) -> pg_sys::Datum {
        // SAFETY: float4_numeric takes one float4 datum and returns a palloc'd numeric.
        unsafe {
            pgrx::direct_function_call_as_datum(pg_sys::float4_numeric, &[Some(pg_sys::Datum::from(value.to_bits()))])
                .expect("float4_numeric never returns NULL for a non-null input")
        }
    }
}

impl ArrayTarget for Int4Array {
    const OID: pg_sys::Oid = pg_sys::INT4OID;
    const LEN: i32 = 4;
    const BYVAL: bool = true;
    const ALIGN: u8 = b'i';
    unsafe fn datum(value: f32) -> pg_sys::Datum {
        match vector_math::to_i32_rounded(value) {
            Some(integer) => pg_sys::Datum::from(integer),
            None => error(PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range"),
        }
    }
}

/// `K_to_T(K, integer, boolean)` → `T[]`.
unsafe fn to_array<K: VecKind, T: ArrayTarget>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type K; construct_array copies `datums.len()` datums of a
    // type described by T's constants, which match the catalog entries of T::OID.
    unsafe {
        let values = widened::<K>(arg(fcinfo, 0));
        let mut datums: Vec<pg_sys::Datum> = values.iter().map(|&v| T::datum(v)).collect();
        let array = pg_sys::construct_array(
            datums.as_mut_ptr(),
            datums.len() as i32,
            T::OID,
            T::LEN,
            T::BYVAL,
            T::ALIGN as c_char,
        );
        pg_sys::Datum::from(array)
    }
}

/// `from_to_to(From, integer, boolean)`: `vector` ↔ `halfvec`, applying the typmod. Narrowing to
/// `halfvec` fails on a value beyond its range ("\"65520\" is out of range for type halfvec").
unsafe fn convert<From: VecKind, To: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type From, argument 1 the target typmod.
    let (values, typmod) = unsafe { (elems::<From>(arg(fcinfo, 0)), arg_i32(fcinfo, 1)) };
    check_dimensions::<To>(values.len());
    check_typmod(typmod, values.len());
    let converted: Vec<To::Elem> = values.iter().map(|&e| narrow_element::<To>(From::to_f32(e))).collect();
    new_datum_checked::<To>(&converted)
}
