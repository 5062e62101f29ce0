//! Distance functions, arithmetic, norms, comparisons and other functions on vectors, computed by
//! [`strata_engine::vector_value::ops`].

use pgrx::{pg_sys, IntoDatum};
use strata_engine::vector_math::Elementwise;
use strata_engine::vector_value::ops::{self, Comparison, DistanceFunction};

use super::{elems, new_datum, HalfVec, OrRaise, Vector, VectorType};
use crate::fmgr::{arg, arg_i32, v1_functions};

v1_functions! {
    l2_distance => distance::<Vector>, DistanceFunction::L2;
    halfvec_l2_distance => distance::<HalfVec>, DistanceFunction::L2;
    vector_l2_squared_distance => distance::<Vector>, DistanceFunction::L2Squared;
    halfvec_l2_squared_distance => distance::<HalfVec>, DistanceFunction::L2Squared;
    inner_product => distance::<Vector>, DistanceFunction::InnerProduct;
    halfvec_inner_product => distance::<HalfVec>, DistanceFunction::InnerProduct;
    vector_negative_inner_product => distance::<Vector>, DistanceFunction::NegativeInnerProduct;
    halfvec_negative_inner_product => distance::<HalfVec>, DistanceFunction::NegativeInnerProduct;
    cosine_distance => distance::<Vector>, DistanceFunction::Cosine;
    halfvec_cosine_distance => distance::<HalfVec>, DistanceFunction::Cosine;
    l1_distance => distance::<Vector>, DistanceFunction::L1;
    halfvec_l1_distance => distance::<HalfVec>, DistanceFunction::L1;
    vector_dims => dims::<Vector>;
    halfvec_vector_dims => dims::<HalfVec>;
    vector_norm => norm::<Vector>;
    halfvec_l2_norm => norm::<HalfVec>;
    l2_normalize => l2_normalize_impl::<Vector>;
    halfvec_l2_normalize => l2_normalize_impl::<HalfVec>;
    subvector => subvector_impl::<Vector>;
    halfvec_subvector => subvector_impl::<HalfVec>;
    vector_add => elementwise::<Vector>, Elementwise::Add;
    halfvec_add => elementwise::<HalfVec>, Elementwise::Add;
    vector_sub => elementwise::<Vector>, Elementwise::Sub;
    halfvec_sub => elementwise::<HalfVec>, Elementwise::Sub;
    vector_mul => elementwise::<Vector>, Elementwise::Mul;
    halfvec_mul => elementwise::<HalfVec>, Elementwise::Mul;
    vector_concat => concat::<Vector>;
    halfvec_concat => concat::<HalfVec>;
    vector_lt => compare_with::<Vector>, Comparison::Less;
    halfvec_lt => compare_with::<HalfVec>, Comparison::Less;
    vector_le => compare_with::<Vector>, Comparison::LessOrEqual;
    halfvec_le => compare_with::<HalfVec>, Comparison::LessOrEqual;
    vector_eq => compare_with::<Vector>, Comparison::Equal;
    halfvec_eq => compare_with::<HalfVec>, Comparison::Equal;
    vector_ne => compare_with::<Vector>, Comparison::NotEqual;
    halfvec_ne => compare_with::<HalfVec>, Comparison::NotEqual;
    vector_ge => compare_with::<Vector>, Comparison::GreaterOrEqual;
    halfvec_ge => compare_with::<HalfVec>, Comparison::GreaterOrEqual;
    vector_gt => compare_with::<Vector>, Comparison::Greater;
    halfvec_gt => compare_with::<HalfVec>, Comparison::Greater;
    vector_cmp => cmp::<Vector>;
    halfvec_cmp => cmp::<HalfVec>;
}

fn float8(value: f64) -> pg_sys::Datum {
    value.into_datum().expect("float8 is never null")
}

/// Both arguments of a binary function.
///
/// # Safety
/// Arguments 0 and 1 must be non-null values of type K.
unsafe fn operands<'a, K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> (&'a [K::Elem], &'a [K::Elem]) {
    // SAFETY: every caller is a STRICT function declared (K, K) in sql/types.sql, so both
    // argument slots exist and hold non-null datums of type K, as `elems` requires.
    unsafe { (elems::<K>(arg(fcinfo, 0)), elems::<K>(arg(fcinfo, 1))) }
}

/// `f(K, K)` → `double precision`.
unsafe fn distance<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo, f: DistanceFunction) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    float8(ops::distance::<K>(f, a, b).or_raise())
}

unsafe fn dims<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K) in SQL.
    let a = unsafe { elems::<K>(arg(fcinfo, 0)) };
    pg_sys::Datum::from(a.len() as i32)
}

unsafe fn norm<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K) in SQL.
    float8(ops::norm::<K>(unsafe { elems::<K>(arg(fcinfo, 0)) }))
}

unsafe fn l2_normalize_impl<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K) in SQL.
    new_datum::<K>(&ops::l2_normalize::<K>(unsafe { elems::<K>(arg(fcinfo, 0)) }).or_raise())
}

unsafe fn subvector_impl<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, integer, integer) in SQL.
    let (a, start, count) = unsafe { (elems::<K>(arg(fcinfo, 0)), arg_i32(fcinfo, 1), arg_i32(fcinfo, 2)) };
    new_datum::<K>(ops::subvector::<K>(a, start, count).or_raise())
}

/// `K + K`, `K - K`, `K * K`.
unsafe fn elementwise<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo, op: Elementwise) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    new_datum::<K>(&ops::elementwise::<K>(op, a, b).or_raise())
}

unsafe fn concat<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    new_datum::<K>(&ops::concat::<K>(a, b).or_raise())
}

/// The btree operators `<`, `<=`, `=`, `<>`, `>=`, `>`.
unsafe fn compare_with<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo, op: Comparison) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    pg_sys::Datum::from(op.holds(ops::compare::<K>(a, b)))
}

/// The btree support function: -1, 0 or 1.
unsafe fn cmp<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    pg_sys::Datum::from(ops::compare::<K>(a, b) as i32)
}
