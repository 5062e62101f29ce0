//! Every difference between the server APIs of the PostgreSQL major versions pg_strata supports
//! (15, 16, 17, 18), in one place.
//!
//! The rest of the extension calls these shims and never tests a `pgNN` feature itself. Each
//! shim's comment says which versions differ and how. What is not here is the same on every
//! supported version, as checked by building with each feature (`cargo xtask build --pg N`).
//!
//! Differences that need no shim:
//! - `IndexAmRoutine` gained fields (16: `amsummarizing`; 17: `amcanbuildparallel`,
//!   `aminsertcleanup`; 18: `amcanhash`, `amconsistentequality`, `amconsistentordering`,
//!   `amgettreeheight`, `amtranslatestrategy`, `amtranslatecmptype`). The routines are
//!   `palloc0`'d, so each new field is false or NULL: no summarizing, no parallel build, no
//!   insert cleanup, no hashing or equality semantics, no strategy translation — what PostgreSQL
//!   assumes for an access method that does not set them.
//! - Status pages are changed through generic WAL (`GenericXLogStart` … `GenericXLogFinish`) and
//!   `log_newpage_buffer`, whose signatures and records are the same on 15–18; there is no
//!   custom resource manager. The page header (`SizeOfPageHeaderData`, 24 bytes) and `BLCKSZ`
//!   (8192) are the same too; `tests/regress/sql/24_golden_bytes.sql` checks the bytes each build
//!   writes against one expected output.

use std::ffi::CStr;

use pgrx::pg_sys;

/// Attribute `index` (0-based) of a tuple descriptor (C's `TupleDescAttr`).
///
/// 15–17: `TupleDescData.attrs` is the array of `FormData_pg_attribute`. 18: the descriptor
/// holds `compact_attrs` (one `CompactAttribute` per column) first and the full attributes after
/// them, with no `attrs` field.
///
/// # Safety
/// `desc` must be a valid tuple descriptor with more than `index` attributes.
pub unsafe fn tuple_desc_attr(desc: pg_sys::TupleDesc, index: usize) -> *mut pg_sys::FormData_pg_attribute {
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
    // SAFETY: `desc` is valid with more than `index` attributes (this function's contract).
    unsafe {
        (*desc).attrs.as_mut_ptr().add(index)
    }
    #[cfg(feature = "pg18")]
    // SAFETY: as TupleDescAttr in PostgreSQL 18's tupdesc.h: the attributes follow the `natts`
    // compact attributes; `desc` is valid with more than `index` attributes.
    unsafe {
        let natts = usize::try_from((*desc).natts).unwrap_or(0);
        (*desc).compact_attrs.as_mut_ptr().add(natts).cast::<pg_sys::FormData_pg_attribute>().add(index)
    }
}

/// One entry of a reloptions parse table (`relopt_parse_elt`) for an option stored at `offset`.
/// The entry points into `name`, which must outlive the table's use.
///
/// 18 added `isset_offset` (where to record whether the option was given; 0 = not recorded).
pub fn relopt_parse_elt(name: &CStr, opttype: pg_sys::relopt_type::Type, offset: usize) -> pg_sys::relopt_parse_elt {
    pg_sys::relopt_parse_elt {
        optname: name.as_ptr(),
        opttype,
        offset: offset as std::ffi::c_int,
        #[cfg(feature = "pg18")]
        isset_offset: 0,
    }
}

/// The storage identity of a relation: (database, tablespace, relfilenode) as plain numbers.
///
/// 15: `RelationData.rd_node`, a `RelFileNode { spcNode, dbNode, relNode }`. 16 renamed it
/// `rd_locator`, a `RelFileLocator { spcOid, dbOid, relNumber }`; the values are the same, and so
/// are pg_strata's directory names built from them.
///
/// # Safety
/// `relation` must be a valid, open relation.
pub unsafe fn relation_file_key(relation: pg_sys::Relation) -> (u32, u32, u32) {
    #[cfg(feature = "pg15")]
    // SAFETY: `relation` is open (this function's contract); rd_node is a plain field.
    unsafe {
        let node = (*relation).rd_node;
        (node.dbNode.to_u32(), node.spcNode.to_u32(), node.relNode.to_u32())
    }
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    // SAFETY: `relation` is open (this function's contract); rd_locator is a plain field.
    unsafe {
        let locator = (*relation).rd_locator;
        (locator.dbOid.to_u32(), locator.spcOid.to_u32(), locator.relNumber.to_u32())
    }
}

