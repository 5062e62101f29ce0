//! Input/output: text in/out, typmod, binary send/recv and typmod coercion.

use std::ffi::CStr;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::vector_text::{self, ErrorClass};
use strata_engine::MAX_DIMENSIONS;

use super::{
    check_dimensions, check_element, check_typmod, elems, new_datum, new_datum_from_f32, HalfVec, VecKind, Vector,
};
use crate::fmgr::{arg, arg_i32, error, error_with_detail, v1_functions};

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

fn error_code(class: ErrorClass) -> PgSqlErrorCode {
    match class {
        ErrorClass::InvalidTextRepresentation => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        ErrorClass::DataException => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        ErrorClass::ProgramLimitExceeded => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        ErrorClass::NumericValueOutOfRange => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
    }
}

/// Copies `text` into a palloc'd NUL-terminated C string datum.
fn cstring_datum(text: &str) -> pg_sys::Datum {
    // SAFETY: palloc returns `len + 1` writable bytes (or raises); we copy `len` bytes and a NUL.
    unsafe {
        let ptr = pg_sys::palloc(text.len() + 1).cast::<u8>();
        std::ptr::copy_nonoverlapping(text.as_ptr(), ptr, text.len());
        ptr.add(text.len()).write(0);
        pg_sys::Datum::from(ptr)
    }
}

/// `K_in(cstring, oid, integer)`: parses the text format.
unsafe fn text_in<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a NUL-terminated cstring, argument 2 the typmod (declared so in SQL).
    let (input, typmod) = unsafe { (CStr::from_ptr(arg(fcinfo, 0).cast_mut_ptr()), arg_i32(fcinfo, 2)) };
    let text = input.to_string_lossy();
    let values = match vector_text::parse(&text, K::ELEMENT) {
        Ok(values) => values,
        Err(e) => {
            let message = e.message(K::NAME, &text);
            match e.detail(K::NAME) {
                Some(detail) => error_with_detail(error_code(e.class()), message, detail),
                None => error(error_code(e.class()), message),
            }
        }
    };
    check_typmod(typmod, values.len());
    new_datum_from_f32::<K>(&values)
}

/// `K_out(K)`: writes the text format.
unsafe fn text_out<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a non-null value of type K.
    let values = unsafe { elems::<K>(arg(fcinfo, 0)) };
    cstring_datum(&vector_text::format(values.iter().map(|&e| K::to_f32(e))))
}

/// `K_typmod_in(cstring[])`: `vector(384)` → 384.
unsafe fn typmod_in<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let mut count = 0;
    // SAFETY: argument 0 is a cstring[] array; ArrayGetIntegerTypmods validates its elements and
    // returns `count` integers.
    let typmods = unsafe {
        let array = pg_sys::pg_detoast_datum(arg(fcinfo, 0).cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        let ptr = pg_sys::ArrayGetIntegerTypmods(array, &raw mut count);
        std::slice::from_raw_parts(ptr, usize::try_from(count).unwrap_or(0))
    };
    let &[typmod] = typmods else {
        error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "invalid type modifier");
    };
    if typmod < 1 {
        error(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("dimensions for type {} must be at least 1", K::NAME),
        );
    }
    if typmod as usize > MAX_DIMENSIONS {
        error(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("dimensions for type {} cannot exceed {MAX_DIMENSIONS}", K::NAME),
        );
    }
    pg_sys::Datum::from(typmod)
}

/// `K_recv(internal, oid, integer)`: binary input (`u16 dims, u16 unused, elements`, network order).
unsafe fn binary_recv<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is the StringInfo message buffer, argument 2 the typmod; pq_getmsg*
    // functions bounds-check the message and raise an error when it is too short.
    unsafe {
        let buf = arg(fcinfo, 0).cast_mut_ptr::<pg_sys::StringInfoData>();
        let typmod = arg_i32(fcinfo, 2);
        let dims = pg_sys::pq_getmsgint(buf, 2) as usize;
        let unused = pg_sys::pq_getmsgint(buf, 2);
        check_dimensions::<K>(dims);
        check_typmod(typmod, dims);
        if unused != 0 {
            error(PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, format!("expected unused to be 0, not {unused}"));
        }
        let values: Vec<K::Elem> = (0..dims)
            .map(|_| {
                let elem = K::recv(buf);
                check_element::<K>(elem);
                elem
            })
            .collect();
        new_datum::<K>(&values)
    }
}

/// `K_send(K)`: binary output.
unsafe fn binary_send<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type K; `buf` is initialised by pq_begintypsend and only
    // used through the pq_send* API, which grows it as needed.
    unsafe {
        let values = elems::<K>(arg(fcinfo, 0));
        let mut buf = pg_sys::StringInfoData::default();
        pg_sys::pq_begintypsend(&raw mut buf);
        pg_sys::pq_sendint16(&raw mut buf, values.len() as u16);
        pg_sys::pq_sendint16(&raw mut buf, 0);
        for &value in values {
            let bits = K::send_bits(value);
            if K::SEND_BYTES == 4 {
                pg_sys::pq_sendint32(&raw mut buf, bits);
            } else {
                pg_sys::pq_sendint16(&raw mut buf, bits as u16);
            }
        }
        pg_sys::Datum::from(pg_sys::pq_endtypsend(&raw mut buf))
    }
}

/// `K(K, integer, boolean)`: applies a typmod (`'[1,2]'::vector(3)` fails).
unsafe fn coerce_typmod<K: VecKind>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a value of type K, argument 1 the target typmod.
    unsafe {
        let datum = arg(fcinfo, 0);
        check_typmod(arg_i32(fcinfo, 1), elems::<K>(datum).len());
        datum
    }
}
