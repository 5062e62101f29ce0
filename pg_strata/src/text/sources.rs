//! The sources a bm25 index is searched over, in one consistent snapshot: its text segments at
//! the manifest generation read with its memtables (a backend-local [`SetCache`]), and its
//! memtables decoded incrementally ([`MemtableCache`], one per index in each backend). Both are
//! dropped when the index relation is invalidated (`access::invalidation`); no
//! PostgreSQL function is called while either is borrowed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use pgrx::PgSqlErrorCode;
use strata_lsm::directory::fs::FsDirectory;
use strata_lsm::files::IndexFiles;
use strata_lsm::segment_set::{SegmentSet, SetCache};
use strata_text::slab_cache::MemtableCache;
use strata_text::{Source, TextError, TextSegment};

use crate::access::state::{self, IndexHandle};
use crate::fmgr::error;
use crate::shmem::IndexKey;

thread_local! {
    static SEGMENTS: RefCell<SetCache<IndexKey, TextSegment>> = RefCell::new(SetCache::default());
    static MEMTABLES: RefCell<HashMap<IndexKey, MemtableCache>> = RefCell::new(HashMap::new());
    /// An invalidation found a cache in use: forget everything at the next use.
    static FORGET_ALL: Cell<bool> = const { Cell::new(false) };
}

/// Before a cache of `handle`'s index is used: a deferred [`forget_all_soon`], and the note that
/// `handle.key`'s entries belong to its relation.
fn before_use(handle: &IndexHandle) {
    if FORGET_ALL.replace(false) {
        SEGMENTS.with(|c| c.borrow_mut().clear());
        MEMTABLES.with(|c| c.borrow_mut().clear());
    }
    crate::access::cache_owners::note(handle);
}

/// The files of a bm25 index.
pub fn files(handle: &IndexHandle) -> IndexFiles<TextSegment> {
    IndexFiles::new(Arc::new(FsDirectory::new(handle.dir())))
}

/// The text segment set of `handle` at manifest generation `generation` (or newer).
pub fn segment_set(handle: &IndexHandle, generation: u64) -> Arc<SegmentSet<TextSegment>> {
    before_use(handle);
    SEGMENTS.with(|c| c.borrow_mut().get(handle.key, generation, || files(handle))).unwrap_or_else(|e| {
        error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata text segment unreadable: {e}"))
    })
}

/// Forgets the cached segments and memtables of `key` (after a rebuild of the index).
pub fn forget(key: IndexKey) {
    SEGMENTS.with(|c| c.borrow_mut().forget(&key));
    MEMTABLES.with(|c| c.borrow_mut().remove(&key));
}

/// Forgets the cached segments and memtables of `key` now (their files unmapped unless a scan
/// still holds the set), or everything at the next use if a cache is in use.
pub fn forget_soon(key: IndexKey) {
    let sets = SEGMENTS.with(|c| c.try_borrow_mut().map(|mut c| c.forget(&key)).is_ok());
    let memtables = MEMTABLES.with(|c| c.try_borrow_mut().map(|mut c| c.remove(&key)).is_ok());
    if !(sets && memtables) {
        FORGET_ALL.set(true);
    }
}

/// Forgets every cached text segment set and decoded memtable now, or at the next use if one
/// is in use.
pub fn forget_all_soon() {
    let sets = SEGMENTS.with(|c| c.try_borrow_mut().map(|mut c| c.clear()).is_ok());
    let memtables = MEMTABLES.with(|c| c.try_borrow_mut().map(|mut c| c.clear()).is_ok());
    if !(sets && memtables) {
        FORGET_ALL.set(true);
    }
}

fn corrupt(e: &TextError) -> ! {
    error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("pg_strata bm25 index: {e}"))
}

/// Runs `work` over every source of `handle`'s index: its segments, then its memtables (cached
/// rows, then rows finished past a slot still being written), each with the rows deleted now.
/// The memtables stay held (a reader of each) while `work` runs.
pub fn with_sources<R>(handle: &IndexHandle, work: impl FnOnce(&[Source<'_>]) -> R) -> R {
    let (mut memtables, generation) = state::snapshot(handle);
    let set = segment_set(handle, generation);
    // The set may be newer than the snapshot: a memtable it holds is read there only.
    memtables.release_held(|id| set.covers(id));
    MEMTABLES.with(|cache| {
        let mut cache = cache.borrow_mut();
        let decoded = cache.entry(handle.key).or_default();
        let rounds = decoded.for_round(&memtables[..]).unwrap_or_else(|e| corrupt(&e));
        let mut sources = Vec::with_capacity(set.segments.len() + 2 * rounds.len());
        for open in &set.segments {
            sources.push(Source::segment(&open.segment, open.deleted.as_ref()).unwrap_or_else(|e| corrupt(&e)));
        }
        for round in &rounds {
            let (rows, deleted) = &round.cached;
            sources.push(Source::memtable(rows, deleted.as_ref()).unwrap_or_else(|e| corrupt(&e)));
            if let Some((rows, deleted)) = &round.tail {
                sources.push(Source::memtable(rows, deleted.as_ref()).unwrap_or_else(|e| corrupt(&e)));
            }
        }
        work(&sources)
    })
}
