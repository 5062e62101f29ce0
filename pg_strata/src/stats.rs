//! SQL functions for operating an index: `strata_index_stats(regclass)` shows what it is made of
//! (and any background work that keeps failing), `strata_flush(regclass)` turns its memtables
//! into segments now, `strata_wait_for_merges(regclass)` waits for background merges, and
//! `strata_index_recovery(regclass)` shows what crash recovery did.
//!
//! Rights, checked on the index's table as PostgreSQL's own index maintenance functions
//! (`brin_summarize_range`, `gin_clean_pending_list`) check them: the statistics need SELECT;
//! flushing, waiting for merges and recovery details need ownership (superusers and members of
//! the owning role pass). Like those functions, they stay executable by PUBLIC and refuse callers
//! without the right.

use std::sync::atomic::Ordering;
use std::time::Duration;

use pgrx::prelude::*;

use strata_lsm::clock::SystemClock;
use strata_lsm::stats::{self, awaiting_flush, wait_for, FlushWait, MemtableStats, StatsRow, WaitError};

use crate::access::dispatch::dispatch;
use crate::access::kind::Kind;
use crate::access::state;
use crate::shmem::directory_lock;

/// One row per memtable and per segment of the index: where its rows live, how many there are,
/// how many are deleted, and the bytes they take.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::type_complexity)]
fn strata_index_stats_by_oid(
    index: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        name!(part, String),
        name!(id, i64),
        name!(state, String),
        name!(kind, String),
        name!(rows, i64),
        name!(deleted, i64),
        name!(bytes, i64),
        name!(retries, i64),
        name!(last_error, Option<String>),
    ),
> {
    let (relation, handle) = open_strata_index(index, Right::Select);
    let (mut memtables, generation) = state::snapshot(&handle);
    let flush_error = handle.shared().flush_failure.current(&directory_lock(false)).map(|(_, e)| e);
    // The set may be newer than the snapshot: a memtable flushed meanwhile is shown (and its rows
    // counted) as the segment that holds it, not twice.
    let segment_rows: Vec<StatsRow> = dispatch!(handle.access_kind, K => {
        let set = K::segment_set(&handle, generation);
        memtables.release_held(|id| set.covers(id));
        set.segments.iter().map(|open| stats::segment_row(open, &K::segment_kind(&handle, open))).collect()
    });
    let mut rows: Vec<StatsRow> = memtables
        .iter()
        .map(|memtable| MemtableStats::of(memtable).row(handle.config.dims, flush_error.as_deref()))
        .collect();
    drop(memtables);
    rows.extend(segment_rows);
    // Merges and rebuilds that keep failing: one row for the index's background maintenance.
    rows.extend(stats::merges_row(handle.shared().merge_failure.current(&directory_lock(false))));
    // On a standby: the absorber's passes over the index that keep failing.
    rows.extend(stats::absorb_row(handle.shared().absorb_failure.current(&directory_lock(false))));
    // SAFETY: closing what open_strata_index opened.
    unsafe { pg_sys::index_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    TableIterator::new(rows.into_iter().map(|r| {
        let retries = i64::from(r.retries);
        (r.part.to_owned(), r.id, r.state.to_owned(), r.kind, r.rows, r.deleted, r.bytes, retries, r.last_error)
    }))
}

/// The index's membership log in its status pages: how many groups are open (rows may still be
/// appended: the active memtable, and flushed ones not yet settled) and how many are settled.
/// A standby holds one memtable slab per open group.
#[pg_extern(volatile, parallel_unsafe)]
fn strata_index_groups_by_oid(index: pg_sys::Oid) -> TableIterator<'static, (name!(open, i64), name!(settled, i64))> {
    let (relation, _handle) = open_strata_index(index, Right::Select);
    // SAFETY: `relation` is an open strata index for as long as `pages` is used, on this thread.
    let pages = unsafe { crate::access::status::Pages::of(relation) };
    let groups =
        strata_lsm::status::pages::read_catalog(&pages).unwrap_or_else(|e| crate::access::status::raise_status(e));
    let open = groups.iter().filter(|g| g.state == strata_lsm::membership::GroupState::Open).count() as i64;
    let settled = groups.len() as i64 - open;
    // SAFETY: closing what open_strata_index opened.
    unsafe { pg_sys::index_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    TableIterator::new(vec![(open, settled)])
}

/// The right a function needs on the index's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Right {
    /// SELECT on the table (reading statistics).
    Select,
    /// Ownership of the table (maintenance), as VACUUM and REINDEX require.
    Maintain,
}

