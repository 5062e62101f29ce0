//! `EXPLAIN (ANALYZE)` reports what strata scans did: after the plan, in text format,
//!
//! ```text
//! Strata Scans: rounds=1 segments searched=4 memtable rows=812 candidates=40 dead rows hinted=3 memtable ms=0.210 segment ms=0.630
//! Strata Filter: segments by strategy: exact scan=3 filtered graph=1 post-check=0, segment rows allowed=912 checked=1240, memtable rows admitted=31
//! Strata Recovery: 2.1 ms, 1 memtables rebuilt from 5000 heap rows, 0 segments dropped, 0 rows invalidated
//! ```
//!
//! (`dead rows hinted` only when the executor found rows dead that a segment listed, see
//! `strata_lsm::dead_rows`; the second line only when a scan filtered on the index's filter columns, the third only when
//! the statement was the index's first use after a restart and so ran its crash recovery).
//!
//! PostgreSQL 15 has no per-node hook for index access methods, so the counters are
//! backend-local totals over the statement, added by an `ExplainOneQuery_hook` that plans and
//! explains exactly as PostgreSQL does and then appends the line.

use std::cell::Cell;

use pgrx::pg_sys;
pub use strata_lsm::explain::RecoverySummary;
use strata_lsm::explain::ScanCounters;
use strata_lsm::scan::round::{FilterReport, Found};

thread_local! {
    static SCANS: Cell<ScanCounters> = const { Cell::new(ScanCounters::NONE) };
    static RECOVERY: Cell<Option<RecoverySummary>> = const { Cell::new(None) };
}

/// Records that this backend recovered an index during the current statement.
pub fn record_recovery(summary: RecoverySummary) {
    RECOVERY.with(|c| c.set(Some(summary)));
}

/// Records segment rows a scan hinted dead.
pub fn record_hinted(rows: usize) {
    if rows > 0 {
        SCANS.with(|c| {
            let mut counters = c.get();
            counters.add_hinted(rows as u64);
            c.set(counters);
        });
    }
}

/// Records one scan round, and what its filtered searches did when it had a filter.
pub fn record_round(segments: u64, found: &Found, candidates: u64, filtered: Option<&FilterReport>) {
    SCANS.with(|c| {
        let mut counters = c.get();
        counters.add_round(segments, found.memtable_rows, candidates);
        counters.add_times(found.memtable_nanos, found.segment_nanos);
        if let Some(report) = filtered {
            counters.add_filtered(report);
        }
        c.set(counters);
    });
}

fn reset() {
    SCANS.with(|c| c.set(ScanCounters::default()));
    RECOVERY.with(|c| c.set(None));
}

static mut PREVIOUS: pg_sys::ExplainOneQuery_hook_type = None;

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn explain_one_query(
    query: *mut pg_sys::Query,
    cursor_options: i32,
    into: *mut pg_sys::IntoClause,
    es: *mut pg_sys::ExplainState,
    query_string: *const std::ffi::c_char,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
) {
    reset();
    // SAFETY: the same calls PostgreSQL's ExplainOneQuery makes, with the arguments it received.
    unsafe {
        if let Some(previous) = PREVIOUS {
            previous(query, cursor_options, into, es, query_string, params, query_env);
        } else {
            crate::pg_compat::explain_one_query(query, cursor_options, into, es, query_string, params, query_env);
        }
        if (*es).format == pg_sys::ExplainFormat::EXPLAIN_FORMAT_TEXT {
            let scans = SCANS.with(Cell::get);
            if let Some(line) = scans.line((*es).timing).filter(|_| (*es).analyze) {
                pg_sys::ExplainPropertyText(c"Strata Scans".as_ptr(), format!("{line}\0").as_ptr().cast(), es);
            }
            if let Some(line) = scans.filter_line().filter(|_| (*es).analyze) {
                pg_sys::ExplainPropertyText(c"Strata Filter".as_ptr(), format!("{line}\0").as_ptr().cast(), es);
            }
            if let Some(r) = RECOVERY.with(Cell::get) {
                pg_sys::ExplainPropertyText(c"Strata Recovery".as_ptr(), format!("{}\0", r.line()).as_ptr().cast(), es);
            }
        }
    }
}

/// Installs the hook; called from `_PG_init`.
pub fn install_hook() {
    // SAFETY: _PG_init runs once per process before any EXPLAIN.
    unsafe {
        PREVIOUS = pg_sys::ExplainOneQuery_hook;
        pg_sys::ExplainOneQuery_hook = Some(explain_one_query);
    }
}