/// The path of a relation's main fork relative to the data directory (`GetRelationPath`).
///
/// 15–17 return a palloc'd C string; 18 returns a `RelPathStr` by value (a fixed array).
///
/// # Safety
/// Backend main thread only (the C function may palloc).
pub unsafe fn relation_path(db: u32, spc: u32, relnode: u32) -> String {
    // SAFETY: GetRelationPath is a pure path computation (this function's contract: the backend's
    // main thread); the 15–17 result is palloc'd and freed here after copying.
    unsafe {
        let raw = pg_sys::GetRelationPath(
            pg_sys::Oid::from(db),
            pg_sys::Oid::from(spc),
            pg_sys::Oid::from(relnode),
            -1,
            pg_sys::ForkNumber::MAIN_FORKNUM,
        );
        #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
        {
            let path = CStr::from_ptr(raw).to_string_lossy().into_owned();
            pg_sys::pfree(raw.cast());
            path
        }
        #[cfg(feature = "pg18")]
        {
            CStr::from_ptr(raw.str_.as_ptr()).to_string_lossy().into_owned()
        }
    }
}

/// Whether `role` owns the table `relation` (or is a superuser).
///
/// 15: `pg_class_ownercheck(oid, role)`. 16 replaced the per-class checks by
/// `object_ownercheck(RelationRelationId, oid, role)`.
///
/// # Safety
/// Backend main thread, inside a transaction (a catalog lookup).
pub unsafe fn owns_relation(relation: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    #[cfg(feature = "pg15")]
    // SAFETY: a catalog lookup on the backend's main thread (this function's contract).
    unsafe {
        pg_sys::pg_class_ownercheck(relation, role)
    }
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    // SAFETY: a catalog lookup on the backend's main thread (this function's contract).
    unsafe {
        pg_sys::object_ownercheck(pg_sys::RelationRelationId, relation, role)
    }
}

/// A qualified name's parts as a `List` of `String` nodes (`stringToQualifiedNameList`);
/// raises the usual syntax error on a malformed name.
///
/// 16 added a soft-error context argument; NULL keeps 15's behaviour (raise).
///
/// # Safety
/// Backend main thread; `name` a NUL-terminated string.
pub unsafe fn qualified_name_list(name: *const std::ffi::c_char) -> *mut pg_sys::List {
    #[cfg(feature = "pg15")]
    // SAFETY: on the backend's main thread with a NUL-terminated `name` (this function's
    // contract); the function pallocs and may raise, which pg_guard'ed callers handle.
    unsafe {
        pg_sys::stringToQualifiedNameList(name)
    }
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    // SAFETY: on the backend's main thread with a NUL-terminated `name` (this function's
    // contract); a NULL escontext makes errors raise, as in 15.
    unsafe {
        pg_sys::stringToQualifiedNameList(name, std::ptr::null_mut())
    }
}

/// Adds one to an index's scan counter in its pending statistics entry (`idx_scan`).
///
/// 15: `PgStat_TableStatus.t_counts.t_numscans`. 16 renamed the fields: `counts.numscans`.
pub fn count_scan(entry: &mut pg_sys::PgStat_TableStatus) {
    #[cfg(feature = "pg15")]
    {
        entry.t_counts.t_numscans += 1;
    }
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    {
        entry.counts.numscans += 1;
    }
}

