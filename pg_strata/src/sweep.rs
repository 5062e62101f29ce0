//! Removing what no index needs any more: the directories and registrations of dropped indexes,
//! and garbage files inside live indexes' directories (inputs replaced by merges, bitmaps replaced
//! by VACUUM, files of failed or crashed writes), after `strata.file_grace_period` so that a
//! backend still reading an older manifest can open them.
//!
//! Which files are garbage is decided by [`strata_lsm::garbage`] under the index's manifest lock:
//! flushes and VACUUM write and publish their files while holding that lock, so a file the
//! manifest does not list is garbage, except the output of the merge the service itself is
//! building (passed in as in flight).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use strata_lsm::files::index_dirs;
use strata_lsm::garbage::{sweep_directory, GraceTracker};
use strata_lsm::registry;

use crate::access::state::{self, ROOT_DIR};
use crate::shmem;

/// The service's sweeper: remembers when each garbage file was first seen.
#[derive(Default)]
pub struct Sweeper {
    garbage: GraceTracker<PathBuf>,
}

impl Sweeper {
    /// One pass: dropped indexes, then garbage of every registered index (`in_flight` lists
    /// segment ids being written by a merge that is not published yet). Not while WAL is being
    /// replayed: relation files may be missing until replay recreates them.
    pub fn sweep(&mut self, in_flight: &[u64]) {
        if crate::fmgr::in_recovery() {
            return;
        }
        sweep_dropped();
        let now = Instant::now();
        let grace = Duration::from_secs(crate::gucs::FILE_GRACE_PERIOD.get().max(0) as u64);
        for slot in 0..shmem::MAX_INDEXES {
            let handle = {
                let lock = shmem::directory_lock(false);
                state::handle_of_slot(slot, &lock)
            };
            let Some(handle) = handle else { continue };
            // Under the manifest lock from listing to deleting: a file name can be written again
            // (a retried VACUUM rewrites the same bitmap generation) and published meanwhile.
            // An index whose lock is busy (a VACUUM, a recovery) is swept next time: the service
            // never waits here.
            let Some(_manifest_lock) = shmem::try_manifest_lock(slot) else { continue };
            sweep_directory(&mut self.garbage, &handle.dir(), in_flight, grace, now);
        }
        // Directories that are gone (dropped indexes) leave nothing to track.
        self.garbage.retain_scopes(|p| p.parent().is_some_and(std::path::Path::exists));
    }
}

/// Whether the index relation stored under `key` still exists (its main fork has data).
fn relation_exists(key: shmem::IndexKey) -> bool {
    // SAFETY: GetRelationPath is a pure path computation, called on the service's main thread.
    let path = unsafe { crate::pg_compat::relation_path(key.db, key.spc, key.relnode) };
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// Removes the directories and registrations of dropped indexes.
fn sweep_dropped() {
    let shared = shmem::shared();
    for slot in 0..shmem::MAX_INDEXES {
        let key = {
            let lock = shmem::directory_lock(false);
            state::handle_of_slot(slot, &lock).map(|h| h.key)
        };
        let Some(key) = key.filter(|&key| !relation_exists(key)) else { continue };
        let Some(_manifest_lock) = shmem::try_manifest_lock(slot) else { continue };
        {
            let lock = shmem::directory_lock(true);
            // Still the same, still without a relation (a relfilenode can be reused meanwhile).
            if registry::find(&shared.indexes, key, &lock) != Some(slot) || relation_exists(key) {
                continue;
            }
            shmem::slabs().release_index_locked(slot);
            shared.indexes[slot].in_use.store(0, Ordering::Release);
        }
        let _ = std::fs::remove_dir_all(state::index_dir(key));
    }
    for ((db, spc, relnode), path) in index_dirs(std::path::Path::new(ROOT_DIR)) {
        let key = shmem::IndexKey { db, spc, relnode };
        let registered = registry::find(&shared.indexes, key, &shmem::directory_lock(false)).is_some();
        if !registered && !relation_exists(key) {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}
