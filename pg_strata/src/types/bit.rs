//! pgvector's functions over PostgreSQL's `bit` type: `binary_quantize(vector | halfvec)`,
//! `hamming_distance` (`<~>`) and `jaccard_distance` (`<%>`), computed by
//! [`strata_engine::bit_value`]. The functions here only read and write `VarBit` datums (varlena
//! header, `int32` bit length, the bits most significant first) and raise the engine's errors.

use pgrx::{pg_sys, IntoDatum, PgSqlErrorCode};
use strata_engine::bit_value::{self, BitString, Bits};
use strata_engine::vector_value::VectorError;

use super::{elems, HalfVec, OrRaise, Vector, VectorType};
use crate::fmgr::{arg, error, v1_functions};

/// Bytes before the bits of a `VarBit`: the varlena header and the bit length.
const VARBIT_HEADER_BYTES: usize = 8;

v1_functions! {
    binary_quantize => quantize::<Vector>;
    halfvec_binary_quantize => quantize::<HalfVec>;
    hamming_distance => distance, bit_value::hamming_distance;
    jaccard_distance => distance, bit_value::jaccard_distance;
}

/// Detoasts a `bit` / `bit varying` datum and borrows its bits.
///
/// # Safety
/// `datum` must be a non-null `bit` or `varbit` datum.
pub unsafe fn bits<'a>(datum: pg_sys::Datum) -> Bits<'a> {
    // SAFETY: the caller guarantees a VarBit; `pg_detoast_datum` returns it (or a palloc'd copy)
    // with a 4-byte header and int alignment, so the bit length at offset 4 is readable and the
    // bytes after it end at the varlena's size.
    let (len, bytes) = unsafe {
        let varlena = pg_sys::pg_detoast_datum(datum.cast_mut_ptr::<pg_sys::varlena>());
        let size = pgrx::varsize_4b(varlena);
        let len = varlena.cast::<u8>().add(4).cast::<i32>().read();
        let count = size.saturating_sub(VARBIT_HEADER_BYTES);
        (len, std::slice::from_raw_parts(varlena.cast::<u8>().add(VARBIT_HEADER_BYTES), count))
    };
    u32::try_from(len)
        .ok()
        .and_then(|len| Bits::new(len, bytes))
        .unwrap_or_else(|| error(PgSqlErrorCode::ERRCODE_DATA_CORRUPTED, "bit datum has an invalid layout"))
}

/// Allocates `bits` as a new `bit` datum in the current memory context.
fn new_bit_datum(bits: &BitString) -> pg_sys::Datum {
    let size = VARBIT_HEADER_BYTES + bits.bytes().len();
    // SAFETY: palloc0 returns `size` zeroed, maximally aligned bytes (or raises an error); we
    // write the varlena header, the bit length (at most 16000) and exactly `bytes().len()` bytes,
    // all inside the allocation. The padding bits of the last byte are zero, as PostgreSQL
    // requires (`BitString` keeps them zero).
    unsafe {
        let ptr = pg_sys::palloc0(size).cast::<u8>();
        pgrx::set_varsize_4b(ptr.cast(), size as i32);
        ptr.add(4).cast::<i32>().write(bits.len() as i32);
        std::ptr::copy_nonoverlapping(bits.bytes().as_ptr(), ptr.add(VARBIT_HEADER_BYTES), bits.bytes().len());
        pg_sys::Datum::from(ptr)
    }
}

/// `binary_quantize(K)` → `bit`: one bit per element, set when it is positive.
unsafe fn quantize<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: declared (K) in SQL.
    new_bit_datum(&bit_value::binary_quantize::<K>(unsafe { elems::<K>(arg(fcinfo, 0)) }))
}

/// `f(bit, bit)` → `double precision`, after the engine's length check.
unsafe fn distance(
    fcinfo: pg_sys::FunctionCallInfo,
    f: fn(Bits<'_>, Bits<'_>) -> Result<f64, VectorError>,
) -> pg_sys::Datum {
    // SAFETY: declared (bit, bit) in SQL.
    let (a, b) = unsafe { (bits(arg(fcinfo, 0)), bits(arg(fcinfo, 1))) };
    f(a, b).or_raise().into_datum().expect("float8 is never null")
}
