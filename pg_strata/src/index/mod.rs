//! The `strata` index access method: PostgreSQL's `IndexAmRoutine` over memtables and segments.
//!
//! - [`build`]: `CREATE INDEX` / `REINDEX` — scans the heap and writes segments directly;
//! - [`insert`]: `aminsert` — appends to the index's memtable in shared memory;
//! - [`scan`]: ordered scans that widen while the executor keeps asking;
//! - [`kind`]: the vector kind of the access-method core (`crate::access`), which holds what
//!   the vector and bm25 access methods share (VACUUM, recovery, standbys, publishing);
//! - [`segments`]: the backend's cache of open vector segments and memtable codes; segment builds;
//! - [`keys`], [`filters`], [`heap`]: the stored form of rows, filter columns, rerank from the table.

pub mod build;
pub mod filters;
pub mod heap;
pub mod insert;
pub mod keys;
pub mod kind;
pub mod options;
pub mod paths;
pub mod scan;
pub mod segments;

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

/// strata's `IndexAmRoutine` with `amoptions`: the core's ([`crate::access::routine_struct`])
/// with the vector access method's build, insert and scan callbacks.
fn routine(amoptions: crate::access::AmOptions) -> pg_sys::Datum {
    let routine = crate::access::routine_struct(amoptions);
    // SAFETY: `routine` was just allocated by routine_struct.
    let r = unsafe { &mut *routine };
    r.ambuild = Some(build::ambuild);
    r.aminsert = Some(insert::aminsert);
    r.ambuildphasename = Some(build::ambuildphasename);
    r.ambeginscan = Some(scan::ambeginscan);
    r.amrescan = Some(scan::amrescan);
    r.amgettuple = Some(scan::amgettuple);
    r.amendscan = Some(scan::amendscan);
    pg_sys::Datum::from(routine)
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

/// The SQL type of an index's column, as its opclass names it.
///
/// # Safety
/// `index` must be a valid, open relation of a strata access method.
pub unsafe fn column_of(index: pg_sys::Relation) -> ColumnType {
    // SAFETY: `index` is an open strata-AM index (this function's contract: ambuild, aminsert,
    // amrescan and the heap reader pass their own index), which is what `opclass_of` requires.
    unsafe { opclass_of(index).1 }
}

/// The configuration a vector index relation asks for: options, metric and element from its
/// first column's opclass, dimensions from that column's typmod, filter columns from the others.
///
/// # Safety
/// `index` must be a valid, open relation of a strata (vector) access method.
pub unsafe fn config_of(index: pg_sys::Relation) -> IndexConfig {
    // SAFETY: by this function's contract `index` is an open index of a strata access method, as
    // `opclass_of`, `options::of`, `filter_columns` and `flavor_of` need.
    let (metric, column, typmod) = unsafe { opclass_of(index) };
    // SAFETY: `index` is an open index of a strata access method (this function's contract).
    let options = unsafe { options::of(index) };
    // SAFETY: `index` is an open index of a strata access method (this function's contract).
    let filter_types: Vec<_> = unsafe { filters::filter_columns(index) }.iter().map(|c| c.ty).collect();
    // SAFETY: `index` is an open index of a strata access method (this function's contract).
    let access_method =
        unsafe { options::flavor_of(index) }.map_or("strata", strata_lsm::options::Flavor::access_method);
    IndexConfig::from_options(typmod.max(0) as u32, metric, column, &options)
        .and_then(|config| config.with_filter_columns(&filter_types, &options))
        .unwrap_or_else(|e| {
            error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.for_access_method(access_method).to_string())
        })
}
