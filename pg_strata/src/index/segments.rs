//! The backend-local caches of the indexes' open segments ([`SetCache`], kept while the manifest
//! generation stays the same) and of their memtables' codes ([`CodesCache`], kept while the
//! memtables are in the index's snapshots).

use std::cell::RefCell;
use std::sync::Arc;

use pgrx::PgSqlErrorCode;
use strata_engine::segment::Segment;
use strata_lsm::memtable::Memtable;
use strata_lsm::scan::memtable_codes::{CodesCache, MemtableCodes};
use strata_lsm::scan::ScanQuery;
use strata_lsm::segment_set::SetCache;
use strata_lsm::slabs::SlabMemory;
use strata_lsm::vector::VectorSegmentSet as SegmentSet;

use super::state::IndexHandle;
use crate::fmgr::error;
use crate::shmem::IndexKey;

thread_local! {
    static CACHE: RefCell<SetCache<IndexKey, Segment>> = RefCell::new(SetCache::default());
    static CODES: RefCell<std::collections::HashMap<IndexKey, CodesCache>> = RefCell::new(std::collections::HashMap::new());
}

/// The codes to search `memtables` of `handle` with for `query` (aligned with `memtables`),
/// encoding on `pool` what grew (see [`CodesCache::for_round`]).
pub fn memtable_codes<M: SlabMemory + ?Sized>(
    handle: &IndexHandle,
    memtables: &[Memtable<'_, M>],
    query: &ScanQuery,
    pool: Option<&rayon::ThreadPool>,
) -> Vec<Option<Arc<MemtableCodes>>> {
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
    CACHE.with(|c| c.borrow_mut().get(handle.key, generation, || handle.files())).unwrap_or_else(|e| {
        error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata segment unreadable: {e}"))
    })
}

/// Forgets the cached segments of `key` (after a rebuild of the index).
pub fn forget(key: IndexKey) {
    CACHE.with(|c| c.borrow_mut().forget(&key));
    CODES.with(|c| c.borrow_mut().remove(&key));
}
