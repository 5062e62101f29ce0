//! The `sparsevec` SQL type: V1 entry points over [`strata_engine::sparse_value`], which owns the
//! stored layout, every check (in pgvector's order, with its messages) and every computation.
//! The functions here only detoast and allocate datums and raise the engine's errors. The C
//! symbol names are pgvector's (`sparsevec_l2_distance`, `vector_to_sparsevec`, …), so that SQL
//! written against pgvector's catalog finds them.

use std::ffi::CStr;

use pgrx::{pg_sys, IntoDatum, PgSqlErrorCode};
use strata_engine::sparse_value::{self, binary, ops, text, SparseRef, SparseVec};
use strata_engine::vector_value::ops::{Comparison, DistanceFunction};

use super::casts::{array_datums, array_f32s};
use super::io::{advance, cstring, send_bytes, typmod_args, unread_message};
use super::{elems, new_datum, HalfVec, OrRaise, Vector, VectorType};
use crate::fmgr::{arg, arg_i32, error, v1_functions};

v1_functions! {
    sparsevec_in => text_in;
    sparsevec_out => text_out;
    sparsevec_typmod_in => typmod_in;
    sparsevec_recv => binary_recv;
    sparsevec_send => binary_send;
    sparsevec => coerce_typmod;
    vector_to_sparsevec => from_dense::<Vector>;
    halfvec_to_sparsevec => from_dense::<HalfVec>;
    sparsevec_to_vector => to_dense::<Vector>;
    sparsevec_to_halfvec => to_dense::<HalfVec>;
    array_to_sparsevec => from_array;
    sparsevec_l2_distance => distance, DistanceFunction::L2;
    sparsevec_l2_squared_distance => distance, DistanceFunction::L2Squared;
    sparsevec_inner_product => distance, DistanceFunction::InnerProduct;
    sparsevec_negative_inner_product => distance, DistanceFunction::NegativeInnerProduct;
    sparsevec_cosine_distance => distance, DistanceFunction::Cosine;
    sparsevec_l1_distance => distance, DistanceFunction::L1;
    sparsevec_l2_norm => norm;
    sparsevec_l2_normalize => l2_normalize;
    sparsevec_lt => compare_with, Comparison::Less;
    sparsevec_le => compare_with, Comparison::LessOrEqual;
    sparsevec_eq => compare_with, Comparison::Equal;
    sparsevec_ne => compare_with, Comparison::NotEqual;
    sparsevec_ge => compare_with, Comparison::GreaterOrEqual;
    sparsevec_gt => compare_with, Comparison::Greater;
    sparsevec_cmp => cmp;
}

/// Detoasts a `sparsevec` datum and borrows it (indices and values are not copied).
///
/// The value lives in the current memory context (at least until the function returns).
///
/// # Safety
/// `datum` must be a non-null datum of type `sparsevec`.
pub unsafe fn sparse<'a>(datum: pg_sys::Datum) -> SparseRef<'a> {
    // SAFETY: the caller guarantees a sparsevec varlena; `pg_detoast_datum` returns it (or a
    // palloc'd copy) with a 4-byte header and int alignment, and its size covers the whole datum.
    let bytes = unsafe {
        let varlena = pg_sys::pg_detoast_datum(datum.cast_mut_ptr::<pg_sys::varlena>());
        std::slice::from_raw_parts(varlena.cast::<u8>(), pgrx::varsize_4b(varlena))
    };
    SparseRef::read_stored(bytes)
        .unwrap_or_else(|| error(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "sparsevec datum has an invalid layout"))
}

/// Allocates `value` as a new `sparsevec` datum in the current memory context.
pub fn new_sparse_datum(value: SparseRef<'_>) -> pg_sys::Datum {
    let size = sparse_value::stored_size(value.nnz());
    // SAFETY: palloc0 returns `size` zeroed, maximally aligned bytes (or raises an error); the
    // varlena header is set to `size` (at most 16 + 8 · 16000 bytes) and `write_stored` fills
    // exactly the rest of the allocation.
    unsafe {
        let ptr = pg_sys::palloc0(size).cast::<u8>();
        pgrx::set_varsize_4b(ptr.cast(), size as i32);
        value.write_stored(std::slice::from_raw_parts_mut(ptr, size));
        pg_sys::Datum::from(ptr)
    }
}

fn owned(value: &SparseVec) -> pg_sys::Datum {
    new_sparse_datum(value.as_ref())
}

/// `sparsevec_in(cstring, oid, integer)`: parses `{1:1.5,3:2}/5`.
unsafe fn text_in(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a NUL-terminated cstring, argument 2 the typmod (declared so in SQL).
    let (input, typmod) = unsafe { (CStr::from_ptr(arg(fcinfo, 0).cast_mut_ptr()), arg_i32(fcinfo, 2)) };
    owned(&text::parse(&input.to_string_lossy(), typmod).or_raise())
}

/// `sparsevec_out(sparsevec)`: writes the text format.
unsafe fn text_out(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a non-null sparsevec.
    cstring(&text::format(unsafe { sparse(arg(fcinfo, 0)) }))
}

