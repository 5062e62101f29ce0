//! What CREATE INDEX, REINDEX and TRUNCATE do the same for every kind: the index directory and
//! its registration ([`initialise`]), the build-chunk protocol ([`publish_chunk`]) and
//! `ambuildempty`. Each access method's `ambuild` scans the table into chunks of its own rows
//! and builds each into a segment; the status pages come first (the index service treats an
//! index whose main fork is empty as dropped).

use std::sync::atomic::Ordering;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::directory::fs::FsDirectory;
use strata_lsm::files::IndexFiles;

use super::dispatch;
use super::kind::{BuiltOf, Kind};
use super::publish::{self, raise};
use super::state::{self, IndexHandle};
use super::status;
use super::AccessKind;
use crate::fmgr::error;

/// Publishes one chunk of CREATE INDEX, built into `built` from the rows of heap TIDs `tids`:
/// the chunk becomes a group of the status pages' membership log, registered with its TIDs
/// before the segment exists; the segment covers it; the group is settled once the segment is
/// published — so standbys and restored backups, which replay the log, know which rows the
/// segment holds.
///
/// # Safety
/// `index` must be the relation being built (open and locked by CREATE INDEX) of `handle`; no
/// status page or manifest lock held.
pub unsafe fn publish_chunk<K: Kind>(index: pg_sys::Relation, handle: &IndexHandle, tids: &[u64], built: &BuiltOf<K>) {
    let id = handle.shared().next_id.fetch_add(1, Ordering::AcqRel);
    // SAFETY: `index` is the relation being built, open and locked by CREATE INDEX (this
    // function's contract); the status page locks are taken before the manifest lock and
    // released before it is taken.
    unsafe {
        let meta = status::MetaLock::acquire(index, true);
        meta.register_memtable(id);
        meta.append_many(id, tids);
    }
    {
        let _manifest_lock = crate::shmem::manifest_lock(handle.slot);
        let floor = publish::next_id_floor(handle);
        let published = K::files(handle).publish_segment(built, id, vec![id], floor, publish::publisher(handle, || {}));
        publish::panic_if_unsynced(published).unwrap_or_else(|e| raise(&e));
    }
    // SAFETY: `index` is the relation being built (this function's contract); the manifest lock
    // was released at the end of the block above, so lock order holds.
    unsafe { status::MetaLock::acquire(index, true) }.settle(&[id]);
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
        crate::access::standby::write_marker_in(&state::index_dir(key));
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
    let config = unsafe { super::dispatch::config_of(index) };
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
    dispatch::dispatch!(AccessKind::of(&config), K => {
        let files = IndexFiles::<<K as Kind>::Segment>::new(std::sync::Arc::new(FsDirectory::new(&dir)));
        let manifest = files.create(config).unwrap_or_else(|e| raise(&e));
        K::forget(key);
        manifest
    })
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
        crate::access::status::initialise(index, pg_sys::ForkNumber::INIT_FORKNUM, flags, text_config);
    }
}
