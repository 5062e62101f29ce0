//! The statistics PostgreSQL keeps per index (`pg_stat_user_indexes`), counted for scans of
//! pg_strata's access methods (`strata`, the companion's `hnsw` / `ivfflat`, `bm25`) as for
//! PostgreSQL's own.
//!
//! PostgreSQL counts two of them for every access method, at its index AM interface:
//! `idx_tup_read`, one per TID `amgettuple` returns (`index_getnext_tid`), and `idx_tup_fetch`,
//! one per table row fetched through the index (`index_fetch_heap`). `idx_scan` is the access
//! method's own to count: btree counts each (re)scan at its first fetch (`_bt_first`), GiST at the
//! first `gistgettuple` after `gistrescan`. The macro they use, `pgstat_count_index_scan`, is C
//! only; [`count_index_scan`] does what it does.

use pgrx::pg_sys;

/// Counts one scan of the scan's index (PostgreSQL's `pgstat_count_index_scan`, and from 18 the
/// scan's "Index Searches" in EXPLAIN ANALYZE): the scans call it at the first `amgettuple` after
/// each `amrescan`.
///
/// # Safety
/// `scan` must be a valid scan of an open index, on the backend's main thread.
pub unsafe fn count_index_scan(scan: pg_sys::IndexScanDesc) {
    // SAFETY: `scan` is a valid scan descriptor (this function's contract).
    let index = unsafe {
        crate::pg_compat::count_index_search(scan);
        (*scan).indexRelation
    };
    // SAFETY: `index` is an open relation (this function's contract: a scan's index relation), so
    // its RelationData is valid. As `pgstat_should_count_relation` does, a relation whose
    // statistics are enabled but not yet associated with a pending entry gets one from
    // `pgstat_assoc_relation`, which sets `pgstat_info`; that entry lives until the backend
    // reports its statistics, after this increment.
    unsafe {
        if (*index).pgstat_info.is_null() {
            if !(*index).pgstat_enabled {
                return;
            }
            pg_sys::pgstat_assoc_relation(index);
        }
        if let Some(entry) = (*index).pgstat_info.as_mut() {
            crate::pg_compat::count_scan(entry);
        }
    }
}
