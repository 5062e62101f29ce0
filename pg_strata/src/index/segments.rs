//! The backend-local caches of the indexes' open segments ([`SetCache`], kept while the manifest
//! generation stays the same) and of their memtables' codes ([`CodesCache`], kept while the
//! memtables are in the index's snapshots), both dropped when the index relation is invalidated
//! (`access::invalidation`). No PostgreSQL function is called while either is borrowed. Vector
//! segments are built here too ([`build`], on a helper thread).

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use pgrx::PgSqlErrorCode;
use strata_engine::cancel::Cancel;
use strata_engine::segment::{BuiltSegment, Segment};
use strata_lsm::directory::fs::FsDirectory;
use strata_lsm::files::FileError;
use strata_lsm::memtable::Memtable;
use strata_lsm::scan::memtable_codes::{CodesCache, MemtableCodes};
use strata_lsm::scan::ScanQuery;
use strata_lsm::segment_set::SetCache;
use strata_lsm::segment_type::{BuildWork, SegmentType};
use strata_lsm::slabs::SlabMemory;
use strata_lsm::vector::VectorSegmentSet as SegmentSet;
use strata_lsm::vector::{VectorFiles, VectorRows};

use crate::access::state::IndexHandle;
use crate::fmgr::error;
use crate::shmem::IndexKey;

thread_local! {
    static CACHE: RefCell<SetCache<IndexKey, Segment>> = RefCell::new(SetCache::default());
    static CODES: RefCell<std::collections::HashMap<IndexKey, CodesCache>> = RefCell::new(std::collections::HashMap::new());
    /// An invalidation found a cache in use: forget everything at the next use.
    static FORGET_ALL: Cell<bool> = const { Cell::new(false) };
}

/// Before a cache of `handle`'s index is used: a deferred [`forget_all_soon`], and the note that
/// `handle.key`'s entries belong to its relation.
fn before_use(handle: &IndexHandle) {
    if FORGET_ALL.replace(false) {
        CACHE.with(|c| c.borrow_mut().clear());
        CODES.with(|c| c.borrow_mut().clear());
    }
    crate::access::cache_owners::note(handle);
}

/// The files of a vector index.
pub fn files(handle: &IndexHandle) -> VectorFiles {
    VectorFiles::new(Arc::new(FsDirectory::new(handle.dir())))
}

/// Builds a segment from `rows` with the index's configuration, on a helper
/// thread; `between` runs on the calling thread while the build goes on (see
/// [`crate::threads::run_on_helper`]: a backend checks for interrupts there, the service for
/// shutdown).
pub fn build(
    handle: &IndexHandle,
    rows: VectorRows,
    threads: usize,
    between: impl FnMut(&Cancel),
) -> Result<BuiltSegment, FileError> {
    let files = files(handle);
    let work = BuildWork::new(threads);
    let cancel = work.cancel.clone();
    let build = || Segment::build(&files, &handle.config, rows, &work);
    crate::threads::run_on_helper(&cancel, build, between)
        .map_err(|message| FileError::Build { kind: "helper thread", message })?
}

/// The codes to search `memtables` of `handle` with for `query` (aligned with `memtables`),
/// encoding on `pool` what grew (see [`CodesCache::for_round`]).
pub fn memtable_codes<M: SlabMemory + ?Sized>(
    handle: &IndexHandle,
    memtables: &[Memtable<'_, M>],
    query: &ScanQuery,
    pool: Option<&rayon::ThreadPool>,
) -> Vec<Option<Arc<MemtableCodes>>> {
    before_use(handle);
    CODES.with(|c| {
        c.borrow_mut()
            .entry(handle.key)
            .or_insert_with(|| CodesCache::new(&handle.config))
            .for_round(memtables, query, pool)
    })
}

/// The segment set of `handle` at manifest generation `generation` (or newer), opening what
/// changed since the cached set.
pub fn segment_set(handle: &IndexHandle, generation: u64) -> Arc<SegmentSet> {
    before_use(handle);
    CACHE.with(|c| c.borrow_mut().get(handle.key, generation, || files(handle))).unwrap_or_else(|e| {
        error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata segment unreadable: {e}"))
    })
}

/// Forgets the cached segments of `key` (after a rebuild of the index).
pub fn forget(key: IndexKey) {
    CACHE.with(|c| c.borrow_mut().forget(&key));
    CODES.with(|c| c.borrow_mut().remove(&key));
}

/// Forgets the cached segments and codes of `key` now (their files unmapped unless a scan
/// still holds the set), or everything at the next use if a cache is in use.
pub fn forget_soon(key: IndexKey) {
    let sets = CACHE.with(|c| c.try_borrow_mut().map(|mut c| c.forget(&key)).is_ok());
    let codes = CODES.with(|c| c.try_borrow_mut().map(|mut c| c.remove(&key)).is_ok());
    if !(sets && codes) {
        FORGET_ALL.set(true);
    }
}

/// Forgets every cached segment set and code cache now, or at the next use if one is in use.
pub fn forget_all_soon() {
    let sets = CACHE.with(|c| c.try_borrow_mut().map(|mut c| c.clear()).is_ok());
    let codes = CODES.with(|c| c.try_borrow_mut().map(|mut c| c.clear()).is_ok());
    if !(sets && codes) {
        FORGET_ALL.set(true);
    }
}
