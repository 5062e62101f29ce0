//! The text search configuration a bm25 index tokenises with: resolved once, at CREATE INDEX,
//! and kept as its OID.
//!
//! The `text_config` option names a configuration; a name is resolved through the `search_path`
//! in effect, which differs between sessions, the absorber, recovery and standbys. So the build
//! resolves it once ([`at_build`]) and stores the OID in the index's metadata status page (WAL
//! logged, so standbys, backups and crash recovery read the same), from which the index's shared
//! directory slot takes it when the index is opened; every use reads it there ([`of`]).
//!
//! The index also depends on the configuration in `pg_depend` (a built-in one excepted: it is
//! pinned), as an expression index on `to_tsvector('cfg', …)` does: dropping the configuration
//! needs CASCADE, which drops the index. REINDEX keeps the configuration that dependency names;
//! a built-in configuration's name is resolved again (pg_catalog is searched first unless the
//! search path names it later).

use pgrx::spi::{Spi, SpiError};
use pgrx::{pg_sys, PgSqlErrorCode};

use crate::access::state::IndexHandle;
use crate::fmgr::error;

/// `TSConfigRelationId`: the OID of catalog `pg_ts_config` (catalog/pg_ts_config.h; pgrx does not
/// bind it).
const TS_CONFIG_RELATION_ID: u32 = 3602;

/// The OID of the configuration `handle`'s bm25 index (relation `index`) tokenises with; raises
/// an error when that configuration no longer exists.
///
/// # Safety
/// `index` must be the open bm25 index of `handle`, on a backend's main thread inside a
/// transaction.
pub unsafe fn of(index: pg_sys::Relation, handle: &IndexHandle) -> pg_sys::Oid {
    let stored = handle.shared().text_config.load(std::sync::atomic::Ordering::Acquire);
    if stored == 0 {
        // An index built before the configuration was stored: by name, as it always was.
        // SAFETY: `index` is an open bm25 index (this function's contract), so rd_options is its
        // StoredOptions; callers run in a transaction (catalog reads).
        return unsafe { super::tokens::resolve_config(super::options::of(index).text_config()) };
    }
    let oid = pg_sys::Oid::from(stored);
    // SAFETY: a syscache probe by OID on the backend's main thread inside a transaction.
    let exists = unsafe {
        pg_sys::SearchSysCacheExists(
            pg_sys::SysCacheIdentifier::TSCONFIGOID as i32,
            pg_sys::Datum::from(oid),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        )
    };
    if !exists {
        // SAFETY: `index` is an open relation (this function's contract).
        let name = unsafe { crate::access::relation_name(index) };
        error(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!(
                "pg_strata: the text search configuration (OID {stored}) that bm25 index \"{name}\" was built \
                 with no longer exists; REINDEX the index"
            ),
        );
    }
    oid
}

/// The configuration bm25 index `index` is being built with: the one its `pg_depend` entry names
/// (a REINDEX), else its `text_config` option resolved now, through the current search path,
/// and recorded as a dependency of the index.
///
/// # Safety
/// `index` must be the bm25 index `ambuild` is building, on the backend's main thread.
pub unsafe fn at_build(index: pg_sys::Relation) -> pg_sys::Oid {
    // SAFETY: `index` is an open relation (this function's contract).
    let index_oid = unsafe { (*index).rd_id };
    if let Some(recorded) = recorded(index_oid) {
        return recorded;
    }
    // SAFETY: `index` is an open bm25 index (this function's contract), so rd_options is its
    // StoredOptions; ambuild runs in a transaction.
    let oid = unsafe { super::tokens::resolve_config(super::options::of(index).text_config()) };
    let depender = pg_sys::ObjectAddress { classId: pg_sys::RelationRelationId, objectId: index_oid, objectSubId: 0 };
    let referenced =
        pg_sys::ObjectAddress { classId: pg_sys::Oid::from(TS_CONFIG_RELATION_ID), objectId: oid, objectSubId: 0 };
    // SAFETY: both addresses name existing objects (the index being built, the configuration just
    // resolved); PostgreSQL skips a pinned (built-in) configuration.
    unsafe {
        pg_sys::recordDependencyOn(
            &raw const depender,
            &raw const referenced,
            pg_sys::DependencyType::DEPENDENCY_NORMAL,
        );
    }
    oid
}

/// The configuration OID a bm25 index tokenises with, at its first use since the server started:
/// `stored` (its status pages' OID, 0 for a vector index), unless the pages were written by
/// another cluster.
///
/// pg_upgrade copies an index's status pages as they are, but configuration OIDs are not kept
/// across clusters: the new cluster's CREATE INDEX (pg_upgrade's schema restore) recorded the
/// dependency on the configuration under its new OID, and a built-in configuration other than
/// `simple` gets its OID at initdb. So the catalog decides: the `pg_depend` entry when there is
/// one (in the cluster that built the index it holds `stored` itself), else the built-in
/// configuration of the option's name in pg_catalog. Standbys and restored backups share the
/// primary's catalog, and so the same answer.
///
/// # Safety
/// `index` must be an open bm25 index, on a backend's main thread inside a transaction.
pub unsafe fn at_open(index: pg_sys::Relation, stored: u32) -> u32 {
    if stored == 0 {
        return 0;
    }
    // SAFETY: `index` is open (this function's contract).
    let index_oid = unsafe { (*index).rd_id };
    let expected = recorded(index_oid).or_else(|| {
        // SAFETY: `index` is an open bm25 index (this function's contract), so rd_options is its
        // StoredOptions.
        let options = unsafe { super::options::of(index) };
        let name = options.text_config();
        let unqualified = name.rsplit('.').next().unwrap_or(name).trim_matches('"').to_owned();
        let builtin = std::ffi::CString::new(format!("pg_catalog.\"{unqualified}\"")).ok()?;
        // SAFETY: a catalog lookup inside a transaction; missing_ok, so an unknown name is InvalidOid.
        let oid = unsafe { pg_sys::get_ts_config_oid(crate::pg_compat::qualified_name_list(builtin.as_ptr()), true) };
        (oid != pg_sys::InvalidOid).then_some(oid)
    });
    match expected {
        Some(oid) if oid.to_u32() != stored => {
            pgrx::log!(
                "pg_strata: bm25 index {} tokenises with text search configuration {} (its status pages name OID {stored}, from the cluster it was upgraded from)",
                index_oid.to_u32(),
                oid.to_u32()
            );
            oid.to_u32()
        }
        _ => stored,
    }
}

/// The text search configuration index `index_oid` depends on, if any.
fn recorded(index_oid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    const QUERY: &str = "SELECT d.refobjid FROM pg_catalog.pg_depend d \
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
           AND d.objid OPERATOR(pg_catalog.=) $1 \
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_ts_config'::pg_catalog.regclass \
           AND d.deptype OPERATOR(pg_catalog.=) 'n'::pg_catalog.\"char\" \
         ORDER BY d.refobjid LIMIT 1";
    // Read-only (`select`): standbys open indexes too, and may not assign a transaction id.
    match Spi::connect(|client| client.select(QUERY, Some(1), &[index_oid.into()])?.first().get_one::<pg_sys::Oid>()) {
        Ok(oid) => oid,
        // No row: no dependency recorded.
        Err(SpiError::InvalidPosition) => None,
        Err(e) => error(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("pg_strata: reading pg_depend: {e}")),
    }
}
