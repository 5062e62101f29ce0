//! Input/output: text in/out, typmod, binary send/recv and typmod coercion.

use std::ffi::CStr;

use pgrx::pg_sys;
use strata_engine::vector_value::{self, binary};

use super::{elems, new_datum, HalfVec, OrRaise, Vector, VectorType};
use crate::fmgr::{arg, arg_i32, v1_functions};

v1_functions! {
    vector_in => text_in::<Vector>;
    halfvec_in => text_in::<HalfVec>;
    vector_out => text_out::<Vector>;
    halfvec_out => text_out::<HalfVec>;
    vector_typmod_in => typmod_in::<Vector>;
    halfvec_typmod_in => typmod_in::<HalfVec>;
    vector_recv => binary_recv::<Vector>;
    halfvec_recv => binary_recv::<HalfVec>;
    vector_send => binary_send::<Vector>;
    halfvec_send => binary_send::<HalfVec>;
    vector => coerce_typmod::<Vector>;
    halfvec => coerce_typmod::<HalfVec>;
}

/// `K_in(cstring, oid, integer)`: parses the text format.
unsafe fn text_in<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a NUL-terminated cstring, argument 2 the typmod (declared so in SQL).
    let (input, typmod) = unsafe { (CStr::from_ptr(arg(fcinfo, 0).cast_mut_ptr()), arg_i32(fcinfo, 2)) };
    new_datum::<K>(&vector_value::parse_text::<K>(&input.to_string_lossy(), typmod).or_raise())
}

/// `K_out(K)`: writes the text format.
unsafe fn text_out<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a non-null value of type K.
    cstring(&vector_value::format_text::<K>(unsafe { elems::<K>(arg(fcinfo, 0)) }))
}

/// `K_typmod_in(cstring[])`: `vector(384)` → 384.
unsafe fn typmod_in<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is the cstring[] of a typmod_in function.
    let typmods = unsafe { typmod_args(fcinfo) };
    pg_sys::Datum::from(vector_value::typmod_in::<K>(typmods).or_raise())
}

/// The integers of a typmod_in function's `cstring[]` argument (`vector(3)` → `[3]`); PostgreSQL's
/// `ArrayGetIntegerTypmods` raises its own errors for elements that are not integers.
///
/// # Safety
/// Argument 0 of `fcinfo` must be a non-null `cstring[]`.
pub(super) unsafe fn typmod_args<'a>(fcinfo: pg_sys::FunctionCallInfo) -> &'a [i32] {
    let mut count = 0;
    // SAFETY: argument 0 is a non-null cstring[] (the STRICT typmod_in functions calling this are
    // declared so); ArrayGetIntegerTypmods validates its elements and returns `count` palloc'd ints.
    unsafe {
        let array = pg_sys::pg_detoast_datum(arg(fcinfo, 0).cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        let ptr = pg_sys::ArrayGetIntegerTypmods(array, &raw mut count);
        std::slice::from_raw_parts(ptr, usize::try_from(count).unwrap_or(0))
    }
}

/// The unread rest of a recv function's message buffer (argument 0).
///
/// # Safety
/// Argument 0 of `fcinfo` must be the `StringInfo` of a recv function; the slice is valid until
/// the cursor is moved with [`advance`].
pub(super) unsafe fn unread_message<'a>(fcinfo: pg_sys::FunctionCallInfo) -> &'a [u8] {
    // SAFETY: argument 0 of a recv function is the message's StringInfo (declared `internal` and
    // filled by PostgreSQL); `data` holds `len` bytes of which the first `cursor` were read, so the
    // slice covers exactly the unread rest.
    unsafe {
        let buf = arg(fcinfo, 0).cast_mut_ptr::<pg_sys::StringInfoData>();
        let unread = usize::try_from((*buf).len - (*buf).cursor).unwrap_or(0);
        std::slice::from_raw_parts((*buf).data.add((*buf).cursor as usize).cast::<u8>(), unread)
    }
}

/// Moves a recv function's message cursor past `used` bytes.
///
/// # Safety
/// As [`unread_message`]; `used` is at most the length of the slice it returned.
pub(super) unsafe fn advance(fcinfo: pg_sys::FunctionCallInfo, used: usize) {
    // SAFETY: argument 0 is the recv function's StringInfo (as for `unread_message`), and `used` is
    // at most the unread length `decode` was given, so the cursor stays within `len`.
    unsafe {
        let buf = arg(fcinfo, 0).cast_mut_ptr::<pg_sys::StringInfoData>();
        (*buf).cursor += used as i32;
    }
}

/// A `bytea` datum holding `message` (the result of a send function).
pub(super) fn send_bytes(message: &[u8]) -> pg_sys::Datum {
    // SAFETY: `buf` is initialised by pq_begintypsend and only used through the pq_send* API,
    // which copies `message.len()` bytes and grows it as needed.
    unsafe {
        let mut buf = pg_sys::StringInfoData::default();
        pg_sys::pq_begintypsend(&raw mut buf);
        pg_sys::pq_sendbytes(&raw mut buf, message.as_ptr().cast(), message.len() as i32);
        pg_sys::Datum::from(pg_sys::pq_endtypsend(&raw mut buf))
    }
}

/// A palloc'd, NUL-terminated C string datum holding `text` (the result of an output function).
pub(super) fn cstring(text: &str) -> pg_sys::Datum {
    // SAFETY: pnstrdup copies the `len` bytes of the text (which holds no NUL) into a palloc'd,
    // NUL-terminated C string.
    pg_sys::Datum::from(unsafe { pg_sys::pnstrdup(text.as_ptr().cast(), text.len()) })
}

/// `K_recv(internal, oid, integer)`: binary input, decoded by [`binary::decode`] from the unread
/// rest of the message, which then advances past the bytes it used.
unsafe fn binary_recv<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is the StringInfo message buffer, argument 2 the typmod; `decode`
    // reports at most the bytes of the unread rest as used.
    unsafe {
        let (values, used) = binary::decode::<K>(unread_message(fcinfo), arg_i32(fcinfo, 2)).or_raise();
        advance(fcinfo, used);
        new_datum::<K>(&values)
    }
}

/// `K_send(K)`: binary output, as [`binary::encode`] writes it.
unsafe fn binary_send<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type K.
    send_bytes(&binary::encode::<K>(unsafe { elems::<K>(arg(fcinfo, 0)) }))
}

/// `K(K, integer, boolean)`: applies a typmod (`'[1,2]'::vector(3)` fails).
unsafe fn coerce_typmod<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type K, argument 1 the target typmod.
    unsafe {
        let datum = arg(fcinfo, 0);
        vector_value::check_typmod(arg_i32(fcinfo, 1), elems::<K>(datum).len()).or_raise();
        datum
    }
}
