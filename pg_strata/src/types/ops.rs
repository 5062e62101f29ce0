//! Distance functions, arithmetic, norms, comparisons and other functions on vectors.

use std::cmp::Ordering;

use pgrx::{pg_sys, IntoDatum, PgSqlErrorCode};
use strata_engine::vector_math::{self, Elementwise};
use strata_engine::MAX_DIMENSIONS;

use super::{
    arithmetic_error, check_same_dimensions, elems, new_datum, new_datum_from_f32, widened, HalfVec, VecKind, Vector,
};
use crate::fmgr::{arg, arg_i32, error, v1_functions};

v1_functions! {
    l2_distance => l2_distance_impl::<Vector>;
    halfvec_l2_distance => l2_distance_impl::<HalfVec>;
    vector_l2_squared_distance => l2_squared_distance::<Vector>;
    halfvec_l2_squared_distance => l2_squared_distance::<HalfVec>;
    inner_product => inner_product_impl::<Vector>;
    halfvec_inner_product => inner_product_impl::<HalfVec>;
    vector_negative_inner_product => negative_inner_product::<Vector>;
    halfvec_negative_inner_product => negative_inner_product::<HalfVec>;
    cosine_distance => cosine_distance_impl::<Vector>;
    halfvec_cosine_distance => cosine_distance_impl::<HalfVec>;
    l1_distance => l1_distance_impl::<Vector>;
    halfvec_l1_distance => l1_distance_impl::<HalfVec>;
    vector_dims => dims::<Vector>;
    halfvec_vector_dims => dims::<HalfVec>;
    vector_norm => norm::<Vector>;
    halfvec_l2_norm => norm::<HalfVec>;
    l2_normalize => l2_normalize_impl::<Vector>;
    halfvec_l2_normalize => l2_normalize_impl::<HalfVec>;
    subvector => subvector_impl::<Vector>;
    halfvec_subvector => subvector_impl::<HalfVec>;
    vector_add => add::<Vector>;
    halfvec_add => add::<HalfVec>;
    vector_sub => sub::<Vector>;
    halfvec_sub => sub::<HalfVec>;
    vector_mul => mul::<Vector>;
    halfvec_mul => mul::<HalfVec>;
    vector_concat => concat::<Vector>;
    halfvec_concat => concat::<HalfVec>;
    vector_lt => compare_with::<Vector, LessThan>;
    halfvec_lt => compare_with::<HalfVec, LessThan>;
    vector_le => compare_with::<Vector, LessOrEqual>;
    halfvec_le => compare_with::<HalfVec, LessOrEqual>;
    vector_eq => compare_with::<Vector, Equal>;
    halfvec_eq => compare_with::<HalfVec, Equal>;
    vector_ne => compare_with::<Vector, NotEqual>;
    halfvec_ne => compare_with::<HalfVec, NotEqual>;
    vector_ge => compare_with::<Vector, GreaterOrEqual>;
    halfvec_ge => compare_with::<HalfVec, GreaterOrEqual>;
    vector_gt => compare_with::<Vector, GreaterThan>;
    halfvec_gt => compare_with::<HalfVec, GreaterThan>;
    vector_cmp => cmp::<Vector>;
    halfvec_cmp => cmp::<HalfVec>;
}

fn float8(value: f64) -> pg_sys::Datum {
    value.into_datum().expect("float8 is never null")
}

/// Both operands of a binary function, checked to have equal dimensions.
///
/// # Safety
/// Arguments 0 and 1 must be non-null values of type K.
unsafe fn operands<'a, K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> (&'a [K::Elem], &'a [K::Elem]) {
    // SAFETY: guaranteed by the caller.
    let (a, b) = unsafe { (elems::<K>(arg(fcinfo, 0)), elems::<K>(arg(fcinfo, 1))) };
    check_same_dimensions::<K>(a.len(), b.len());
    (a, b)
}

unsafe fn l2_distance_impl<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    float8(f64::from(K::l2_squared(a, b)).sqrt())
}

unsafe fn l2_squared_distance<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    float8(f64::from(K::l2_squared(a, b)))
}

unsafe fn inner_product_impl<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    float8(f64::from(K::dot(a, b)))
}

unsafe fn negative_inner_product<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    float8(-f64::from(K::dot(a, b)))
}

unsafe fn cosine_distance_impl<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    float8(K::dot_and_norms(a, b).cosine_distance_f64())
}

