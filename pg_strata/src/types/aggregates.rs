//! `avg(vector)` / `avg(halfvec)` support: reads and writes the `double precision[]` state whose
//! arithmetic and validation live in [`strata_engine::vector_value::avg`].

use std::ffi::c_char;

use pgrx::pg_sys;
use strata_engine::vector_value::avg::AvgState;

use super::{new_datum, widened, HalfVec, OrRaise, Vector, VectorType};
use crate::fmgr::{arg, v1_functions};

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

/// The elements of a state array, or `None` when it is not a 1-D `float8[]` without a null
/// bitmap (what [`AvgState::read`] rejects, with an empty array).
///
/// # Safety
/// `datum` must be a non-null array datum.
unsafe fn state_elements(datum: pg_sys::Datum) -> Option<Vec<f64>> {
    // SAFETY: `datum` is a non-null array (an argument of the STRICT accum/combine/avg functions,
    // declared double precision[]); the array is detoasted before its header is read, and
    // deconstruct_array only runs once the header says it holds float8 elements (pass-by-value
    // on 64-bit platforms, 8 bytes, double-aligned) and no nulls, returning `count` datums.
    unsafe {
        let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        // `dataoffset != 0` is ARR_HASNULL: the array carries a null bitmap.
        if (*array).ndim != 1 || (*array).dataoffset != 0 || (*array).elemtype != pg_sys::FLOAT8OID {
            return None;
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
            return Some(Vec::new());
        }
        Some(
            std::slice::from_raw_parts(datums, count as usize)
                .iter()
                .map(|d| f64::from_bits(d.value() as u64))
                .collect(),
        )
    }
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

/// `K_accum(double precision[], K)`: adds one value to the state.
unsafe fn accumulate<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[], K) in SQL.
    let state = unsafe { state_elements(arg(fcinfo, 0)) };
    let state = AvgState::read(state.as_deref(), K::NAME, "accum").or_raise();
    // SAFETY: declared (double precision[], K) in SQL and strict, so argument 1 is a non-null K.
    write_state(&state.accumulate(&unsafe { widened::<K>(arg(fcinfo, 1)) }).or_raise())
}

/// `vector_combine` / `halfvec_combine(double precision[], double precision[])`: merges two
/// partial states.
unsafe fn combine(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[], double precision[]) in SQL.
    let a = unsafe { state_elements(arg(fcinfo, 0)) };
    let a = AvgState::read(a.as_deref(), "vector", "combine").or_raise();
    // SAFETY: declared (double precision[], double precision[]) in SQL, so argument 1 is a
    // float8 array.
    let b = unsafe { state_elements(arg(fcinfo, 1)) };
    let b = AvgState::read(b.as_deref(), "vector", "combine").or_raise();
    write_state(&a.combine(b).or_raise())
}

/// `K_avg(double precision[])`: the mean, or NULL when the count is zero.
unsafe fn average<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (double precision[]) in SQL.
    let state = unsafe { state_elements(arg(fcinfo, 0)) };
    match AvgState::read(state.as_deref(), K::NAME, "avg").or_raise().mean::<K>().or_raise() {
        Some(mean) => new_datum::<K>(&mean),
        // SAFETY: `fcinfo` is the valid call frame of this function.
        None => unsafe { pgrx::fcinfo::pg_return_null(fcinfo) },
    }
}
