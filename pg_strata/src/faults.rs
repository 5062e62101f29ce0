//! Fault injection into pg_strata's file writes, for tests (cargo feature `fault-injection`).
//!
//! A superuser sets a fault with `strata_inject_fault(step, file_kind, error, times)`: the next
//! `times` writes of that kind of file (segments, deletion bitmaps, the manifest; or any) fail at
//! that step (create, write, fsync, rename, fsync_dir; or any) with that error (ENOSPC, EIO).
//! File kind `status` (never included in `any`) makes the next `times` settles of flushed groups
//! in the status pages fail instead ([`strata_lsm::directory::faults::check_settle`]).
//! The plan lives in shared memory, so it reaches the index service and every backend, and the
//! hook installed into the file layer ([`strata_lsm::directory::faults`]) reads it with atomics only,
//! so it is safe on helper threads. `strata_clear_fault()` removes it and returns how many faults
//! were injected. `strata_unchecked_vector(real[])` makes a vector without validation (NaN and
//! infinities pass), to test the index's own rejection of non-finite rows. Production builds
//! install no hook and have none of these functions.

/// Installs the fault hook in this process (no effect without the `fault-injection` feature).
pub fn install() {
    #[cfg(feature = "fault-injection")]
    enabled::install();
}

#[cfg(feature = "fault-injection")]
mod enabled {
    use std::io;
    use std::path::Path;

    use pgrx::prelude::*;
    use pgrx::PgSqlErrorCode;
    use strata_lsm::directory::faults::{parse_fault, set_fault_hook, WriteStep};

    use crate::fmgr::error;
    use crate::shmem;

    pub(super) fn install() {
        set_fault_hook(hook);
    }

    /// The plan in shared memory decides (none before shared memory is attached).
    fn hook(step: WriteStep, path: &Path) -> io::Result<()> {
        shmem::try_shared().map_or(Ok(()), |shared| shared.fault.check(step, path))
    }

    /// The relfilenode of relation `oid`.
    fn relfilenode(oid: pg_sys::Oid) -> u32 {
        // SAFETY: the relation cache on the backend's main thread; the relation is opened and
        // closed here, and an unknown OID raises an error in relation_open.
        unsafe {
            let relation = pg_sys::relation_open(oid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            let (_, _, node) = crate::pg_compat::relation_file_key(relation);
            pg_sys::relation_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            node
        }
    }

    fn require_superuser() {
        // SAFETY: a catalog lookup of the current user on the backend's main thread.
        if !unsafe { pg_sys::superuser() } {
            error(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, "must be superuser to inject faults");
        }
    }

    /// Makes the next `times` writes (`-1`: every write until cleared) of `file_kind` files
    /// (`segment`, `bitmap`, `manifest` or `any`) fail at `step` (`create`, `write`, `fsync`,
    /// `rename`, `fsync_dir` or `any`) with `error` (`ENOSPC` or `EIO`), for the files of index
    /// `only_index` alone when given (its OID). With `file_kind` `status` (and step `write` or
    /// `any`), the next `times` settles of flushed groups in the status pages fail instead.
    /// Superuser only.
    #[pg_extern(volatile, parallel_unsafe)]
    fn strata_inject_fault(
        step: &str,
        file_kind: default!(&str, "'any'"),
        error_name: default!(&str, "'EIO'"),
        times: default!(i64, -1),
        only_index: default!(Option<pg_sys::Oid>, "NULL"),
    ) {
        require_superuser();
        let relnode = only_index.map_or(0, relfilenode);
        let (step, files, errno) = parse_fault(step, file_kind, error_name)
            .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string()));
        shmem::shared().fault.set(step, files, relnode, errno, times);
    }

    crate::fmgr::v1_functions! {
        strata_unchecked_vector => unchecked_vector;
    }

    /// `strata_unchecked_vector(real[])`: a `vector` with exactly these elements, NaN and
    /// infinities included, bypassing the validation of every other route — the test of the
    /// index's own defence against non-finite rows. Superuser only.
    unsafe fn unchecked_vector(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
        require_superuser();
        // SAFETY: declared (real[]) STRICT in SQL, so argument 0 is a non-null float4 array.
        let elements = unsafe { <Vec<Option<f32>> as FromDatum>::from_datum(crate::fmgr::arg(fcinfo, 0), false) };
        let values: Vec<f32> = elements.unwrap_or_default().into_iter().map(|e| e.unwrap_or(f32::NAN)).collect();
        crate::types::new_datum::<crate::types::Vector>(&values)
    }

    pgrx::extension_sql!(
        r"
CREATE FUNCTION strata_unchecked_vector(real[]) RETURNS vector
STRICT LANGUAGE c AS 'MODULE_PATHNAME', 'strata_unchecked_vector';
REVOKE ALL ON FUNCTION strata_unchecked_vector(real[]) FROM PUBLIC;
",
        name = "unchecked_vector",
        requires = ["types"],
    );

    /// Holds index `index`'s manifest lock (the lock its flushes, merges, VACUUM and the index
    /// service's sweeper take) for `seconds` (at most 60), as a long VACUUM or recovery would, so
    /// that a test can check what waits for it and what passes it by. While holding it, checks that
    /// `try_manifest_lock` (the sweeper's way in) reports the lock busy and leaves it held. Not
    /// cancellable while it holds the lock (an LWLock holds off interrupts). Superuser only.
    #[pg_extern(volatile, parallel_unsafe)]
    fn strata_hold_manifest_lock(index: pg_sys::Oid, seconds: f64) {
        require_superuser();
        let mut slot = None;
        crate::access::with_index_by_oid(index, |relation| {
            // SAFETY: with_index_by_oid passes an open relation; `is_strata_index` reads its AM.
            if unsafe { crate::access::is_strata_index(relation) } {
                // SAFETY: `relation` is an open strata index, as `open` requires.
                slot = Some(unsafe { crate::access::opening::open(relation) }.slot);
            }
        });
        let slot = slot.unwrap_or_else(|| error(PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE, "not a strata index"));
        let lock = shmem::manifest_lock(slot);
        if shmem::try_manifest_lock(slot).is_some() {
            error(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, "try_manifest_lock took a lock that is held");
        }
        let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds.clamp(0.0, 60.0));
        while std::time::Instant::now() < until {
            pgrx::check_for_interrupts!();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(lock);
    }

    /// Removes the injected fault; returns how many faults it injected.
    #[pg_extern(volatile, parallel_unsafe)]
    fn strata_clear_fault() -> i64 {
        require_superuser();
        shmem::shared().fault.clear() as i64
    }
}
