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
    // SAFETY: `fcinfo` is the live call frame PostgreSQL passed to a `v1_functions!` entry point,
    // whose SQL declaration gives it at least `n + 1` arguments, so `args[n]` is an initialised slot.
    unsafe { pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, n) }
}

/// Argument `n` as an `int4`.
///
/// # Safety
/// As [`arg`]; the argument must be declared `integer`.
pub unsafe fn arg_i32(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> i32 {
    // SAFETY: `fcinfo` has argument `n` and it is declared `integer` in SQL (this function's
    // contract), so reading its slot is valid; int4 datums carry the value in the low 32 bits.
    unsafe { arg(fcinfo, n) }.value() as i32
}

/// Whether this server is a standby (or still replaying WAL).
pub fn in_recovery() -> bool {
    // SAFETY: a plain query of the startup process's state.
    unsafe { pg_sys::RecoveryInProgress() }
}

/// Raises an SQL error (never returns).
pub fn error(code: PgSqlErrorCode, message: impl Into<String>) -> ! {
    pgrx::ereport!(ERROR, code, message.into());
}

/// Raises an SQL error with a DETAIL line (never returns).
pub fn error_with_detail(code: PgSqlErrorCode, message: impl Into<String>, detail: impl Into<String>) -> ! {
    pgrx::ereport!(ERROR, code, message.into(), detail.into());
}

/// Runs `work` in an internal subtransaction. An error it raises is caught: the subtransaction is
/// rolled back (which releases the locks, buffers and relations taken in it) and the error's
/// message returned. The caller's memory context and resource owner are restored either way.
/// Call only on the main thread of a process inside a transaction.
pub fn in_subtransaction(work: impl FnOnce() + std::panic::UnwindSafe) -> Result<(), String> {
    // SAFETY: PL/pgSQL's exception-block protocol, on the process's main thread inside a
    // transaction: remember the memory context and resource owner, begin the subtransaction,
    // and keep allocating in the caller's context.
    let (context, owner) = unsafe {
        let saved = (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner);
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(saved.0);
        saved
    };
    // pgrx turns a PostgreSQL error into an unwinding Rust panic (its error state flushed), so
    // the Rust values of the pass are dropped on the way out, as on a normal return.
    let outcome = pgrx::PgTryBuilder::new(|| {
        work();
        Ok(())
    })
    .catch_others(|caught| Err(message_of(&caught)))
    .execute();
    // SAFETY: ends the subtransaction begun above (no other one was begun inside it that is
    // still open: `work` leaves none), then restores what was saved.
    unsafe {
        match outcome {
            Ok(()) => pg_sys::ReleaseCurrentSubTransaction(),
            Err(_) => pg_sys::RollbackAndReleaseCurrentSubTransaction(),
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
    }
    outcome
}

/// The message of a caught error.
fn message_of(caught: &pg_sys::panic::CaughtError) -> String {
    match caught {
        pg_sys::panic::CaughtError::PostgresError(report) | pg_sys::panic::CaughtError::ErrorReport(report) => {
            report.message().to_owned()
        }
        pg_sys::panic::CaughtError::RustPanic { ereport, .. } => ereport.message().to_owned(),
    }
}
