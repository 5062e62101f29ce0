//! Opening an index relation: the registration of its shared state on its first use since the
//! server started, and crash recovery.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::directory::fs::FsDirectory;
use strata_lsm::manifest::{IndexConfig, Manifest};

use super::state::{self, IndexHandle};
use super::status;
use crate::fmgr::error;

/// The handle of an index relation. On its first use since the server started, registers it
/// from its manifest and runs crash recovery (under the metadata page's exclusive lock, so
/// concurrent first users wait for it).
///
/// # Safety
/// `index` must be a valid, open relation of access method strata.
pub unsafe fn open(index: pg_sys::Relation) -> IndexHandle {
    // SAFETY: guaranteed by the caller.
    let key = unsafe { state::key_of(index) };
    if let Some(handle) = state::find_ready(key) {
        return handle;
    }
    // Recovery reads the heap: take its lock now, never while holding the metadata page (the
    // deadlock detector cannot see buffer locks). Then make room for the memtables it may refill.
    // SAFETY: `index` is an open index relation; the lock lasts until the transaction ends.
    unsafe {
        pg_sys::LockRelationOid((*(*index).rd_index).indrelid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let listed = status::listed(index).len();
        state::wait_for_free_slabs(listed);
    }
    // SAFETY: `index` is an open strata index.
    let meta = unsafe { status::MetaLock::acquire(index, true) };
    if let Some(handle) = state::find_ready(key) {
        return handle;
    }
    let handle = match Manifest::<IndexConfig>::load(&FsDirectory::new(state::index_dir(key))) {
        // SAFETY: `index` is a valid, open relation.
        Ok(Some(manifest)) => state::register(key, unsafe { (*index).rd_id }, &manifest, false),
        Ok(None) => error(
            PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
            format!("pg_strata index files are missing in {}; REINDEX the index", state::index_dir(key).display()),
        ),
        Err(e) => error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("cannot read the index manifest: {e}")),
    };
    if super::standby::in_recovery() {
        // A standby derives its index from the replayed membership log, scan by scan.
        // SAFETY: as above; `meta` is the exclusively locked metadata page.
        unsafe { super::standby::open(&handle, &meta) };
        return handle;
    }
    // SAFETY: as above; `meta` is the exclusively locked metadata page.
    unsafe { super::recovery::recover(index, &handle, &meta) };
    drop(meta);
    // SAFETY: as above.
    unsafe { state::settle_flushed(index, &handle) };
    handle
}
