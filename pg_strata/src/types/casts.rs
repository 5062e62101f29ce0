//! Casts: arrays ↔ vectors and `vector` ↔ `halfvec`, in the order and with the checks of
//! [`strata_engine::vector_value`]'s cast functions.

use std::ffi::c_char;

use pgrx::pg_sys;
use strata_engine::vector_value::{self, VectorError};

use super::{elems, new_datum, raise, widened, HalfVec, OrRaise, Vector, VectorType};
use crate::fmgr::{arg, arg_i32, v1_functions};

v1_functions! {
    array_to_vector => array_to::<Vector>;
    array_to_halfvec => array_to::<HalfVec>;
    vector_to_float4 => to_array::<Vector>, ArrayElement::Float4;
    halfvec_to_float4 => to_array::<HalfVec>, ArrayElement::Float4;
    vector_to_float8 => to_array::<Vector>, ArrayElement::Float8;
    halfvec_to_float8 => to_array::<HalfVec>, ArrayElement::Float8;
    vector_to_numeric => to_array::<Vector>, ArrayElement::Numeric;
    halfvec_to_numeric => to_array::<HalfVec>, ArrayElement::Numeric;
    vector_to_int4 => to_array::<Vector>, ArrayElement::Int4;
    halfvec_to_int4 => to_array::<HalfVec>, ArrayElement::Int4;
    halfvec_to_vector => convert::<HalfVec, Vector>;
    vector_to_halfvec => convert::<Vector, HalfVec>;
}

/// The element types of the arrays vectors are cast from and to.
#[derive(Debug, Clone, Copy)]
enum ArrayElement {
    Int4,
    Float4,
    Float8,
    Numeric,
}

impl ArrayElement {
    /// The element type with this OID, if vectors cast from its arrays.
    fn of(oid: pg_sys::Oid) -> Option<Self> {
        [Self::Int4, Self::Float4, Self::Float8, Self::Numeric].into_iter().find(|e| e.oid() == oid)
    }

    fn oid(self) -> pg_sys::Oid {
        match self {
            Self::Int4 => pg_sys::INT4OID,
            Self::Float4 => pg_sys::FLOAT4OID,
            Self::Float8 => pg_sys::FLOAT8OID,
            Self::Numeric => pg_sys::NUMERICOID,
        }
    }

    /// The `f32` an element datum converts to: `int4` and `float8` rounded as C's `(float)` casts
    /// (beyond the `f32` range a `float8` becomes an infinity), `numeric` through PostgreSQL's
    /// `numeric_float4`, which raises its own errors.
    ///
    /// # Safety
    /// `datum` must be a non-null datum of this type.
    unsafe fn to_f32(self, datum: pg_sys::Datum) -> f32 {
        match self {
            Self::Int4 => datum.value() as i32 as f32,
            Self::Float4 => f32::from_bits(datum.value() as u32),
            Self::Float8 => f64::from_bits(datum.value() as u64) as f32,
            Self::Numeric => {
                // SAFETY: `self` is Numeric, so `datum` is a non-null numeric (this function's
                // contract, met by `ArrayElement::of` on the array's elemtype); numeric_float4 takes
                // exactly that and returns a float4 datum.
                let float4 = unsafe { pgrx::direct_function_call_as_datum(pg_sys::numeric_float4, &[Some(datum)]) }
                    .expect("numeric_float4 never returns NULL for a non-null input");
                f32::from_bits(float4.value() as u32)
            }
        }
    }

    /// The element datum for `value`; `int4` rounds with [`vector_value::to_int4`].
    fn datum_of(self, value: f32) -> pg_sys::Datum {
        match self {
            Self::Int4 => pg_sys::Datum::from(vector_value::to_int4(value).or_raise()),
            Self::Float4 => pg_sys::Datum::from(value.to_bits()),
            Self::Float8 => pg_sys::Datum::from(f64::from(value).to_bits()),
            // SAFETY: float4_numeric takes one float4 datum and returns a palloc'd numeric.
            Self::Numeric => unsafe {
                pgrx::direct_function_call_as_datum(
                    pg_sys::float4_numeric,
                    &[Some(pg_sys::Datum::from(value.to_bits()))],
                )
                .expect("float4_numeric never returns NULL for a non-null input")
            },
        }
    }
}

