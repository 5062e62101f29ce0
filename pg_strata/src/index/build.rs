//! `ambuild` of a vector index: CREATE INDEX, REINDEX, TRUNCATE.
//!
//! The heap is scanned once into chunks bounded by `maintenance_work_mem`
//! ([`strata_lsm::build_rows`]): vectors past what fits in memory spill to an unnamed file in the
//! index directory, and each chunk becomes one segment (built with `strata.build_threads`
//! threads) published by the core's build-chunk protocol ([`crate::access::build`]), so memory
//! stays bounded whatever the table size. The index relation itself gets its status pages
//! (metadata and group catalog, see `access::status`), written before anything else so that its
//! main fork exists (the index service removes files of indexes whose relation is gone).

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::build_rows::{BuildBudget, BuildChunks, BuildRowsError};
use strata_lsm::vector::VectorRows;

use crate::access::publish::{self, raise};
use crate::access::state::{self, IndexHandle};
use crate::access::status;
use crate::fmgr::error;
use crate::memtable::pack_tid;

struct BuildState {
    index: pg_sys::Relation,
    handle: IndexHandle,
    column: strata_engine::store::ColumnType,
    chunks: BuildChunks,
    heap_tuples: f64,
    index_tuples: f64,
    /// Segments built so far.
    segments: u32,
}

impl BuildState {
    /// Builds `rows` into a segment and publishes it as a group of the membership log
    /// ([`crate::access::build::publish_chunk`]).
    fn build_chunk(&mut self, rows: VectorRows) {
        report_phase(PHASE_BUILDING_SEGMENT);
        self.segments += 1;
        if self.segments == 2 {
            pgrx::notice!(
                "pg_strata: index \"{}\" is built in several segments of {} rows: the build's working memory for more rows exceeds maintenance_work_mem",
                // SAFETY: the relation being built, open and locked by CREATE INDEX.
                unsafe { crate::access::relation_name(self.index) },
                rows.ids.len()
            );
        }
        let threads = crate::gucs::BUILD_THREADS.get() as usize;
        let tids = rows.ids.clone();
        // A cancel (pg_cancel_backend, statement_timeout) raises its error from wait_a_moment;
        // the build thread is then cancelled and joined before the error propagates.
        let built = super::segments::build(&self.handle, rows, threads, |_| state::wait_a_moment())
            .unwrap_or_else(|e| raise(&e));
        self.index_tuples += built.meta().rows as f64;
        // SAFETY: `index` is the relation being built, open and locked by CREATE INDEX.
        unsafe { crate::access::build::publish_chunk::<super::kind::Vector>(self.index, &self.handle, &tids, &built) };
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn build_callback(
    index: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    _tuple_is_alive: bool,
    state: *mut std::ffi::c_void,
) {
    // SAFETY: PostgreSQL passes our BuildState pointer back, plus one value/isnull pair per
    // index column and a valid TID.
    unsafe {
        let state = &mut *state.cast::<BuildState>();
        state.heap_tuples += 1.0;
        if *isnull {
            return;
        }
        let vector = super::keys::row_values(index, state.column, &state.handle.config, *values);
        super::keys::check_indexable(index, state.handle.config.element, &vector);
        let row = super::keys::memtable_row(index, &state.handle, vector, values, isnull);
        let spilling = state.chunks.spilling();
        let chunk = state.chunks.push(pack_tid(*tid), &row).unwrap_or_else(|e| build_rows_error(&e));
        if !spilling && state.chunks.spilling() && state.chunks.spilled_chunks() == 0 {
            let beside = match state.handle.config.kind {
                strata_lsm::manifest::ConfigKind::Vector(strata_engine::segment::IndexKind::Hnsw { .. }) => {
                    ", beside which it keeps the graph's links and traversal codes"
                }
                _ => "",
            };
            pgrx::notice!(
                "pg_strata: the vectors of index \"{}\" exceed maintenance_work_mem; the build continues from a spill file in the index directory{beside}",
                crate::access::relation_name(index)
            );
        }
        pg_sys::pgstat_progress_update_param(pg_sys::PROGRESS_CREATEIDX_TUPLES_DONE as i32, state.heap_tuples as i64);
        if let Some(rows) = chunk {
            state.build_chunk(rows);
        }
    }
}

/// Build sub-phase: scanning the table and collecting vectors.
const PHASE_LOADING: i64 = 2;
/// Build sub-phase: building and writing a segment from the collected vectors.
const PHASE_BUILDING_SEGMENT: i64 = 3;

fn report_phase(phase: i64) {
    // SAFETY: progress reporting from the backend running CREATE INDEX.
    unsafe { pg_sys::pgstat_progress_update_param(pg_sys::PROGRESS_CREATEIDX_SUBPHASE as i32, phase) };
}

/// `ambuildphasename`: names of the sub-phases shown in `pg_stat_progress_create_index`.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ambuildphasename(phase: i64) -> *mut std::ffi::c_char {
    let name: &'static std::ffi::CStr = match phase {
        PHASE_LOADING => c"loading tuples",
        PHASE_BUILDING_SEGMENT => c"building segment",
        _ => return std::ptr::null_mut(),
    };
    name.as_ptr().cast_mut()
}

/// Raises a failure to collect the build's rows: a row that is not the index's (data
/// exception), or the spill file's error (disk full or I/O error).
fn build_rows_error(e: &BuildRowsError) -> ! {
    let code = match e {
        BuildRowsError::WrongDimensions(_) => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        BuildRowsError::Spill { source, .. } => publish::sqlstate(source.kind() == std::io::ErrorKind::StorageFull),
    };
    error(code, format!("pg_strata: {e}"))
}

/// The build's budget: `maintenance_work_mem`.
fn build_budget(config: &strata_lsm::manifest::IndexConfig) -> BuildBudget {
    // SAFETY: reading a GUC variable from the backend's main thread.
    BuildBudget::new(config, unsafe { pg_sys::maintenance_work_mem } as usize * 1024)
}

/// `ambuild`.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ambuild(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
) -> *mut pg_sys::IndexBuildResult {
    // SAFETY: PostgreSQL calls ambuild with open, locked relations and the IndexInfo of `index`.
    unsafe {
        crate::access::build::refuse_temporary(index);
        // The status pages come first: the service treats an index whose main fork is empty as
        // dropped.
        status::initialise(index, pg_sys::ForkNumber::MAIN_FORKNUM, 0, 0);
        let handle = crate::access::build::initialise(index, 0);
        report_phase(PHASE_LOADING);
        let spill_dir = state::index_dir(handle.key);
        let chunks = BuildChunks::new(&handle.config, build_budget(&handle.config), Some(spill_dir));
        let mut state = BuildState {
            index,
            column: super::column_of(index),
            handle,
            chunks,
            heap_tuples: 0.0,
            index_tuples: 0.0,
            segments: 0,
        };
        pg_sys::table_index_build_scan(
            heap,
            index,
            index_info,
            true,
            true,
            Some(build_callback),
            (&raw mut state).cast(),
            std::ptr::null_mut(),
        );
        if let Some(rows) = state.chunks.finish().unwrap_or_else(|e| build_rows_error(&e)) {
            state.build_chunk(rows);
        }
        let result =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()).cast::<pg_sys::IndexBuildResult>();
        (*result).heap_tuples = state.heap_tuples;
        (*result).index_tuples = state.index_tuples;
        result
    }
}
