//! The backend-local cache of an index's open segments ([`SegmentSet`]), kept while the
//! manifest generation stays the same.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use pgrx::PgSqlErrorCode;
use strata_lsm::vector::VectorSegmentSet as SegmentSet;

use super::state::IndexHandle;
use crate::fmgr::error;
use crate::shmem::IndexKey;

thread_local! {
    static CACHE: RefCell<HashMap<IndexKey, Arc<SegmentSet>>> = RefCell::new(HashMap::new());
}

/// The segment set of `handle` at manifest generation `generation` (or newer), opening what
/// changed since the cached set.
pub fn segment_set(handle: &IndexHandle, generation: u64) -> Arc<SegmentSet> {
    let previous = CACHE.with(|c| c.borrow().get(&handle.key).cloned());
    if let Some(cached) = &previous {
        if cached.generation >= generation {
            return Arc::clone(cached);
        }
    }
    let set = match SegmentSet::open(&handle.files(), previous.as_deref()) {
        Ok(set) => Arc::new(set),
        Err(e) => error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata segment unreadable: {e}")),
    };
    CACHE.with(|c| c.borrow_mut().insert(handle.key, Arc::clone(&set)));
    set
}

/// Forgets the cached segments of `key` (after a rebuild of the index).
pub fn forget(key: IndexKey) {
    CACHE.with(|c| c.borrow_mut().remove(&key));
}
