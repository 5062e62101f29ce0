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
use strata_lsm::recovery::{refill, repair, HeapRows, Recovered, Repairs, SpanRow, Status};
use strata_lsm::slabs::NoFreeSlab;
use strata_lsm::status::pages::Contents;
use strata_lsm::status::FLAG_INIT_FORK;

use super::heap::HeapVectors;
use super::publish::{self, raise};
use super::state::{self, IndexHandle};
use super::status::MetaLock;
use crate::shmem;

/// Executes step 1 ([`repair`]) under the index's manifest lock.
fn repair_segments(handle: &IndexHandle, status: &Status, drop_all: bool) -> Repairs {
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    let (floor, publisher) = (publish::next_id_floor(handle), publish::generation_publisher(handle));
    let repaired = if handle.config.kind.is_text() {
        repair(&crate::text::sources::files(handle), status, drop_all, floor, publisher)
    } else {
        repair(&handle.files(), status, drop_all, floor, publisher)
    };
    let repairs = publish::panic_if_unsynced(repaired).unwrap_or_else(|e| raise(&e));
    for (segment, covers) in &repairs.mixed {
        pgrx::warning!(
            "pg_strata recovery: segment {segment} mixes memtables {covers:?}; its rows are kept as they are"
        );
    }
    repairs
}

/// The table of an index as recovery's [`HeapRows`]: every version some transaction may still
/// see is fetched (the executor's visibility check runs at scan time, as for every index entry);
/// versions no one can see any more — aborted inserts, deletions older than every snapshot — are
/// skipped, since their TOAST data may already be gone.
pub(super) struct Table<'a> {
    reader: HeapVectors,
    handle: &'a IndexHandle,
    not_removable: pg_sys::SnapshotData,
}

impl<'a> Table<'a> {
    /// Opens `index`'s table for recovery.
    ///
    /// # Safety
    /// `index` must be the open strata index of `handle`; [`Table::end`] must be called before the
    /// transaction ends.
    pub(super) unsafe fn begin(index: pg_sys::Relation, handle: &'a IndexHandle) -> Self {
        // SAFETY: a non-vacuumable snapshot (what InitNonVacuumableSnapshot sets up) sees every
        // row version a concurrent transaction may still need, and never a version whose TOAST
        // may be gone.
        unsafe {
            let reader = HeapVectors::begin(index, std::ptr::null_mut());
            let mut not_removable: pg_sys::SnapshotData = std::mem::zeroed();
            not_removable.snapshot_type = pg_sys::SnapshotType::SNAPSHOT_NON_VACUUMABLE;
            not_removable.vistest = pg_sys::GlobalVisTestFor(reader.heap());
            Self { reader, handle, not_removable }
        }
    }

    /// Closes the table reader.
    pub(super) fn end(self) {
        // SAFETY: called once, in the transaction that called `begin`.
        unsafe { self.reader.end() };
    }
}

/// The table of a bm25 index as recovery's [`HeapRows`]: each row's text tokenised as CREATE
/// INDEX tokenises it, as the span row `aminsert` appended.
pub(super) struct TextTable<'a> {
    table: Table<'a>,
    config: pg_sys::Oid,
}

impl<'a> TextTable<'a> {
    /// Opens the table of bm25 index `index` for recovery or a standby's pass.
    ///
    /// # Safety
    /// As for [`Table::begin`]; `index` is a bm25 index.
    pub(super) unsafe fn begin(index: pg_sys::Relation, handle: &'a IndexHandle) -> Self {
        // SAFETY: this function's contract is `Table::begin`'s, and `index` is an open bm25 index.
        unsafe { Self { table: Table::begin(index, handle), config: crate::text::text_config_of(index, handle) } }
    }

    /// Closes the table reader.
    pub(super) fn end(self) {
        self.table.end();
    }
}

impl HeapRows for TextTable<'_> {
    type Row = SpanRow;

    fn fetch(&mut self, tid: u64) -> Option<SpanRow> {
        let (config, handle) = (self.config, self.table.handle);
        let snapshot = &raw mut self.table.not_removable;
        // SAFETY: the snapshot lives in `self` for the reader's lifetime; the key datum is valid
        // while the closure runs; tokenising runs on the backend's thread.
        unsafe {
            self.table.reader.fetch_with(tid, snapshot, |values, isnull| {
                (!isnull[0]).then(|| {
                    let words = crate::text::tokens::document_of(config, values[0]).to_words();
                    state::check_span_fits(handle, words.len());
                    SpanRow(words)
                })
            })
        }
    }
}

impl HeapRows for Table<'_> {
    type Row = Vec<f32>;

    fn fetch(&mut self, tid: u64) -> Option<Vec<f32>> {
        // SAFETY: the snapshot lives in `self` for the reader's lifetime; `handle` is the index's.
        unsafe { self.reader.fetch(self.handle, tid, &raw mut self.not_removable, true) }
    }
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
    let repairs = repair_segments(handle, &status, init_reset);
    if init_reset && !standby {
        meta.clear_flags();
    }
    let layout = state::memtable_layout(handle);
    // SAFETY: `index` is `handle`'s open strata index (this function's contract; `opening::open`
    // registered `handle` under `index`'s key), and both branches below call `end` before returning.
    let refilled = if handle.config.kind.is_text() {
        // SAFETY: `index` is `handle`'s open index (this function's contract), a bm25 index since
        // its kind is text; `text.end()` runs below before returning.
        let mut text = unsafe { TextTable::begin(index, handle) };
        let refilled = refill(shmem::slabs(), handle.slot, layout, &repairs.refill, &mut text);
        text.end();
        refilled
    } else {
        // SAFETY: `index` is `handle`'s open strata index (this function's contract); `table.end()`
        // runs below before returning.
        let mut table = unsafe { Table::begin(index, handle) };
        let refilled = refill(shmem::slabs(), handle.slot, layout, &repairs.refill, &mut table);
        table.end();
        refilled
    };
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
