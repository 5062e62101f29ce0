//! `ambuild` / `ambuildempty`: CREATE INDEX, REINDEX, TRUNCATE.
//!
//! The heap is scanned once into chunks bounded by `maintenance_work_mem`
//! ([`strata_lsm::build_rows`]): vectors past what fits in memory spill to an unnamed file in the
//! index directory, and each chunk becomes one segment (built with `strata.build_threads`
//! threads), so memory stays bounded whatever the table size. The index relation itself gets its status pages (metadata
//! and group catalog, see `status`), written before anything else so that its main fork exists
//! (the index service removes files of indexes whose relation is gone).

use std::sync::atomic::Ordering;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::build_rows::{BuildBudget, BuildChunks, BuildRowsError};
use strata_lsm::directory::fs::FsDirectory;
use strata_lsm::vector::{VectorFiles, VectorRows};

use super::publish::{self, raise};
use super::state::{self, IndexHandle};
use super::status;
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
    /// Builds `rows` into a segment and publishes it. The chunk is a group of the status pages'
    /// membership log: registered with its TIDs before the segment exists, the segment covers
    /// it, and it is settled once the segment is published — so standbys and restored backups,
    /// which replay the log, know which rows the segment holds.
    fn build_chunk(&mut self, rows: VectorRows) {
        report_phase(PHASE_BUILDING_SEGMENT);
        self.segments += 1;
        if self.segments == 2 {
            pgrx::notice!(
                "pg_strata: index \"{}\" is built in several segments of {} rows: the build's working memory for more rows exceeds maintenance_work_mem",
                // SAFETY: the relation being built, open and locked by CREATE INDEX.
                unsafe { super::relation_name(self.index) },
                rows.ids.len()
            );
        }
        let threads = crate::gucs::BUILD_THREADS.get() as usize;
        let tids = rows.ids.clone();
        // A cancel (pg_cancel_backend, statement_timeout) raises its error from wait_a_moment;
        // the build thread is then cancelled and joined before the error propagates.
        let built =
            publish::build(&self.handle, rows, threads, |_| state::wait_a_moment()).unwrap_or_else(|e| raise(&e));
        self.index_tuples += built.meta().rows as f64;
        let id = self.handle.shared().next_id.fetch_add(1, Ordering::AcqRel);
        // SAFETY: `index` is the relation being built, open and locked by CREATE INDEX; the status
        // page locks are taken before the manifest lock and released before it is taken.
        unsafe {
            let meta = status::MetaLock::acquire(self.index, true);
            meta.register_memtable(id);
            meta.append_many(id, &tids);
        }
        {
            let _manifest_lock = crate::shmem::manifest_lock(self.handle.slot);
            publish::publish_segment(&self.handle, &built, id, vec![id], || {}).unwrap_or_else(|e| raise(&e));
        }
        // SAFETY: `index` is the relation being built, open and locked by CREATE INDEX; the
        // manifest lock was released at the end of the block above, so lock order holds.
        unsafe { status::MetaLock::acquire(self.index, true) }.settle(&[id]);
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
                strata_engine::segment::IndexKind::Hnsw { .. } => {
                    ", beside which it keeps the graph's links and traversal codes"
                }
                _ => "",
            };
            pgrx::notice!(
                "pg_strata: the vectors of index \"{}\" exceed maintenance_work_mem; the build continues from a spill file in the index directory{beside}",
                super::relation_name(index)
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

/// Creates a fresh, empty index directory and registers the index (a bm25 index with the text
/// search configuration `text_config` its status pages store, else 0); returns its handle. The
/// directory gets the node marker (its files are this node's own), except under pg_upgrade:
/// there the schema restore builds every index on an empty table, and pg_upgrade then puts the
/// old cluster's status pages in place (the relfilenode is kept). Without the marker, the index's
/// first use in the upgraded cluster treats these files as inherited and derives the index from
/// its status pages and the table, as a restored backup does, unless the old cluster's directory
/// (with its marker) was copied in its place.
///
/// # Safety
/// `index` must be a valid, open relation of access method strata.
pub unsafe fn initialise(index: pg_sys::Relation, text_config: u32) -> IndexHandle {
    // SAFETY: `index` is the relation being built, passed open and locked by PostgreSQL to strata's
    // or bm25's ambuild (this function's only callers), so reading its rd_node is valid.
    let key = unsafe { state::key_of(index) };
    // SAFETY: `index` is the relation being built, open and locked (see above), as `create_files`
    // needs.
    let manifest = unsafe { create_files(index, key) };
    // SAFETY: a plain flag, set once at postmaster start.
    if !unsafe { pg_sys::IsBinaryUpgrade } {
        super::standby::write_marker_in(&state::index_dir(key));
    }
    // SAFETY: `index` is open (this function's contract), so `*index` reads.
    state::register(key, unsafe { (*index).rd_id }, text_config, &manifest, true)
}

/// Creates a fresh index directory for `index` (removing an old one) holding an empty manifest,
/// without the node marker; returns the manifest.
///
/// # Safety
/// `index` must be a valid, open relation of access method strata, with key `key`.
pub unsafe fn create_files(index: pg_sys::Relation, key: crate::shmem::IndexKey) -> strata_lsm::manifest::Manifest {
    // SAFETY: `index` is an open strata or bm25 index (ambuild's relation via `initialise`, or the
    // one `opening::open` was given, this function's contract), which is what `config_of` requires.
    let config = unsafe { super::config_of(index) };
    let dir = state::index_dir(key);
    let recreated = (|| {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)
    })();
    if let Err(e) = recreated {
        error(
            publish::sqlstate(e.kind() == std::io::ErrorKind::StorageFull),
            format!("pg_strata: {}: {e}", dir.display()),
        );
    }
    let files = VectorFiles::new(std::sync::Arc::new(FsDirectory::new(&dir)));
    let manifest = files.create(config).unwrap_or_else(|e| raise(&e));
    super::segments::forget(key);
    crate::text::sources::forget(key);
    manifest
}

