//! Crash recovery of one index (the paper's §5.4), run on the index's first use after a restart.
//!
//! PostgreSQL's WAL replay has already restored the status pages; they say which memtables were
//! not known to be flushed and which heap TIDs each held. [`strata_lsm::recovery::plan`] compares
//! them with the manifest; this module only executes the plan:
//!
//! 1. under the index's manifest lock, drop segments built only from memtables newer than
//!    `max_memtable_id`, and mark deleted the rows of flushed-but-listed memtables whose TIDs the
//!    status pages do not list (deletion bitmaps only ever gain rows: what VACUUM removed stays
//!    removed); one manifest update publishes both;
//! 2. refill the memtables no segment covers by fetching their TIDs from the heap (computing
//!    index expressions as CREATE INDEX does), under their original SegmentIDs, and hand them to
//!    the index service;
//! 3. mark the index ready; the caller then releases the lists of memtables now in segments.
//!
//! The work is bounded by the status pages (the unflushed memtables), not by the index size.
//! A clean restart runs the same steps; they find nothing to change.

use std::sync::atomic::Ordering;
use std::time::Instant;

use pgrx::pg_sys;
use strata_lsm::recovery::{refill, repair, Recovered, Repairs, Status};
use strata_lsm::slabs::NoFreeSlab;
use strata_lsm::status::pages::Contents;
use strata_lsm::status::FLAG_INIT_FORK;

use super::dispatch;
use super::kind::Kind;
use super::publish::{self, raise};
use super::state::{self, IndexHandle};
use super::status::MetaLock;
use crate::shmem;

/// Executes step 1 ([`repair`]) under the index's manifest lock.
fn repair_segments<K: Kind>(handle: &IndexHandle, status: &Status, drop_all: bool) -> Repairs {
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    let (floor, publisher) = (publish::next_id_floor(handle), publish::generation_publisher(handle));
    let repaired = repair(&K::files(handle), status, drop_all, floor, publisher);
    let repairs = publish::panic_if_unsynced(repaired).unwrap_or_else(|e| raise(&e));
    for (segment, covers) in &repairs.mixed {
        pgrx::warning!(
            "pg_strata recovery: segment {segment} mixes memtables {covers:?}; its rows are kept as they are"
        );
    }
    repairs
}

/// Recovers `handle`'s index (registered, not ready) and marks it ready.
///
/// # Safety
/// `index` must be the open strata index of `handle`, and `meta` its exclusively locked
/// metadata page.
pub unsafe fn recover(index: pg_sys::Relation, handle: &IndexHandle, meta: &MetaLock) {
    let started = Instant::now();
    let Contents { meta: contents, status, pages } = meta.read();
    let standby = crate::fmgr::in_recovery();
    let init_reset = contents.flags & FLAG_INIT_FORK != 0;
    let repairs = dispatch::dispatch!(handle.access_kind, K => repair_segments::<K>(handle, &status, init_reset));
    if init_reset && !standby {
        meta.clear_flags();
    }
    let layout = state::memtable_layout(handle);
    // SAFETY: `index` is `handle`'s open strata index (this function's contract; `opening::open`
    // registered `handle` under `index`'s key), and both branches below call `end` before returning.
    // SAFETY: `index` is `handle`'s open index (this function's contract; `opening::open`
    // registered `handle` under `index`'s key); `close_table` runs before returning.
    let refilled = dispatch::dispatch!(handle.access_kind, K => unsafe {
        let mut table = K::open_table(index, handle);
        let refilled = refill(shmem::slabs(), handle.slot, layout, &repairs.refill, &mut table);
        K::close_table(table);
        refilled
    });
    let refilled = refilled.unwrap_or_else(|NoFreeSlab| {
        crate::fmgr::error(
            pgrx::PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            format!(
                "pg_strata: no free memtable slab to recover this index's memtables; retry when the index \
                 service has flushed, or raise strata.memtable_memory ({} slabs now)",
                shmem::shared().slab_count
            ),
        )
    });
    let entry = handle.shared();
    entry.next_id.fetch_max(contents.max_memtable_id + 1, Ordering::AcqRel);
    let recovered = Recovered::of(started.elapsed(), &status, pages, &repairs, refilled);
    // SAFETY: reading the clock.
    recovered.store(&entry.recovery, unsafe { pg_sys::GetCurrentTimestamp() } as u64);
    entry.ready.store(1, Ordering::Release);
    crate::explain::record_recovery(recovered.summary());
    if let Some(line) = recovered.log_line(&format!("{:?}", handle.key), init_reset) {
        pgrx::log!("{line}");
    }
}
