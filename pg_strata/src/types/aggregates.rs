//! `avg(vector)` / `avg(halfvec)` support: a `double precision[]` state `{count, sum₁, …, sum_d}`
//! that is accumulated, combined across parallel workers and finally divided.
//!
//! The state functions are callable from SQL with arrays the caller builds, so each one validates
//! its state exactly as pgvector does (same checks, same order, same error texts and SQLSTATEs):
//! a malformed array is "`<function>`: expected state array" (XX000); a state of `d > 0` sums
//! must match the other operand ("expected d dimensions, not n"); a sum that overflows `float8`
//! is "value out of range: overflow". NaN/infinite sums pass through the state, as in pgvector,
//! and are rejected by the final function, which validates every element of the mean like any
//! other new vector (`NaN not allowed in vector`, `"…" is out of range for type halfvec`).

use std::ffi::c_char;

use pgrx::{pg_sys, PgSqlErrorCode};

use super::{
    arithmetic_error, check_dimensions, check_expected_dimensions, new_datum_from_f32, widened, HalfVec, VecKind,
    Vector,
};
use crate::fmgr::{arg, error, v1_functions};
use strata_engine::vector_math::ArithmeticError;

v1_functions! {
    vector_accum => accumulate::<Vector>;
    halfvec_accum => accumulate::<HalfVec>;
    // pgvector declares halfvec_combine with vector_combine's C function, so both report
    // themselves as vector_combine and check dimensions against vector's limit.
    vector_combine => combine;
    halfvec_combine => combine;
    vector_avg => average::<Vector>;
    halfvec_avg => average::<HalfVec>;
}

/// Reads an aggregate state array, pgvector's `CheckStateArray`: a 1-D `float8[]` of at least one
/// element without a null bitmap, else "`type_name`_`function`: expected state array" (XX000).
///
/// # Safety
/// `datum` must be a non-null array datum.
unsafe fn read_state(datum: pg_sys::Datum, type_name: &str, function: &str) -> Vec<f64> {
    // SAFETY: guaranteed by the caller; the array is detoasted before its header is read, and
    // deconstruct_array only runs once the header says it holds float8 elements (pass-by-value
    // on 64-bit platforms, 8 bytes, double-aligned) and no nulls, returning `count` datums.
    unsafe {
        let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        // `dataoffset != 0` is ARR_HASNULL: the array carries a null bitmap.
        if (*array).ndim != 1 || (*array).dataoffset != 0 || (*array).elemtype != pg_sys::FLOAT8OID {
            state_error(type_name, function);
        }
        let mut datums: *mut pg_sys::Datum = std::ptr::null_mut();
        let mut count = 0;
        pg_sys::deconstruct_array(
            array,
            pg_sys::FLOAT8OID,
            8,
            true,
            b'd' as c_char,
            &raw mut datums,
            std::ptr::null_mut(),
            &raw mut count,
        );
        if count < 1 {
            state_error(type_name, function);
        }
        std::slice::from_raw_parts(datums, count as usize).iter().map(|d| f64::from_bits(d.value() as u64)).collect()
    }
}

/// Raises pgvector's "`type_name`_`function`: expected state array" (an `elog`, so XX000).
fn state_error(type_name: &str, function: &str) -> ! {
    error(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("{type_name}_{function}: expected state array"))
}

/// Builds a `float8[]` state array.
fn write_state(state: &[f64]) -> pg_sys::Datum {
    let mut datums: Vec<pg_sys::Datum> = state.iter().map(|v| pg_sys::Datum::from(v.to_bits())).collect();
    // SAFETY: construct_array copies `datums.len()` pass-by-value float8 datums (8 bytes,
    // double-aligned, as the catalog describes float8).
    let array = unsafe {
        pg_sys::construct_array(datums.as_mut_ptr(), datums.len() as i32, pg_sys::FLOAT8OID, 8, true, b'd' as c_char)
    };
    pg_sys::Datum::from(array)
}

/// `a + b` for two state sums, raising "value out of range: overflow" when it is infinite.
fn add_sums(a: f64, b: f64) -> f64 {
    let sum = a + b;
    if sum.is_infinite() {
        arithmetic_error(ArithmeticError::Overflow);
    }
    sum
}

/// `K_accum(double precision[], K)`: adds one value to the state. A state without sums (`{n}`)
/// takes the value's dimensions; otherwise they must agree.
unsafe fn accumulate<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[], K) in SQL.
    let (state, value) = unsafe { (read_state(arg(fcinfo, 0), K::NAME, "accum"), widened::<K>(arg(fcinfo, 1))) };
    let dims = state.len() - 1;
    let mut next = Vec::with_capacity(value.len() + 1);
    next.push(state[0] + 1.0);
    if dims == 0 {
        next.extend(value.iter().map(|&x| f64::from(x)));
    } else {
        check_expected_dimensions(dims, value.len());
        next.extend(state[1..].iter().zip(&value).map(|(&sum, &x)| add_sums(sum, f64::from(x))));
    }
    write_state(&next)
}

/// `vector_combine` / `halfvec_combine(double precision[], double precision[])`: merges two
/// partial states. A state without sums is the identity; otherwise the dimensions must agree.
unsafe fn combine(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[], double precision[]) in SQL.
    let (a, b) =
        unsafe { (read_state(arg(fcinfo, 0), "vector", "combine"), read_state(arg(fcinfo, 1), "vector", "combine")) };
    let (dims_a, dims_b) = (a.len() - 1, b.len() - 1);
    let mut merged = Vec::with_capacity(dims_a.max(dims_b) + 1);
    merged.push(a[0] + b[0]);
    if dims_a == 0 && dims_b != 0 {
        check_dimensions::<Vector>(dims_b);
        merged.extend_from_slice(&b[1..]);
    } else if dims_b == 0 && dims_a != 0 {
        check_dimensions::<Vector>(dims_a);
        merged.extend_from_slice(&a[1..]);
    } else if dims_a != 0 {
        check_dimensions::<Vector>(dims_a);
        check_expected_dimensions(dims_a, dims_b);
        merged.extend(a[1..].iter().zip(&b[1..]).map(|(&x, &y)| add_sums(x, y)));
    }
    write_state(&merged)
}

/// `K_avg(double precision[])`: the mean, or NULL when the count is zero. Each element of the mean
/// is rounded to K and validated as a new element of K.
unsafe fn average<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[]) in SQL.
    let state = unsafe { read_state(arg(fcinfo, 0), K::NAME, "avg") };
    let count = state[0];
    if count == 0.0 {
        // SAFETY: `fcinfo` is the valid call frame of this function.
        return unsafe { pgrx::fcinfo::pg_return_null(fcinfo) };
    }
    check_dimensions::<K>(state.len() - 1);
    let mean: Vec<f32> = state[1..].iter().map(|sum| (sum / count) as f32).collect();
    new_datum_from_f32::<K>(&mean)
}