unsafe fn l1_distance_impl<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    float8(f64::from(K::l1(a, b)))
}

unsafe fn dims<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K) in SQL.
    let a = unsafe { elems::<K>(arg(fcinfo, 0)) };
    pg_sys::Datum::from(a.len() as i32)
}

unsafe fn norm<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K) in SQL.
    let a = unsafe { widened::<K>(arg(fcinfo, 0)) };
    float8(vector_math::norm(&a))
}

unsafe fn l2_normalize_impl<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K) in SQL.
    let a = unsafe { widened::<K>(arg(fcinfo, 0)) };
    match vector_math::l2_normalize(&a, K::ELEMENT) {
        Ok(unit) => new_datum_from_f32::<K>(&unit),
        Err(e) => arithmetic_error(e),
    }
}

unsafe fn subvector_impl<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, integer, integer) in SQL.
    let (a, start, count) = unsafe { (elems::<K>(arg(fcinfo, 0)), arg_i32(fcinfo, 1), arg_i32(fcinfo, 2)) };
    match vector_math::subvector_range(a.len(), start, count, K::NAME) {
        Ok(range) => new_datum::<K>(&a[range]),
        Err(e) => arithmetic_error(e),
    }
}

/// Applies an element-wise engine operation to two operands of type K, rounding each result to
/// K's precision: an infinite result is "value out of range: overflow", a product of non-zero
/// elements that rounds to zero "value out of range: underflow" (both 22003), as in pgvector.
unsafe fn elementwise<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo, op: Elementwise) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { operands::<K>(fcinfo) };
    let a: Vec<f32> = a.iter().map(|&e| K::to_f32(e)).collect();
    let b: Vec<f32> = b.iter().map(|&e| K::to_f32(e)).collect();
    match vector_math::elementwise(op, &a, &b, K::ELEMENT) {
        Ok(result) => new_datum_from_f32::<K>(&result),
        Err(e) => arithmetic_error(e),
    }
}

unsafe fn add<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    unsafe { elementwise::<K>(fcinfo, Elementwise::Add) }
}

unsafe fn sub<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    unsafe { elementwise::<K>(fcinfo, Elementwise::Sub) }
}

unsafe fn mul<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    unsafe { elementwise::<K>(fcinfo, Elementwise::Mul) }
}

unsafe fn concat<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { (elems::<K>(arg(fcinfo, 0)), elems::<K>(arg(fcinfo, 1))) };
    if a.len() + b.len() > MAX_DIMENSIONS {
        error(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{} cannot have more than {MAX_DIMENSIONS} dimensions", K::NAME),
        );
    }
    let joined: Vec<K::Elem> = a.iter().chain(b).copied().collect();
    new_datum::<K>(&joined)
}

/// Orders two values of type K (element-wise, then by dimension count).
unsafe fn ordering<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> Ordering {
    // SAFETY: declared (K, K) in SQL.
    let (a, b) = unsafe { (widened::<K>(arg(fcinfo, 0)), widened::<K>(arg(fcinfo, 1))) };
    vector_math::compare(&a, &b)
}

/// A comparison operator as a type, so one generic function serves all six.
trait Comparison {
    fn holds(ordering: Ordering) -> bool;
}
struct LessThan;
struct LessOrEqual;
struct Equal;
struct NotEqual;
struct GreaterOrEqual;
struct GreaterThan;
impl Comparison for LessThan {
    fn holds(o: Ordering) -> bool {
        o.is_lt()
    }
}
impl Comparison for LessOrEqual {
    fn holds(o: Ordering) -> bool {
        o.is_le()
    }
}
impl Comparison for Equal {
    fn holds(o: Ordering) -> bool {
        o.is_eq()
    }
}
impl Comparison for NotEqual {
    fn holds(o: Ordering) -> bool {
        o.is_ne()
    }
}
impl Comparison for GreaterOrEqual {
    fn holds(o: Ordering) -> bool {
        o.is_ge()
    }
}
impl Comparison for GreaterThan {
    fn holds(o: Ordering) -> bool {
        o.is_gt()
    }
}

unsafe fn compare_with<K: VecKind, C: Comparison>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    pg_sys::Datum::from(C::holds(unsafe { ordering::<K>(fcinfo) }))
}

unsafe fn cmp<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K, K) in SQL.
    pg_sys::Datum::from(unsafe { ordering::<K>(fcinfo) } as i32)
}
