//! VACUUM: remove entries of dead heap tuples ([`strata_lsm::vacuum`]), under the index's manifest
//! lock, before `ambulkdelete` returns (PostgreSQL removes the heap tuples only after that, so a
//! deleted row never comes back). The status pages' membership log forgets the dead TIDs too
//! (WAL-logged: zeroed, then the groups' generations bumped and emptied settled groups dropped),
//! so that neither crash recovery nor a standby ever re-reads a TID this VACUUM frees for reuse.

use pgrx::pg_sys;
use strata_lsm::files::{FileError, IndexFiles};
use strata_lsm::manifest::IndexConfig;
use strata_lsm::segment_set::SegmentSet;
use strata_lsm::segment_type::SegmentType;
use strata_lsm::vacuum::{vacuum_memtables, vacuum_segments, Vacuumed};

use super::dispatch;
use super::kind::Kind;
use super::publish::{self, raise};
use super::state;
use crate::memtable::unpack_tid;

fn stats_or_new(stats: *mut pg_sys::IndexBulkDeleteResult) -> *mut pg_sys::IndexBulkDeleteResult {
    if stats.is_null() {
        // SAFETY: palloc0 of a plain C struct.
        unsafe { pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBulkDeleteResult>()).cast() }
    } else {
        stats
    }
}

/// `ambulkdelete`.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn ambulkdelete(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    callback: pg_sys::IndexBulkDeleteCallback,
    callback_state: *mut std::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: PostgreSQL passes a valid vacuum info (with the open index), an optional stats
    // struct, and a callback that takes a TID pointer and its state.
    unsafe {
        let stats = stats_or_new(stats);
        let handle = crate::access::opening::open((*info).index);
        let Some(callback) = callback else {
            return stats;
        };
        let mut is_dead = |packed: u64| {
            let mut tid = unpack_tid(packed);
            callback(&raw mut tid, callback_state)
        };
        // Serialises with the service's flushes of this index: a memtable being built into a
        // segment is either published before this pass (and handled as a segment below) or
        // flushed after it (and then leaves out the rows marked here).
        let manifest_lock = crate::shmem::manifest_lock(handle.slot);
        let (memtables, generation) = state::snapshot(&handle);
        let in_memtables = vacuum_memtables(&memtables[..], &mut is_dead);
        drop(memtables);
        // The membership log forgets them too (WAL-logged, before PostgreSQL frees the TIDs for
        // reuse), so neither crash recovery nor a standby ever re-reads a freed TID.
        let zeroed = super::status::zero_dead((*info).index, &mut is_dead);
        let in_segments = dispatch::dispatch!(handle.access_kind, K => {
            vacuum_in(&handle, &K::files(&handle), &K::segment_set(&handle, generation), &mut is_dead)
        });
        let Vacuumed { removed, remaining } =
            in_memtables + publish::panic_if_unsynced(in_segments).unwrap_or_else(|e| raise(&e));
        (*stats).tuples_removed += removed as f64;
        (*stats).num_index_tuples = remaining as f64;
        drop(manifest_lock);
        super::status::finish_vacuum((*info).index, &zeroed);
        state::settle_flushed((*info).index, &handle);
        stats
    }
}

/// [`vacuum_segments`] of `handle`'s segments of type `S`.
fn vacuum_in<S: SegmentType<Config = IndexConfig>>(
    handle: &state::IndexHandle,
    files: &IndexFiles<S>,
    set: &SegmentSet<S>,
    is_dead: &mut impl FnMut(u64) -> bool,
) -> Result<Vacuumed, FileError> {
    vacuum_segments(files, set, is_dead, || publish::next_id_floor(handle), publish::generation_publisher(handle))
}

/// `amvacuumcleanup`: report the index's size and live entries.
#[pgrx::pg_guard]
pub unsafe extern "C-unwind" fn amvacuumcleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    // SAFETY: PostgreSQL passes a valid vacuum info (with the open index) and an optional stats
    // struct, the pointers `amvacuumcleanup`'s contract promises.
    unsafe {
        if (*info).analyze_only {
            return stats;
        }
        let stats = stats_or_new(stats);
        let handle = crate::access::opening::open((*info).index);
        let (mut memtables, generation) = state::snapshot(&handle);
        // The set may be newer than the snapshot: a memtable flushed meanwhile counts once.
        let segment_rows = dispatch::dispatch!(handle.access_kind, K => {
            let set = K::segment_set(&handle, generation);
            memtables.release_held(|id| set.covers(id));
            set.live_rows()
        });
        let memtable_rows: u64 = memtables.iter().map(crate::memtable::Memtable::live_rows).sum();
        drop(memtables);
        (*stats).num_index_tuples = (memtable_rows + segment_rows) as f64;
        (*stats).num_pages = pg_sys::RelationGetNumberOfBlocksInFork((*info).index, pg_sys::ForkNumber::MAIN_FORKNUM);
        stats
    }
}