/// Raises PostgreSQL's standard permission error unless the current user has `right` on the table
/// of the open index `relation`.
fn check_right(relation: pg_sys::Relation, right: Right) {
    // SAFETY: `relation` is an open index (rd_index is set); the ACL checks and aclcheck_error
    // are catalog lookups on the backend's main thread.
    unsafe {
        let table = (*(*relation).rd_index).indrelid;
        let user = pg_sys::GetUserId();
        let result = match right {
            Right::Select => pg_sys::pg_class_aclcheck(table, user, pg_sys::AclMode::from(pg_sys::ACL_SELECT)),
            Right::Maintain if crate::pg_compat::owns_relation(table, user) => pg_sys::AclResult::ACLCHECK_OK,
            Right::Maintain => pg_sys::AclResult::ACLCHECK_NOT_OWNER,
        };
        if result != pg_sys::AclResult::ACLCHECK_OK {
            let name = pg_sys::get_rel_name(table);
            pg_sys::aclcheck_error(result, pg_sys::ObjectType::OBJECT_TABLE, name);
        }
    }
}

/// Raises an error unless the caller has SELECT on the table of open index `relation`.
pub fn check_select(relation: pg_sys::Relation) {
    check_right(relation, Right::Select);
}

/// Opens `index` (AccessShareLock), checking that it is a strata index and that the caller has
/// `right` on its table.
fn open_strata_index(index: pg_sys::Oid, right: Right) -> (pg_sys::Relation, state::IndexHandle) {
    // SAFETY: try_relation_open returns NULL for a relation that does not exist and otherwise
    // opens it with the lock, held to the transaction's end.
    let relation = unsafe { pg_sys::try_relation_open(index, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    if relation.is_null() {
        crate::fmgr::error(
            pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            format!("no relation with OID {}", index.to_u32()),
        );
    }
    // SAFETY: `relation` is an open relation; `rd_rel` is valid, and `is_strata_index` reads an
    // index's access method only for index relkinds.
    let is_strata = unsafe {
        let relkind = (*(*relation).rd_rel).relkind as u8;
        (relkind == pg_sys::RELKIND_INDEX || relkind == pg_sys::RELKIND_PARTITIONED_INDEX)
            && crate::access::is_strata_index(relation)
    };
    if !is_strata {
        // SAFETY: closing what we opened.
        unsafe { pg_sys::relation_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
        crate::fmgr::error(pgrx::PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, "not a strata index");
    }
    check_right(relation, right);
    // SAFETY: `relation` is an open strata index.
    let handle = unsafe { crate::access::opening::open(relation) };
    (relation, handle)
}

/// `(SegmentID, failed flush attempts)` of the index's memtables waiting to be flushed (sealed or
/// flushing).
fn pending_failures(handle: &state::IndexHandle) -> Vec<(u64, u32)> {
    awaiting_flush(state::snapshot(handle).0.iter())
}

/// Between two looks at the index service's progress: wakes it and waits a moment.
fn pause() {
    crate::shmem::wake_service();
    state::wait_a_moment();
}

/// Seals the index's active memtable and waits until the index service has turned every
/// memtable of the index into a segment; returns the number of segments afterwards.
#[pg_extern(volatile, parallel_unsafe)]
fn strata_flush_by_oid(index: pg_sys::Oid) -> i64 {
    let (relation, handle) = open_strata_index(index, Right::Maintain);
    state::seal_active(&handle);
    // Memtables failing already get one more attempt at once; a failure is reported when an
    // attempt made during this call fails and the memtable has failed often enough.
    let wait = FlushWait::new(pending_failures(&handle));
    handle.shared().retry_requested.store(1, Ordering::Release);
    match wait_for(&SystemClock, Duration::from_mins(5), || wait.poll(&pending_failures(&handle)), pause) {
        Ok(()) => {}
        Err(WaitError::Failing((memtable, failures))) => {
            let error = handle.shared().flush_failure.current(&directory_lock(false)).map(|(_, e)| e);
            let what = format!("memtable {memtable} cannot be flushed");
            raise_failing("strata_flush", &what, failures, &error.unwrap_or_default());
        }
        Err(WaitError::TimedOut) => crate::fmgr::error(
            pgrx::PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            "strata_flush: the index service did not flush within 300 s (is it running?)",
        ),
    }
    let segments = segment_count(&handle);
    // SAFETY: `relation` is the open index of `handle`; no status page lock is held.
    unsafe { state::settle_flushed(relation, &handle) };
    // SAFETY: closing what open_strata_index opened.
    unsafe { pg_sys::index_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    segments
}

/// Waits until the index service has nothing left to merge or rebuild in the index — the
/// tiered policy the service follows chooses nothing for the current segments, counting those
/// still waiting for their settle — and returns the number of segments. Call after `strata_flush` to charge a workload for all the background
/// work it caused. Errors after `timeout_seconds`.
#[pg_extern(volatile, parallel_unsafe)]
fn strata_wait_for_merges_by_oid(index: pg_sys::Oid, timeout_seconds: f64) -> i64 {
    let timeout = stats::wait_timeout(timeout_seconds)
        .unwrap_or_else(|e| crate::fmgr::error(pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e));
    let (relation, handle) = open_strata_index(index, Right::Maintain);
    let failures_before = handle.shared().merge_failure.retries.load(Ordering::Acquire);
    handle.shared().retry_requested.store(1, Ordering::Release);
    let poll = || {
        let (pending, segments) = crate::maintenance::pending_action(&handle).unwrap_or_else(|e| {
            crate::fmgr::error(pgrx::PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata: {e}"))
        });
        let failure = handle.shared().merge_failure.current(&directory_lock(false));
        stats::merges_poll(pending.is_some(), failures_before, failure, || segments as i64)
    };
    let segments = match wait_for(&SystemClock, timeout, poll, pause) {
        Ok(segments) => segments,
        Err(WaitError::Failing((failures, error))) => {
            raise_failing("strata_wait_for_merges", "merging segments fails", failures, &error)
        }
        Err(WaitError::TimedOut) => crate::fmgr::error(
            pgrx::PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            format!("strata_wait_for_merges: merges still pending after {timeout_seconds} s"),
        ),
    };
    // SAFETY: closing what open_strata_index opened.
    unsafe { pg_sys::index_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    segments
}

/// What the index's crash recovery did on its first use since the server started: when, how
/// long it took, and what it changed. After a clean restart it finds nothing to change.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::type_complexity)]
fn strata_index_recovery_by_oid(
    index: pg_sys::Oid,
) -> TableIterator<
    'static,
    (
        name!(recovered_at, Option<pgrx::datum::TimestampWithTimeZone>),
        name!(duration_ms, f64),
        name!(listed_memtables, i64),
        name!(status_pages, i64),
        name!(dropped_segments, i64),
        name!(invalidated_rows, i64),
        name!(rebuilt_memtables, i64),
        name!(reinserted_rows, i64),
    ),
> {
    let (relation, handle) = open_strata_index(index, Right::Maintain);
    let r = handle.shared().recovery.report();
    // SAFETY: a TimestampTz is an i64 of microseconds since 2000-01-01, which is what was stored.
    let at = r.finished_at.map(|finished| unsafe {
        pgrx::datum::TimestampWithTimeZone::from_datum(pg_sys::Datum::from(finished), false).expect("not null")
    });
    let row = (
        at,
        r.duration_ms,
        r.listed_memtables,
        r.status_pages,
        r.dropped_segments,
        r.invalidated_rows,
        r.rebuilt_memtables,
        r.reinserted_rows,
    );
    // SAFETY: closing what open_strata_index opened.
    unsafe { pg_sys::index_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    TableIterator::new(vec![row])
}

/// The number of segments the index has now.
fn segment_count(handle: &state::IndexHandle) -> i64 {
    let (_, generation) = state::snapshot(handle);
    dispatch!(handle.access_kind, K => K::segment_set(handle, generation).segments.len() as i64)
}

/// Raises the error of background work that keeps failing (`ERRCODE_DISK_FULL` when the disk is
/// full, `ERRCODE_IO_ERROR` otherwise), with the service's last error as DETAIL.
fn raise_failing(function: &str, what: &str, failures: u32, error: &str) -> ! {
    crate::fmgr::error_with_detail(
        crate::access::publish::error_code(error),
        stats::failing_message(function, what, failures),
        format!("last error: {error}"),
    )
}

// The user-facing functions take a regclass ('my_index'), like PostgreSQL's own admin functions, and
// call their `_by_oid` functions qualified by the extension's schema: a search_path without it, or
// with a schema where another role created functions of those names, neither breaks nor hijacks them.
// strata_index_stats, strata_index_groups, strata_index_recovery, strata_flush and
// strata_wait_for_merges (on Citus: every shard's index), strata_bm25_query and strata_hybrid_keys.
pgrx::extension_sql_file!(
    "../sql/distributed.sql",
    name = "distributed",
    requires = [
        "hybrid",
        strata_index_stats_by_oid,
        strata_index_groups_by_oid,
        strata_index_recovery_by_oid,
        strata_flush_by_oid,
        strata_wait_for_merges_by_oid
    ],
);
