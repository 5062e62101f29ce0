//! PostgreSQL's side of publishing (the protocol itself is [`strata_lsm::files`]): the shared
//! memory a new manifest generation is published in, and the SQL errors and PANIC a failed file
//! operation becomes.

use std::sync::atomic::Ordering;

use pgrx::PgSqlErrorCode;
use strata_lsm::files::FileError;
use strata_lsm::manifest::Manifest;

use super::state::IndexHandle;
use crate::shmem;

/// The id floor every manifest written for `handle` keeps: ids handed out from shared memory.
pub fn next_id_floor(handle: &IndexHandle) -> u64 {
    handle.shared().next_id.load(Ordering::Acquire)
}

/// Makes `manifest`'s generation the one scans of `handle`'s index read. The caller holds the
/// directory lock exclusively (scans read the generation and the memtables under it).
pub fn store_generation_locked(handle: &IndexHandle, manifest: &Manifest) {
    handle.shared().manifest_generation.store(manifest.generation, Ordering::Release);
}

/// Step 3 of publishing: stores the new generation in shared memory under the directory lock,
/// together with `on_publish`'s memtable state change.
pub fn publisher<'a>(handle: &'a IndexHandle, on_publish: impl FnOnce() + 'a) -> impl FnOnce(&Manifest) + 'a {
    move |manifest| {
        let _directory = shmem::directory_lock(true);
        store_generation_locked(handle, manifest);
        on_publish();
    }
}

/// [`publisher`] without a memtable change, for work that publishes several generations in a
/// row (VACUUM, one per segment), merges and recovery.
pub fn generation_publisher(handle: &IndexHandle) -> impl FnMut(&Manifest) + '_ {
    move |manifest| {
        let _directory = shmem::directory_lock(true);
        store_generation_locked(handle, manifest);
    }
}

/// PANICs for a manifest renamed into place whose directory sync failed, as PostgreSQL does
/// when an fsync of its own files fails: the new manifest is what every process reads, it may
/// not survive an operating-system crash, and it cannot be taken back; the crash restart's
/// recovery (status pages ⋈ manifest) makes the index equal to the heap again, whichever
/// manifest the disk keeps. Other errors are returned.
pub fn panic_if_unsynced<T>(result: Result<T, FileError>) -> Result<T, FileError> {
    result.map_err(panic_on_unsynced)
}

/// [`panic_if_unsynced`] for an error.
pub fn panic_on_unsynced(e: FileError) -> FileError {
    if e.is_unsynced_manifest() {
        pgrx::ereport!(PANIC, PgSqlErrorCode::ERRCODE_IO_ERROR, format!("pg_strata: {e}"));
    }
    e
}

/// The SQLSTATE of a failed file operation: `ERRCODE_DISK_FULL` when the disk was full,
/// `ERRCODE_IO_ERROR` otherwise.
pub fn sqlstate(disk_full: bool) -> PgSqlErrorCode {
    if disk_full {
        PgSqlErrorCode::ERRCODE_DISK_FULL
    } else {
        PgSqlErrorCode::ERRCODE_IO_ERROR
    }
}

/// [`sqlstate`] of a failure kept as text (failures of background work are kept as text in
/// shared memory).
pub fn error_code(text: &str) -> PgSqlErrorCode {
    sqlstate(
        text.contains(&std::io::Error::from(std::io::ErrorKind::StorageFull).to_string())
            || text.contains(&std::io::Error::from_raw_os_error(libc::ENOSPC).to_string()),
    )
}

/// Raises a failed file operation as an SQL error ([`sqlstate`]).
pub fn raise(e: &FileError) -> ! {
    crate::fmgr::error(sqlstate(e.is_disk_full()), format!("pg_strata: {e}"))
}
