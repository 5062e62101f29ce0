//! Casts: arrays ↔ vectors and `vector` ↔ `halfvec`.

use std::ffi::c_char;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::vector_math::{self, check_finite, ArithmeticError};
use strata_engine::vector_text::write_float;

use super::{check_dimensions, check_typmod, element_error, new_datum, widened, HalfVec, VecKind, Vector};
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

/// Narrows validated `f32` values to K, naming the first value out of K's range.
fn narrow<K: VecKind>(values: &[f32]) -> Vec<K::Elem> {
    match K::from_f32(values) {
        Ok(elems) => elems,
        Err(ArithmeticError::Overflow) => {
            let culprit = values.iter().copied().find(|&v| K::from_f32(&[v]).is_err()).unwrap_or(f32::INFINITY);
            let mut text = String::new();
            write_float(&mut text, culprit);
            error(
                PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("\"{text}\" is out of range for type {}", K::NAME),
            );
        }
        Err(e) => super::arithmetic_error(e),
    }
}

/// Validates and stores `f32` values as a value of type K with typmod `typmod`.
fn finish<K: VecKind>(values: &[f32], typmod: i32) -> pg_sys::Datum {
    check_dimensions::<K>(values.len());
    check_typmod(typmod, values.len());
    if let Err(e) = check_finite(values, K::NAME) {
        element_error(e);
    }
    new_datum::<K>(&narrow::<K>(values))
}

/// `array_to_K(integer[] | real[] | double precision[] | numeric[], integer, boolean)`.
unsafe fn array_to<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is an array (declared so for each cast), argument 1 the typmod. The
    // array is detoasted before its header is read; deconstruct_array returns `count` datums of
    // the element type read from the header, and the nulls check ran first.
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
        let values: Vec<f32> = match element_type {
            pg_sys::INT4OID => datums.iter().map(|d| d.value() as i32 as f32).collect(),
            pg_sys::FLOAT4OID => datums.iter().map(|d| f32::from_bits(d.value() as u32)).collect(),
            pg_sys::FLOAT8OID => datums.iter().map(|d| f64::from_bits(d.value() as u64) as f32).collect(),
            pg_sys::NUMERICOID => datums
                .iter()
                .map(|&d| {
                    let float4 = pgrx::direct_function_call_as_datum(pg_sys::numeric_float4, &[Some(d)])
                        .expect("numeric_float4 never returns NULL for a non-null input");
                    f32::from_bits(float4.value() as u32)
                })
                .collect(),
            _ => error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, "unsupported array type"),
        };
        finish::<K>(&values, typmod)
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

/// `from_to_to(From, integer, boolean)`: `vector` ↔ `halfvec`, applying the typmod.
unsafe fn convert<From: VecKind, To: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type From, argument 1 the target typmod.
    unsafe {
        let values = widened::<From>(arg(fcinfo, 0));
        finish::<To>(&values, arg_i32(fcinfo, 1))
    }
}
