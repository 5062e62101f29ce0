//! The `strata` index access method: PostgreSQL's `IndexAmRoutine` over memtables and segments.
//!
//! - [`build`]: `CREATE INDEX` / `REINDEX` — scans the heap and writes segments directly;
//! - [`insert`]: `aminsert` — appends to the index's memtable in shared memory;
//! - [`scan`]: ordered scans that widen while the executor keeps asking;
//! - [`vacuum`]: deletion bits in memtables, deletion bitmaps for segments (fsynced);
//! - [`cost`]: the planner's cost estimate;
//! - [`publish`]: writing a segment file and publishing it in the manifest;
//! - [`pgstat`]: the scans' count in `pg_stat_user_indexes.idx_scan`.

pub mod build;
pub mod cache_owners;
pub mod cost;
pub mod filters;
pub mod heap;
pub mod insert;
pub mod invalidation;
pub mod keys;
pub mod opening;
pub mod options;
pub mod paths;
pub mod pgstat;
pub mod publish;
pub mod recovery;
pub mod scan;
pub mod segments;
pub mod standby;
pub mod state;
pub mod status;
pub mod vacuum;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_engine::metric::Metric;
use strata_engine::store::ColumnType;
use strata_lsm::manifest::IndexConfig;
use strata_lsm::options::{opclass_code, OpclassRole};

use crate::fmgr::{error, v1_functions};

v1_functions! {
    strata_amhandler => amhandler;
    strata_hnsw_amhandler => hnsw_amhandler;
    strata_ivfflat_amhandler => ivfflat_amhandler;
    strata_vector_l2_support => support::<{ opclass_code(Metric::L2, ColumnType::Vector) }>;
    strata_vector_ip_support => support::<{ opclass_code(Metric::InnerProduct, ColumnType::Vector) }>;
    strata_vector_cosine_support => support::<{ opclass_code(Metric::Cosine, ColumnType::Vector) }>;
    strata_halfvec_l2_support => support::<{ opclass_code(Metric::L2, ColumnType::Halfvec) }>;
    strata_halfvec_ip_support => support::<{ opclass_code(Metric::InnerProduct, ColumnType::Halfvec) }>;
    strata_halfvec_cosine_support => support::<{ opclass_code(Metric::Cosine, ColumnType::Halfvec) }>;
    strata_vector_l1_support => support::<{ opclass_code(Metric::L1, ColumnType::Vector) }>;
    strata_halfvec_l1_support => support::<{ opclass_code(Metric::L1, ColumnType::Halfvec) }>;
    strata_bit_hamming_support => support::<{ opclass_code(Metric::Hamming, ColumnType::Bit) }>;
    strata_bit_jaccard_support => support::<{ opclass_code(Metric::Jaccard, ColumnType::Bit) }>;
    strata_sparsevec_l2_support => support::<{ opclass_code(Metric::L2, ColumnType::Sparsevec) }>;
    strata_sparsevec_ip_support => support::<{ opclass_code(Metric::InnerProduct, ColumnType::Sparsevec) }>;
    strata_sparsevec_cosine_support => support::<{ opclass_code(Metric::Cosine, ColumnType::Sparsevec) }>;
    strata_sparsevec_l1_support => support::<{ opclass_code(Metric::L1, ColumnType::Sparsevec) }>;
    strata_filter_support => filters::support;
    strata_filter_marker => filters::marker;
}

/// Support function 1 of every strata opclass: returns its [`opclass_code`].
unsafe fn support<const CODE: i32>(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(CODE)
}

unsafe fn amhandler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    routine(options::amoptions)
}

/// The handler of `USING hnsw` (companion extension `pg_strata_pgvector`): strata's routine whose
/// options default to kind `hnsw`.
unsafe fn hnsw_amhandler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    routine(options::hnsw_amoptions)
}

/// The handler of `USING ivfflat` (companion extension `pg_strata_pgvector`): strata's routine
/// whose options default to kind `ivf`.
unsafe fn ivfflat_amhandler(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    routine(options::ivfflat_amoptions)
}

/// Whether an open index belongs to one of pg_strata's access methods (`strata`, the
/// companion's `hnsw` / `ivfflat`, or `bm25`; pgvector's own `hnsw` is not).
///
/// # Safety
/// `index` must be a valid, open index relation.
pub unsafe fn is_strata_index(index: pg_sys::Relation) -> bool {
    // SAFETY: `index` is an open index relation (this function's contract: the settler and stats
    // functions open it by OID first), so `*index` is valid; `flavor_of`/`is_bm25` read rd_indam only
    // after the null check short-circuits.
    unsafe {
        !(*index).rd_indam.is_null() && (options::flavor_of(index).is_some() || crate::text::options::is_bm25(index))
    }
}