/// `sparsevec_typmod_in(cstring[])`: `sparsevec(1000)` → 1000.
unsafe fn typmod_in(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is the cstring[] of a typmod_in function.
    pg_sys::Datum::from(sparse_value::typmod_in(unsafe { typmod_args(fcinfo) }).or_raise())
}

/// `sparsevec_recv(internal, oid, integer)`: binary input, decoded by [`binary::decode`] from the
/// unread rest of the message, which then advances past the bytes it used.
unsafe fn binary_recv(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is the StringInfo message buffer, argument 2 the typmod; `decode`
    // reports at most the bytes of the unread rest as used.
    unsafe {
        let (value, used) = binary::decode(unread_message(fcinfo), arg_i32(fcinfo, 2)).or_raise();
        advance(fcinfo, used);
        owned(&value)
    }
}

/// `sparsevec_send(sparsevec)`: binary output, as [`binary::encode`] writes it.
unsafe fn binary_send(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a non-null sparsevec.
    send_bytes(&binary::encode(unsafe { sparse(arg(fcinfo, 0)) }))
}

/// `sparsevec(sparsevec, integer, boolean)`: applies a typmod (`'{}/3'::sparsevec(2)` fails).
unsafe fn coerce_typmod(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a non-null sparsevec, argument 1 the target typmod.
    unsafe {
        let datum = arg(fcinfo, 0);
        sparse_value::apply_typmod(sparse(datum), arg_i32(fcinfo, 1)).or_raise();
        datum
    }
}

/// `vector_to_sparsevec` / `halfvec_to_sparsevec(K, integer, boolean)`.
unsafe fn from_dense<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type K, argument 1 the target typmod.
    let (values, typmod) = unsafe { (elems::<K>(arg(fcinfo, 0)), arg_i32(fcinfo, 1)) };
    owned(&sparse_value::from_dense::<K>(values, typmod).or_raise())
}

/// `sparsevec_to_vector` / `sparsevec_to_halfvec(sparsevec, integer, boolean)`.
unsafe fn to_dense<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a non-null sparsevec, argument 1 the target typmod.
    let (value, typmod) = unsafe { (sparse(arg(fcinfo, 0)), arg_i32(fcinfo, 1)) };
    new_datum::<K>(&sparse_value::to_dense::<K>(value, typmod).or_raise())
}

/// `array_to_sparsevec(integer[] | real[] | double precision[] | numeric[], integer, boolean)`, in
/// pgvector's order: 1-D, no nulls, dimensions, typmod, element type, then the non-zero count and
/// the values' finiteness ([`sparse_value::from_array`]).
unsafe fn from_array(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is an array (declared so for each cast), argument 1 the typmod.
    let ((element_type, datums), typmod) = unsafe { (array_datums(arg(fcinfo, 0)), arg_i32(fcinfo, 1)) };
    sparse_value::check_array(datums.len(), typmod).or_raise();
    // SAFETY: `datums` comes from `array_datums`.
    let values = unsafe { array_f32s(element_type, datums) };
    owned(&sparse_value::from_array(&values, typmod).or_raise())
}

/// Both arguments of a binary function.
///
/// # Safety
/// Arguments 0 and 1 must be non-null sparsevec values.
unsafe fn operands<'a>(fcinfo: pg_sys::FunctionCallInfo) -> (SparseRef<'a>, SparseRef<'a>) {
    // SAFETY: every caller is a STRICT function declared (sparsevec, sparsevec) in sql/types.sql,
    // so both argument slots exist and hold non-null sparsevec datums, as `sparse` requires.
    unsafe { (sparse(arg(fcinfo, 0)), sparse(arg(fcinfo, 1))) }
}

fn float8(value: f64) -> pg_sys::Datum {
    value.into_datum().expect("float8 is never null")
}

/// `f(sparsevec, sparsevec)` → `double precision`.
unsafe fn distance(fcinfo: pg_sys::FunctionCallInfo, f: DistanceFunction) -> pg_sys::Datum {
    // SAFETY: declared (sparsevec, sparsevec) in SQL.
    let (a, b) = unsafe { operands(fcinfo) };
    float8(ops::distance(f, a, b).or_raise())
}

/// `l2_norm(sparsevec)`.
unsafe fn norm(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (sparsevec) in SQL.
    float8(ops::norm(unsafe { sparse(arg(fcinfo, 0)) }))
}

/// `l2_normalize(sparsevec)`.
unsafe fn l2_normalize(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (sparsevec) in SQL.
    owned(&ops::l2_normalize(unsafe { sparse(arg(fcinfo, 0)) }).or_raise())
}

/// The btree operators `<`, `<=`, `=`, `<>`, `>=`, `>`.
unsafe fn compare_with(fcinfo: pg_sys::FunctionCallInfo, op: Comparison) -> pg_sys::Datum {
    // SAFETY: declared (sparsevec, sparsevec) in SQL.
    let (a, b) = unsafe { operands(fcinfo) };
    pg_sys::Datum::from(op.holds(ops::compare(a, b)))
}

/// The btree support function `sparsevec_cmp`: -1, 0 or 1.
unsafe fn cmp(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (sparsevec, sparsevec) in SQL.
    let (a, b) = unsafe { operands(fcinfo) };
    pg_sys::Datum::from(ops::compare(a, b) as i32)
}
