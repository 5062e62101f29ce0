//! `EXPLAIN (ANALYZE)` reports what strata scans did: after the plan, in text format,
//!
//! ```text
//! Strata Scans: rounds=1 segments searched=4 memtable rows=812 candidates=40
//! ```
//!
//! PostgreSQL 15 has no per-node hook for index access methods, so the counters are
//! backend-local totals over the statement, added by an `ExplainOneQuery_hook` that plans and
//! explains exactly as PostgreSQL does and then appends the line.

use std::cell::Cell;

use pgrx::pg_sys;

thread_local! {
    static ROUNDS: Cell<u64> = const { Cell::new(0) };
    static SEGMENTS: Cell<u64> = const { Cell::new(0) };
    static MEMTABLE_ROWS: Cell<u64> = const { Cell::new(0) };
    static CANDIDATES: Cell<u64> = const { Cell::new(0) };
}

/// Records one scan round.
pub fn record_round(segments: u64, memtable_rows: u64, candidates: u64) {
    ROUNDS.with(|c| c.set(c.get() + 1));
    SEGMENTS.with(|c| c.set(c.get() + segments));
    MEMTABLE_ROWS.with(|c| c.set(c.get() + memtable_rows));
    CANDIDATES.with(|c| c.set(c.get() + candidates));
}

fn reset() {
    for counter in [&ROUNDS, &SEGMENTS, &MEMTABLE_ROWS, &CANDIDATES] {
        counter.with(|c| c.set(0));
    }
}

static mut PREVIOUS: pg_sys::ExplainOneQuery_hook_type = None;

fn now() -> libc::timespec {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut t) };
    t
}

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
            let buffers_before = pg_sys::pgBufferUsage;
            let start = now();
            let plan = pg_sys::pg_plan_query(query, query_string, cursor_options, params);
            let end = now();
            let mut duration: pg_sys::instr_time = std::mem::zeroed();
            let nanos = (end.tv_sec - start.tv_sec) * 1_000_000_000 + (end.tv_nsec - start.tv_nsec);
            duration.tv_sec = nanos / 1_000_000_000;
            duration.tv_nsec = nanos % 1_000_000_000;
            let mut buffers: pg_sys::BufferUsage = std::mem::zeroed();
            let buffers_ptr = if (*es).buffers {
                pg_sys::BufferUsageAccumDiff(
                    &raw mut buffers,
                    &raw const pg_sys::pgBufferUsage,
                    &raw const buffers_before,
                );
                &raw const buffers
            } else {
                std::ptr::null()
            };
            pg_sys::ExplainOnePlan(plan, into, es, query_string, params, query_env, &raw const duration, buffers_ptr);
        }
        let rounds = ROUNDS.with(Cell::get);
        if (*es).analyze && rounds > 0 && (*es).format == pg_sys::ExplainFormat::EXPLAIN_FORMAT_TEXT {
            let line = format!(
                "rounds={rounds} segments searched={} memtable rows={} candidates={}\0",
                SEGMENTS.with(Cell::get),
                MEMTABLE_ROWS.with(Cell::get),
                CANDIDATES.with(Cell::get)
            );
            pg_sys::ExplainPropertyText(c"Strata Scans".as_ptr(), line.as_ptr().cast(), es);
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
