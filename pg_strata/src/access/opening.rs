//! Opening an index relation: the registration of its shared state on its first use since the
//! server started, and crash recovery.

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::directory::fs::FsDirectory;
use strata_lsm::files::node_marker_present;
use strata_lsm::manifest::{IndexConfig, Manifest};
use strata_lsm::recovery::opening::{self, MissingFiles, Opening};

use super::state::{self, IndexHandle};
use super::{standby, status};
use crate::fmgr::{error, in_recovery};

/// The handle of an index relation. On its first use since the server started, registers it
/// from its manifest and runs crash recovery (under the metadata page's exclusive lock, so
/// concurrent first users wait for it).
///
/// # Safety
/// `index` must be a valid, open relation of access method strata.
pub unsafe fn open(index: pg_sys::Relation) -> IndexHandle {
    // SAFETY: `index` is an open relation (this function's contract), so `rd_rel` is valid.
    if unsafe { (*(*index).rd_rel).relkind } as u8 == pg_sys::RELKIND_PARTITIONED_INDEX {
        // A partitioned index has no storage: its partitions' indexes hold the entries.
        // SAFETY: `index` is an open relation (this function's contract), so `rd_rel` is valid;
        // the name is a NUL-terminated NameData.
        let name = unsafe { std::ffi::CStr::from_ptr((*(*index).rd_rel).relname.data.as_ptr()) };
        error(
            PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
            format!(
                "pg_strata: \"{}\" is a partitioned index, which holds no entries of its own; use the \
                 indexes of its partitions",
                name.to_string_lossy()
            ),
        );
    }
    // SAFETY: `index` is an open relation (this function's contract: AM callbacks pass PostgreSQL's
    // Relation, other callers open it with a lock first), which is all `key_of` needs.
    let key = unsafe { state::key_of(index) };
    if let Some(handle) = state::find_ready(key) {
        let derived = handle.shared().derived.load(std::sync::atomic::Ordering::Acquire) == 1;
        if opening::finishes_promotion(derived, in_recovery()) {
            // The first use after promotion.
            // SAFETY: `handle` was found by `index`'s own storage key, so `index` is its open strata
            // index (this function's contract); nothing here holds a status page or manifest lock.
            unsafe { standby::finish(index, &handle) };
        }
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
    let dir = state::index_dir(key);
    // SAFETY: `index` is a valid, open relation.
    let logged = unsafe { (*(*index).rd_rel).relpersistence } as u8 == pg_sys::RELPERSISTENCE_PERMANENT;
    let manifest = match Manifest::<IndexConfig>::load(&FsDirectory::new(&dir)) {
        Ok(Some(manifest)) => manifest,
        // The membership log and the heap hold the whole index: a node without its files (a
        // standby that replayed CREATE INDEX, a restore of a backup taken before it) derives it.
        Ok(None) => match opening::on_missing_files(logged) {
            // SAFETY: `index` is a valid, open strata relation (this function's contract), as
            // `create_files` needs.
            MissingFiles::Create => unsafe { super::build::create_files(index, key) },
            MissingFiles::Refuse => error(
                PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
                format!("pg_strata index files are missing in {}; REINDEX the index", dir.display()),
            ),
        },
        Err(e) => error(PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED, format!("cannot read the index manifest: {e}")),
    };
    let way = opening::choose(logged, in_recovery(), node_marker_present(&dir));
    // A bm25 index tokenises with the configuration its status pages store (replicated with them).
    // SAFETY: `index` is an open index on the backend's main thread inside a transaction.
    let text_config = unsafe { super::dispatch::text_config_at_open(index, meta.meta().text_config) };
    // SAFETY: `index` is a valid, open relation (this function's contract), so `*index` reads.
    let handle = state::register(key, unsafe { (*index).rd_id }, text_config, &manifest, false);
    if let Opening::Derive { finish_now } = way {
        // A standby derives its index from the replayed membership log, scan by scan; files
        // inherited from another node (no marker) are verified and completed the same way.
        // SAFETY: `handle` was registered for `index` just above, on the backend's main thread in
        // a transaction; `meta` is the exclusively locked metadata page, as `standby::open` needs.
        unsafe { standby::open(&handle, &meta) };
        drop(meta);
        if finish_now {
            // SAFETY: `index` is the open strata index of `handle` (registered above); `meta` was
            // dropped, so no status page lock is held any more, as `finish` requires.
            unsafe { standby::finish(index, &handle) };
        }
        return handle;
    }
    // SAFETY: `index` is the open strata index of `handle` (registered above, this function's
    // contract), on the main thread in a transaction; `meta` is the exclusively locked metadata
    // page, as `recover` needs.
    unsafe { super::recovery::recover(index, &handle, &meta) };
    drop(meta);
    // SAFETY: `index` is the open strata index of `handle`; `meta` was dropped, so no status page
    // lock is held, as `settle_flushed` requires.
    unsafe { state::settle_flushed(index, &handle) };
    handle
}