/// Opens relation `oid` with AccessShareLock, runs `work` on it and closes it; does nothing when
/// the relation is gone (dropped since the caller found it). Call inside a (sub)transaction, whose
/// end releases the lock and the reference also when `work` raises an error.
pub fn with_index_by_oid(oid: pg_sys::Oid, work: impl FnOnce(pg_sys::Relation)) {
    // SAFETY: opening a relation by OID on the backend's main thread inside a transaction;
    // try_relation_open returns NULL for a relation that no longer exists.
    let index = unsafe { pg_sys::try_relation_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    if index.is_null() {
        return;
    }
    work(index);
    // SAFETY: closing what was opened above.
    unsafe { pg_sys::relation_close(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
}

/// strata's `IndexAmRoutine` with `amoptions`.
fn routine(amoptions: options::AmOptions) -> pg_sys::Datum {
    pg_sys::Datum::from(routine_struct(amoptions))
}

/// strata's `IndexAmRoutine` with `amoptions`, freshly palloc'd (the bm25 access method changes
/// the callbacks that differ).
pub fn routine_struct(amoptions: options::AmOptions) -> *mut pg_sys::IndexAmRoutine {
    // SAFETY: makeNode-style allocation of an IndexAmRoutine in the current memory context.
    let routine = unsafe {
        let routine = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexAmRoutine>()).cast::<pg_sys::IndexAmRoutine>();
        (*routine).type_ = pg_sys::NodeTag::T_IndexAmRoutine;
        routine
    };
    // SAFETY: `routine` was just allocated and zeroed.
    let r = unsafe { &mut *routine };
    r.amstrategies = 0;
    r.amsupport = 1;
    r.amoptsprocnum = 0;
    r.amcanorder = false;
    r.amcanorderbyop = true;
    r.amcanbackward = false;
    r.amcanunique = false;
    r.amcanmulticol = true;
    r.amoptionalkey = true;
    r.amsearcharray = true;
    r.amsearchnulls = false;
    r.amstorage = false;
    r.amclusterable = false;
    r.ampredlocks = false;
    r.amcanparallel = false;
    r.amcaninclude = false;
    r.amusemaintenanceworkmem = true;
    r.amparallelvacuumoptions = pg_sys::VACUUM_OPTION_PARALLEL_BULKDEL as u8;
    r.amkeytype = pg_sys::InvalidOid;
    r.ambuild = Some(build::ambuild);
    r.ambuildempty = Some(build::ambuildempty);
    r.aminsert = Some(insert::aminsert);
    r.ambulkdelete = Some(vacuum::ambulkdelete);
    r.amvacuumcleanup = Some(vacuum::amvacuumcleanup);
    r.amcostestimate = Some(cost::amcostestimate);
    r.amoptions = Some(amoptions);
    r.amvalidate = Some(amvalidate);
    r.ambuildphasename = Some(build::ambuildphasename);
    r.ambeginscan = Some(scan::ambeginscan);
    r.amrescan = Some(scan::amrescan);
    r.amgettuple = Some(scan::amgettuple);
    r.amendscan = Some(scan::amendscan);
    routine
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn amvalidate(_opclass: pg_sys::Oid) -> bool {
    true
}

/// The metric and column type an index's opclass names (its support function 1's code), and
/// the indexed column's typmod.
///
/// # Safety
/// `index` must be a valid, open relation of a strata access method.
unsafe fn opclass_of(index: pg_sys::Relation) -> (Metric, ColumnType, i32) {
    // SAFETY: `index` is an open strata-AM index (this function's contract), so rd_att is set and
    // attribute 0 exists (every index has a first key column), and `role_of(index, 1)` is in range.
    let (role, typmod) =
        unsafe { (filters::role_of(index, 1), (*crate::pg_compat::tuple_desc_attr((*index).rd_att, 0)).atttypmod) };
    match role {
        OpclassRole::Vector { metric, column } => (metric, column, typmod),
        OpclassRole::Filter => error(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "the first column of a strata index must be the vector column it orders by; filter columns come after it",
        ),
    }
}

/// The name of relation `rel`.
///
/// # Safety
/// `rel` must be a valid, open relation.
pub unsafe fn relation_name(rel: pg_sys::Relation) -> String {
    // SAFETY: `rel` is an open relation (this function's contract: callers pass an AM callback's
    // Relation), so rd_rel points to its pg_class row; relname is a NUL-terminated NameData.
    unsafe { std::ffi::CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()) }.to_string_lossy().into_owned()
}

/// The SQL type of an index's column, as its opclass names it.
///
/// # Safety
/// `index` must be a valid, open relation of a strata access method.
pub unsafe fn column_of(index: pg_sys::Relation) -> ColumnType {
    // SAFETY: `index` is an open strata-AM index (this function's contract: ambuild, aminsert,
    // amrescan and the heap reader pass their own index), which is what `opclass_of` requires.
    unsafe { opclass_of(index).1 }
}

/// The configuration an index relation asks for: options, metric and element from its first
/// column's opclass, dimensions from that column's typmod, filter columns from the others.
///
/// # Safety
/// `index` must be a valid, open relation of access method strata (or bm25: its configuration
/// is [`crate::text::options::config_of`]).
pub unsafe fn config_of(index: pg_sys::Relation) -> IndexConfig {
    // SAFETY: `index` is an open strata or bm25 index (this function's contract, met by
    // `create_files`), so `*index` is valid; `is_bm25` null-checks rd_indam itself.
    if unsafe { crate::text::options::is_bm25(index) } {
        // SAFETY: `index` is an open bm25 index (just checked), as `text::options::config_of`
        // needs.
        return unsafe { crate::text::options::config_of(index) };
    }
    // SAFETY: not bm25 (checked above), so by this function's contract `index` is an open index of
    // a strata access method, as `opclass_of`, `options::of`, `filter_columns` and `flavor_of` need.
    let (metric, column, typmod) = unsafe { opclass_of(index) };
    // SAFETY: `index` is an open index of a strata access method (not bm25, checked above).
    let options = unsafe { options::of(index) };
    // SAFETY: `index` is an open index of a strata access method (not bm25, checked above).
    let filter_types: Vec<_> = unsafe { filters::filter_columns(index) }.iter().map(|c| c.ty).collect();
    // SAFETY: `index` is an open index of a strata access method (not bm25, checked above).
    let access_method =
        unsafe { options::flavor_of(index) }.map_or("strata", strata_lsm::options::Flavor::access_method);
    IndexConfig::from_options(typmod.max(0) as u32, metric, column, &options)
        .and_then(|config| config.with_filter_columns(&filter_types, &options))
        .unwrap_or_else(|e| {
            error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.for_access_method(access_method).to_string())
        })
}