/// Refuses an index on a temporary table: the index service identifies files by (database,
/// tablespace, relfilenode), which does not name a temporary relation's backend-local files.
///
/// # Safety
/// `index` must be a valid, open relation.
pub unsafe fn refuse_temporary(index: pg_sys::Relation) {
    // SAFETY: `index` is the open relation PostgreSQL passed to strata's or bm25's ambuild (the only
    // callers), and rd_rel is set for every open relation.
    if unsafe { (*(*index).rd_rel).relpersistence } as u8 == pg_sys::RELPERSISTENCE_TEMP {
        error(
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "pg_strata indexes on temporary tables are not supported; use an unlogged table",
        );
    }
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
        refuse_temporary(index);
        // The status pages come first: the service treats an index whose main fork is empty as
        // dropped.
        super::status::initialise(index, pg_sys::ForkNumber::MAIN_FORKNUM, 0, 0);
        let handle = initialise(index, 0);
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

/// `ambuildempty`: the init fork of an unlogged index (called after `ambuild`). Its status pages
/// carry [`FLAG_INIT_FORK`](strata_lsm::status::FLAG_INIT_FORK): after a crash PostgreSQL resets
/// the main fork to this image, and recovery then drops every segment of the emptied table. A
/// bm25 index's text search configuration is the one `ambuild` stored.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    // SAFETY: PostgreSQL calls this with an open relation whose init fork is empty, after ambuild
    // registered the index under its storage key.
    unsafe {
        let text_config =
            state::find_ready(state::key_of(index)).map_or(0, |h| h.shared().text_config.load(Ordering::Acquire));
        let flags = strata_lsm::status::FLAG_INIT_FORK;
        super::status::initialise(index, pg_sys::ForkNumber::INIT_FORKNUM, flags, text_config);
    }
}
