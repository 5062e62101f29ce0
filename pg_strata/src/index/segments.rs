//! The backend-local cache of the indexes' open segments ([`SetCache`]), kept while the manifest
//! generation stays the same.

use std::cell::RefCell;
use std::sync::Arc;

use pgrx::PgSqlErrorCode;
use strata_engine::segment::Segment;
use strata_lsm::segment_set::SetCache;
use strata_lsm::vector::VectorSegmentSet as SegmentSet;

use super::state::IndexHandle;
use crate::fmgr::error;
use crate::shmem::IndexKey;

thread_local! {
    static CACHE: RefCell<SetCache<IndexKey, Segment>> = RefCell::new(SetCache::default());
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
}
