//! # pg_strata
//!
//! The PostgreSQL extension. It adapts PostgreSQL to the pure-Rust engine (`strata-engine`) and
//! owns nothing algorithmic: every parser, kernel and piece of arithmetic lives in the engine crate
//! and is tested there; this crate turns datums into slices, engine errors into `ereport`s, and
//! declares the SQL surface (`sql/types.sql`).
//!
//! Invariant: no PostgreSQL function is called from a thread PostgreSQL did not create.

// Detoasted varlenas and palloc chunks are at least 4-byte (int) aligned, which is what the
// pointer casts to headers (`ArrayType`, `i16` dimension fields) need.
#![allow(clippy::cast_ptr_alignment)]

use pgrx::prelude::*;

mod absorber;
mod access;
mod db_workers;
mod explain;
mod faults;
mod fmgr;
mod gucs;
mod index;
mod maintenance;
mod memtable;
mod pg_compat;
mod service;
mod service_log;
mod settler;
mod shmem;
mod stats;
mod sweep;
mod text;
mod threads;
mod types;

::pgrx::pg_module_magic!();

// The SQL surface of the types is hand-written (pgvector-compatible names, typmods, casts,
// operators, aggregates and opclasses); the C entry points it names are in `types`.
::pgrx::extension_sql_file!("../sql/types.sql", name = "types", bootstrap);
// The access method and its operator classes.
::pgrx::extension_sql_file!("../sql/am.sql", name = "am", requires = ["types"]);
// The bm25 access method, the bm25query type and the <@> operator.
::pgrx::extension_sql_file!("../sql/bm25.sql", name = "bm25", requires = ["am"]);
// strata_hybrid: BM25 and vector index scans fused by reciprocal rank fusion.
::pgrx::extension_sql_file!("../sql/hybrid.sql", name = "hybrid", requires = ["bm25"]);

/// Called once when the library is loaded. Shared memory and the index service exist only when
/// the library is preloaded (`shared_preload_libraries = 'pg_strata'`); without that, the types
/// work and the index reports a clear error.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: reading a flag PostgreSQL sets while it loads shared_preload_libraries.
    let preloading = unsafe { pg_sys::process_shared_preload_libraries_in_progress };
    gucs::register(preloading);
    explain::install_hook();
    index::paths::install_hook();
    text::binding::install_hook();
    access::invalidation::register();
    index::options::register();
    text::options::register();
    faults::install();
    if preloading {
        shmem::install_hooks();
        service::register();
    }
}

/// Required by `cargo pgrx test`; pg_strata's extension tests run as SQL regression and client
/// tests against a real cluster (`cargo xtask test`), not as in-process `#[pg_test]`s.
#[cfg(test)]
pub mod pg_test {
    /// One-off initialisation for `cargo pgrx test` (none needed).
    pub fn setup(_options: Vec<&str>) {}

    /// postgresql.conf lines for `cargo pgrx test`.
    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'pg_strata'"]
    }
}