/// A table's live and dead row estimates from its statistics entry.
///
/// 15: `n_live_tuples` / `n_dead_tuples`. 16 renamed them `live_tuples` / `dead_tuples`.
pub fn live_and_dead_rows(entry: &pg_sys::PgStat_StatTabEntry) -> (i64, i64) {
    #[cfg(feature = "pg15")]
    {
        (entry.n_live_tuples, entry.n_dead_tuples)
    }
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    {
        (entry.live_tuples, entry.dead_tuples)
    }
}

/// An `instr_time` holding `nanos` nanoseconds (a duration, as EXPLAIN's planning time).
///
/// 15: a `struct timespec` (`tv_sec`, `tv_nsec`). 16 made it `{ ticks }` in nanoseconds. Used on
/// 15 and 16 only (by [`explain_one_query`]).
#[cfg(any(feature = "pg15", feature = "pg16"))]
fn instr_time_from_nanos(nanos: i64) -> pg_sys::instr_time {
    #[cfg(feature = "pg15")]
    {
        pg_sys::instr_time { tv_sec: nanos / 1_000_000_000, tv_nsec: nanos % 1_000_000_000 }
    }
    #[cfg(feature = "pg16")]
    {
        pg_sys::instr_time { ticks: nanos }
    }
}

/// `ExplainOnePlan` with the arguments 15 and 16 take.
///
/// 17 added `mem_counters` (planner memory for `EXPLAIN (MEMORY)`); NULL means "not measured",
/// which is what callers that do not measure it pass. Only 15 and 16 call this: on 17 and 18
/// [`explain_one_query`] is PostgreSQL's own `standard_ExplainOneQuery`.
///
/// # Safety
/// As `ExplainOnePlan`: called from an `ExplainOneQuery_hook` with the arguments it received.
#[allow(clippy::too_many_arguments)] // PostgreSQL's signature
#[cfg(any(feature = "pg15", feature = "pg16"))]
unsafe fn explain_one_plan(
    plan: *mut pg_sys::PlannedStmt,
    into: *mut pg_sys::IntoClause,
    es: *mut pg_sys::ExplainState,
    query_string: *const std::ffi::c_char,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    planning: *const pg_sys::instr_time,
    buffers: *const pg_sys::BufferUsage,
) {
    // SAFETY: called from an ExplainOneQuery_hook with the arguments PostgreSQL gave it (this
    // function's contract), which are what ExplainOnePlan expects.
    unsafe { pg_sys::ExplainOnePlan(plan, into, es, query_string, params, query_env, planning, buffers) }
}

/// What PostgreSQL's `ExplainOneQuery` does when no hook is installed: plan the query (timing the
/// planning and its buffer use) and explain the plan.
///
/// 17 and 18 export it as `standard_ExplainOneQuery` (which also measures planner memory for
/// `EXPLAIN (MEMORY)`). 15 and 16 keep it static, so it is done here as they do it.
///
/// # Safety
/// Called from an `ExplainOneQuery_hook` with the arguments it received.
#[allow(clippy::too_many_arguments)] // PostgreSQL's signature
pub unsafe fn explain_one_query(
    query: *mut pg_sys::Query,
    cursor_options: std::ffi::c_int,
    into: *mut pg_sys::IntoClause,
    es: *mut pg_sys::ExplainState,
    query_string: *const std::ffi::c_char,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
) {
    #[cfg(any(feature = "pg17", feature = "pg18"))]
    // SAFETY: called from an ExplainOneQuery_hook with the arguments PostgreSQL gave it (this
    // function's contract), which are what standard_ExplainOneQuery expects.
    unsafe {
        pg_sys::standard_ExplainOneQuery(query, cursor_options, into, es, query_string, params, query_env);
    }
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    // SAFETY: the same calls PostgreSQL's ExplainOneQuery makes, with the arguments it received.
    unsafe {
        let buffers_before = pg_sys::pgBufferUsage;
        let start = monotonic_nanos();
        let plan = pg_sys::pg_plan_query(query, query_string, cursor_options, params);
        let duration = instr_time_from_nanos(monotonic_nanos() - start);
        let mut buffers: pg_sys::BufferUsage = std::mem::zeroed();
        let buffers_ptr = if (*es).buffers {
            pg_sys::BufferUsageAccumDiff(&raw mut buffers, &raw const pg_sys::pgBufferUsage, &raw const buffers_before);
            &raw const buffers
        } else {
            std::ptr::null()
        };
        explain_one_plan(plan, into, es, query_string, params, query_env, &raw const duration, buffers_ptr);
    }
}

