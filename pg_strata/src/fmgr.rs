//! The PostgreSQL function-manager ("V1 calling convention") glue for hand-declared SQL functions.

use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;

/// Declares PostgreSQL V1 functions. Each `name => body;` becomes an exported
/// `name(FunctionCallInfo) -> Datum` guarded by `#[pg_guard]` (so Rust panics and `ereport`s unwind
/// correctly), plus the `pg_finfo_name` record PostgreSQL looks up with `dlsym`. `body` is an
/// `unsafe fn(FunctionCallInfo) -> Datum`; the SQL declaration in `sql/types.sql` must match the
/// arguments it reads. `name => body, extra…;` calls `body(fcinfo, extra…)` instead, so that one
/// generic body can serve several functions that differ in a value (a distance, an operator).
macro_rules! v1_functions {
    ($($name:ident => $body:expr $(, $extra:expr)*;)*) => {
        $(
            ::paste::paste! {
                #[unsafe(no_mangle)]
                #[doc(hidden)]
                pub extern "C" fn [<pg_finfo_ $name>]() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
                    const V1: ::pgrx::pg_sys::Pg_finfo_record = ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
                    &V1
                }
            }

            #[::pgrx::pg_guard]
            #[unsafe(no_mangle)]
            #[doc(hidden)]
            pub unsafe extern "C-unwind" fn $name(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
                // SAFETY: PostgreSQL calls this entry point with a valid `fcinfo` whose arguments
                // have the types declared for it in sql/types.sql, which is what `$body` reads.
                unsafe { ($body)(fcinfo $(, $extra)*) }
            }
        )*
    };
}
pub(crate) use v1_functions;

/// The raw datum of argument `n`.
///
/// # Safety
/// `fcinfo` must be a valid call frame with at least `n + 1` arguments.
pub unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> pg_sys::Datum {
    // SAFETY: guaranteed by the caller.
    unsafe { pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n) }
}

/// Argument `n` as an `int4`.
///
/// # Safety
/// As [`arg`]; the argument must be declared `integer`.
pub unsafe fn arg_i32(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> i32 {
    // SAFETY: guaranteed by the caller; int4 datums carry the value in the low 32 bits.
    unsafe { arg(fcinfo, n) }.value() as i32
}

/// Raises an SQL error (never returns).
pub fn error(code: PgSqlErrorCode, message: impl Into<String>) -> ! {
    pgrx::ereport!(ERROR, code, message.into());
}

/// Raises an SQL error with a DETAIL line (never returns).
pub fn error_with_detail(code: PgSqlErrorCode, message: impl Into<String>, detail: impl Into<String>) -> ! {
    pgrx::ereport!(ERROR, code, message.into(), detail.into());
}