/// `typlen`, `typbyval` and `typalign` of a type, from the catalog.
fn storage(oid: pg_sys::Oid) -> (i16, bool, c_char) {
    let (mut typlen, mut typbyval, mut typalign) = (0i16, false, 0 as c_char);
    // SAFETY: get_typlenbyvalalign writes the three fields of an existing type (or raises).
    unsafe { pg_sys::get_typlenbyvalalign(oid, &raw mut typlen, &raw mut typbyval, &raw mut typalign) };
    (typlen, typbyval, typalign)
}

/// `array_to_K(integer[] | real[] | double precision[] | numeric[], integer, boolean)`, in
/// pgvector's order: 1-D, no nulls, dimensions, typmod, then every element converted (a finite
/// value beyond K's range fails there), then every element checked for NaN and infinity.
unsafe fn array_to<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is an array (declared so for each cast), argument 1 the typmod.
    let (element_type, datums) = unsafe { array_datums(arg(fcinfo, 0)) };
    // SAFETY: every array_to_K cast is declared (array, integer, boolean) in SQL, so argument 1
    // is a non-null int4 (casts are strict).
    let typmod = unsafe { arg_i32(fcinfo, 1) };
    vector_value::check_dimensions::<K>(datums.len()).or_raise();
    vector_value::check_typmod(typmod, datums.len()).or_raise();
    let element = ArrayElement::of(element_type).unwrap_or_else(|| raise(&VectorError::UnsupportedArrayType));
    // SAFETY: the datums are non-null values of `element`'s type (`array_datums`).
    new_datum::<K>(&vector_value::cast_from_f32::<K>(datums.iter().map(|&d| unsafe { element.to_f32(d) })).or_raise())
}

/// The element type and the elements of an array argument, after pgvector's first two checks
/// (one dimension, no nulls).
///
/// # Safety
/// `datum` must be a non-null array datum. The datums returned are non-null values of the element
/// type, living in the current memory context.
pub(super) unsafe fn array_datums<'a>(datum: pg_sys::Datum) -> (pg_sys::Oid, &'a [pg_sys::Datum]) {
    // SAFETY: `datum` is a non-null array (callers pass the argument of a STRICT cast declared on
    // an array type). The array is detoasted before its header is read;
    // deconstruct_array returns `count` datums of the element type read from the header, and the
    // nulls check ran first, so each datum is a non-null value of that type.
    unsafe {
        let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        if (*array).ndim > 1 {
            raise(&VectorError::ArrayNotOneDimensional);
        }
        if pg_sys::array_contains_nulls(array) {
            raise(&VectorError::ArrayContainsNulls);
        }
        let element_type = (*array).elemtype;
        let (typlen, typbyval, typalign) = storage(element_type);
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
        (element_type, datums)
    }
}

/// The `f32` values of array elements of type `element_type`, converted as pgvector converts them
/// ([`ArrayElement::to_f32`]); "unsupported array type" for other element types.
///
/// # Safety
/// As [`array_datums`], whose result this takes.
pub(super) unsafe fn array_f32s(element_type: pg_sys::Oid, datums: &[pg_sys::Datum]) -> Vec<f32> {
    let element = ArrayElement::of(element_type).unwrap_or_else(|| raise(&VectorError::UnsupportedArrayType));
    // SAFETY: `datums` and `element_type` come from one `array_datums` call (this function's
    // contract), so each datum is a non-null value of `element`'s type.
    datums.iter().map(|&d| unsafe { element.to_f32(d) }).collect()
}

/// `K_to_T(K, integer, boolean)` → `T[]`.
unsafe fn to_array<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo, element: ArrayElement) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type K (declared so in SQL).
    let values = unsafe { widened::<K>(arg(fcinfo, 0)) };
    let mut datums: Vec<pg_sys::Datum> = values.iter().map(|&v| element.datum_of(v)).collect();
    let (typlen, typbyval, typalign) = storage(element.oid());
    // SAFETY: construct_array copies `datums.len()` datums of `element`'s type, described by its
    // catalog entry.
    let array = unsafe {
        pg_sys::construct_array(
            datums.as_mut_ptr(),
            datums.len() as i32,
            element.oid(),
            i32::from(typlen),
            typbyval,
            typalign,
        )
    };
    pg_sys::Datum::from(array)
}

/// `from_to_to(From, integer, boolean)`: `vector` ↔ `halfvec`, applying the typmod
/// ([`vector_value::convert`]).
unsafe fn convert<From: VectorType, To: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type From, argument 1 the target typmod.
    let (values, typmod) = unsafe { (elems::<From>(arg(fcinfo, 0)), arg_i32(fcinfo, 1)) };
    new_datum::<To>(&vector_value::convert::<From, To>(values, typmod).or_raise())
}
