//! `avg(vector)` / `avg(halfvec)` support: a `double precision[]` state `{count, sum₁, …, sum_d}`
//! that is accumulated, combined across parallel workers and finally divided.

use std::ffi::c_char;

use pgrx::{pg_sys, PgSqlErrorCode};

use super::{arithmetic_error, check_same_dimensions, new_datum_from_f32, widened, HalfVec, VecKind, Vector};
use crate::fmgr::{arg, error, v1_functions};
use strata_engine::vector_math::ArithmeticError;

v1_functions! {
    vector_accum => accumulate::<Vector>;
    halfvec_accum => accumulate::<HalfVec>;
    vector_combine => combine::<Vector>;
    halfvec_combine => combine::<HalfVec>;
    vector_avg => average::<Vector>;
    halfvec_avg => average::<HalfVec>;
}

/// Reads an aggregate state array (1-D `float8[]` without nulls).
///
/// # Safety
/// `datum` must be a non-null `double precision[]`.
unsafe fn read_state(datum: pg_sys::Datum) -> Vec<f64> {
    // SAFETY: guaranteed by the caller; the header is checked before deconstruct_array reads
    // `count` float8 datums (pass-by-value on 64-bit platforms).
    unsafe {
        let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        if (*array).ndim != 1 || (*array).elemtype != pg_sys::FLOAT8OID || pg_sys::array_contains_nulls(array) {
            error(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "expected an aggregate state array of double precision");
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
        let state: Vec<f64> = std::slice::from_raw_parts(datums, count as usize)
            .iter()
            .map(|d| f64::from_bits(d.value() as u64))
            .collect();
        if state.is_empty() {
            error(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "expected an aggregate state array of double precision");
        }
        state
    }
}

fn write_state(state: &[f64]) -> pg_sys::Datum {
    if state.iter().any(|v| v.is_infinite()) {
        arithmetic_error(ArithmeticError::Overflow);
    }
    let mut datums: Vec<pg_sys::Datum> = state.iter().map(|v| pg_sys::Datum::from(v.to_bits())).collect();
    // SAFETY: construct_array copies `datums.len()` pass-by-value float8 datums.
    let array = unsafe {
        pg_sys::construct_array(datums.as_mut_ptr(), datums.len() as i32, pg_sys::FLOAT8OID, 8, true, b'd' as c_char)
    };
    pg_sys::Datum::from(array)
}

/// `K_accum(double precision[], K)`: adds one value to the state.
unsafe fn accumulate<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[], K) in SQL.
    let (mut state, value) = unsafe { (read_state(arg(fcinfo, 0)), widened::<K>(arg(fcinfo, 1))) };
    if state.len() == 1 {
        state.resize(value.len() + 1, 0.0);
    } else {
        check_same_dimensions::<K>(state.len() - 1, value.len());
    }
    state[0] += 1.0;
    for (sum, &x) in state[1..].iter_mut().zip(&value) {
        *sum += f64::from(x);
    }
    write_state(&state)
}

/// `K_combine(double precision[], double precision[])`: merges two partial states.
unsafe fn combine<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[], double precision[]) in SQL.
    let (a, b) = unsafe { (read_state(arg(fcinfo, 0)), read_state(arg(fcinfo, 1))) };
    if b[0] == 0.0 {
        return write_state(&a);
    }
    if a[0] == 0.0 {
        return write_state(&b);
    }
    check_same_dimensions::<K>(a.len() - 1, b.len() - 1);
    let merged: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    write_state(&merged)
}

/// `K_avg(double precision[])`: the mean, or NULL when no rows were aggregated.
unsafe fn average<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[]) in SQL.
    let state = unsafe { read_state(arg(fcinfo, 0)) };
    let count = state[0];
    if count == 0.0 {
        // SAFETY: `fcinfo` is the valid call frame of this function.
        return unsafe { pgrx::fcinfo::pg_return_null(fcinfo) };
    }
    let mean: Vec<f32> = state[1..].iter().map(|sum| (sum / count) as f32).collect();
    new_datum_from_f32::<K>(&mean)
}