#[cfg(any(feature = "pg15", feature = "pg16"))]
fn monotonic_nanos() -> i64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// A `RestrictInfo` for a clause pushed down to one base relation (not an outer-join clause, not
/// pseudoconstant), with the given security level (`make_restrictinfo`).
///
/// 15: `(root, clause, is_pushed_down, outerjoin_delayed, pseudoconstant, security_level,
/// required_relids, outer_relids, nullable_relids)`. 16 replaced `outerjoin_delayed` by
/// `has_clone`, `is_clone` and `nullable_relids` by `incompatible_relids`; for such a clause all
/// are false / NULL on every version.
///
/// # Safety
/// Planner context: `root` and `clause` valid, memory in the planner's context.
pub unsafe fn pushed_down_restrictinfo(
    root: *mut pg_sys::PlannerInfo,
    clause: *mut pg_sys::Expr,
    security_level: pg_sys::Index,
) -> *mut pg_sys::RestrictInfo {
    let null = std::ptr::null_mut();
    #[cfg(feature = "pg15")]
    // SAFETY: in planner context with valid `root` and `clause` (this function's contract);
    // NULL relid sets are allowed and mean "none".
    unsafe {
        pg_sys::make_restrictinfo(root, clause, true, false, false, security_level, null, null, null)
    }
    #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
    // SAFETY: in planner context with valid `root` and `clause` (this function's contract);
    // NULL relid sets are allowed and mean "none".
    unsafe {
        pg_sys::make_restrictinfo(root, clause, true, false, false, false, security_level, null, null, null)
    }
}

/// Keeps the planner from choosing `path`, an index path the access method cannot run usefully
/// (no ORDER BY distance: it would return no rows), even where every other path is disabled.
///
/// 15–17: the prohibitive cost the caller sets is enough, as `enable_seqscan = off` only adds
/// `disable_cost` to the sequential scan. 18 compares paths by their count of disabled nodes
/// before their costs, so a sequential scan disabled by `enable_seqscan = off` (one disabled
/// node) would lose to this path (none), whatever its cost: two disabled nodes make it lose, as
/// pgvector does for the same reason.
///
/// # Safety
/// `path` must be the index path being costed (an `amcostestimate` argument).
pub unsafe fn never_choose(path: *mut pg_sys::IndexPath) {
    #[cfg(feature = "pg18")]
    // SAFETY: `path` is the path being costed (this function's contract).
    unsafe {
        (*path).path.disabled_nodes = 2;
    }
    #[cfg(not(feature = "pg18"))]
    let _ = path;
}

/// Counts one index search in the scan's instrumentation, which EXPLAIN ANALYZE shows as "Index
/// Searches" (as btree counts each descent).
///
/// 18 added `IndexScanDescData.instrument` (NULL unless EXPLAIN ANALYZE or parallel statistics
/// ask for it); 15–17 have no such counter.
///
/// # Safety
/// `scan` must be a valid scan descriptor.
pub unsafe fn count_index_search(scan: pg_sys::IndexScanDesc) {
    #[cfg(feature = "pg18")]
    // SAFETY: `scan` is valid (this function's contract); `instrument` is NULL or points to the
    // executor's counters for this scan.
    unsafe {
        if let Some(instrument) = (*scan).instrument.as_mut() {
            instrument.nsearches += 1;
        }
    }
    #[cfg(not(feature = "pg18"))]
    let _ = scan;
}
