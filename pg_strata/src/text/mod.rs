//! The `bm25` index access method: BM25 ranking of a `text` column, in the same runtime as the
//! vector index — shared-memory memtables (documents as span rows), the index service's flushes
//! and merges of [`strata_text::TextSegment`]s, deletion bitmaps, status pages and crash recovery.
//!
//! - [`options`]: `WITH (text_config, k1, b, memtable_slots)`;
//! - [`config`]: the text search configuration, resolved at CREATE INDEX and kept as its OID;
//! - [`tokens`]: `to_tsvector` output as documents;
//! - [`build`] / [`insert`]: CREATE INDEX and `aminsert`;
//! - [`sources`]: the segments and memtables a query reads, in one snapshot;
//! - [`scan`]: `ORDER BY body <@> query` best first;
//! - [`query`]: the `bm25query` type and the `<@>` operator's functions;
//! - [`binding`]: the planner hook that binds `body <@> 'query'` to the column's bm25 index.
//!
//! - [`kind`]: the bm25 kind of the access-method core (`crate::access`), which holds what the
//!   vector and bm25 access methods share: the build-chunk protocol, VACUUM, cost estimates,
//!   flushes, merges, recovery and standbys.

pub mod binding;
pub mod build;
pub mod config;
pub mod global;
pub mod insert;
pub mod kind;
pub mod options;
pub mod query;
pub mod scan;
pub mod sources;
pub mod tokens;

use pgrx::{pg_sys, PgSqlErrorCode};

use crate::fmgr::{error, v1_functions};

v1_functions! {
    strata_bm25_amhandler => amhandler;
    strata_bm25_support => support;
}

/// Support function 1 of the bm25 opclass (nothing to report; the function exists so that the
/// opclass has the one support function the access method declares).
unsafe fn support(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(0)
}

unsafe fn amhandler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    let routine = crate::access::routine_struct(options::amoptions);
    // SAFETY: `routine` was just allocated by routine_struct.
    let r = unsafe { &mut *routine };
    r.amcanmulticol = false;
    r.amsearcharray = false;
    r.ambuild = Some(build::ambuild);
    r.aminsert = Some(insert::aminsert);
    r.ambuildphasename = None;
    r.ambeginscan = Some(scan::ambeginscan);
    r.amrescan = Some(scan::amrescan);
    r.amgettuple = Some(scan::amgettuple);
    r.amendscan = Some(scan::amendscan);
    pg_sys::Datum::from(routine)
}

/// The OID of the text search configuration the open bm25 index `index` (of `handle`) tokenises
/// with: the one CREATE INDEX resolved and stored ([`config::of`]).
///
/// # Safety
/// `index` must be the open bm25 index of `handle`; on a backend's main thread in a transaction.
pub unsafe fn text_config_of(index: pg_sys::Relation, handle: &crate::access::state::IndexHandle) -> pg_sys::Oid {
    // SAFETY: this function's contract is `config::of`'s (bm25 AM callbacks, `prepare_for` after
    // `is_bm25`, recovery and the standby's passes over a text index pass their index and handle).
    unsafe { config::of(index, handle) }
}

/// The OID of the bm25 index named `name` (schema-qualified or on the search path); an error
/// when there is none or it is another kind of relation.
///
/// # Safety
/// Call on a backend's main thread inside a transaction.
pub unsafe fn index_by_name(name: &str) -> pg_sys::Oid {
    let Ok(name) = std::ffi::CString::new(name) else {
        error(PgSqlErrorCode::ERRCODE_INVALID_NAME, "an index name has no NUL bytes")
    };
    // SAFETY: called from `to_bm25query` on the backend's main thread inside a transaction, so catalog
    // lookups may run; RangeVarGetRelidExtended raises for a missing relation and takes AccessShareLock,
    // held to the transaction's end, so relation_open(NoLock) is safe and rd_rel is set.
    unsafe {
        let range = pg_sys::makeRangeVarFromNameList(crate::pg_compat::qualified_name_list(name.as_ptr()));
        let oid = pg_sys::RangeVarGetRelidExtended(
            range,
            pg_sys::AccessShareLock as pg_sys::LOCKMODE,
            0,
            None,
            std::ptr::null_mut(),
        );
        let relation = pg_sys::relation_open(oid, pg_sys::NoLock as pg_sys::LOCKMODE);
        let is_index = (*(*relation).rd_rel).relkind as u8 == pg_sys::RELKIND_INDEX;
        let bm25 = is_index && options::is_bm25(relation);
        pg_sys::relation_close(relation, pg_sys::NoLock as pg_sys::LOCKMODE);
        if !bm25 {
            error(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{}\" is not a bm25 index", name.to_string_lossy()),
            );
        }
        oid
    }
}

/// Raises an error when a document of `words` span-row words cannot fit in a memtable of
/// `handle`'s bm25 index.
pub fn check_span_fits(handle: &crate::access::state::IndexHandle, words: usize) {
    if let Err(e) = crate::access::state::memtable_layout(handle).check_span(words) {
        error(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("pg_strata: this row's lexemes do not fit in a memtable of the bm25 index: {e}; raise the index's memtable_slots"),
        );
    }
}

/// Refuses databases whose lexemes may not be UTF-8 (strata-text keeps lexemes as UTF-8).
pub fn check_encoding() {
    // SAFETY: reading the database encoding on a backend's main thread.
    let encoding = unsafe { pg_sys::GetDatabaseEncoding() };
    if encoding != pg_sys::pg_enc::PG_UTF8 as i32 && encoding != pg_sys::pg_enc::PG_SQL_ASCII as i32 {
        error(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "pg_strata: bm25 indexes need a database of encoding UTF8 (or SQL_ASCII)",
        );
    }
}
