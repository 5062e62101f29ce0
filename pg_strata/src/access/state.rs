//! An index's runtime state: its directory slot, its files, and its memtables.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::clock::SystemClock;
use strata_lsm::files::index_dir_name;
use strata_lsm::manifest::{IndexConfig, Manifest};
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::registry::{self, Registered};
use strata_lsm::slabs::{ReadSnapshot, WriterPin};
use strata_lsm::workers::PendingSettle;
use strata_lsm::writer::{self, allocate_registered, describe_stuck, Allocated, MemtableWriter};

use super::status;
use super::AccessKind;
use crate::fmgr::{error, error_with_detail};
use crate::shmem::{self, IndexKey, SharedSlabs};

/// Root directory of pg_strata's files, relative to the data directory.
pub const ROOT_DIR: &str = "pg_strata";

/// The directory holding an index's manifest and segment files.
pub fn index_dir(key: IndexKey) -> PathBuf {
    PathBuf::from(ROOT_DIR).join(index_dir_name(key.db, key.spc, key.relnode))
}

/// The storage key of an index relation.
///
/// # Safety
/// `index` must be a valid, open relation.
pub unsafe fn key_of(index: pg_sys::Relation) -> IndexKey {
    // SAFETY: `index` points to the RelationData of an open relation (this function's contract; it
    // stays in the relcache while open).
    let (db, spc, relnode) = unsafe { crate::pg_compat::relation_file_key(index) };
    IndexKey { db, spc, relnode }
}

/// An index registered in the shared directory.
#[derive(Debug, Clone)]
pub struct IndexHandle {
    /// Directory slot.
    pub slot: usize,
    /// Storage key.
    pub key: IndexKey,
    /// Configuration.
    pub config: IndexConfig,
    /// Its family, chosen from `config` ([`AccessKind::of`]); `access::dispatch` turns it
    /// into the `Kind` the shared paths run with.
    pub access_kind: AccessKind,
}

impl IndexHandle {
    /// Its directory of files.
    pub fn dir(&self) -> PathBuf {
        index_dir(self.key)
    }

    /// The shared slot.
    pub fn shared(&self) -> &'static shmem::IndexSlot {
        &shmem::shared().indexes[self.slot]
    }
}

impl From<Registered> for IndexHandle {
    fn from(registered: Registered) -> Self {
        let access_kind = AccessKind::of(&registered.config);
        Self { slot: registered.slot, key: registered.key, config: registered.config, access_kind }
    }
}

/// The handle of directory slot `slot`, if it is in use (takes the directory lock shared).
pub fn registered(slot: usize) -> Option<IndexHandle> {
    let lock = shmem::directory_lock(false);
    handle_of_slot(slot, &lock)
}

/// The handle of directory slot `slot` if it is in use; `lock` is the directory lock.
pub fn handle_of_slot(slot: usize, lock: &shmem::LockGuard) -> Option<IndexHandle> {
    registry::registered(&shmem::shared().indexes, slot, lock).map(IndexHandle::from)
}

/// Registers (or re-registers, replacing stale state) `key` with `manifest`'s configuration
/// ([`registry::register_locked`]) and, for a bm25 index, the text search configuration its
/// status pages store (`text_config`, else 0). `ready` is true for a freshly built index, false
/// for one that recovery must reconcile first.
pub fn register(key: IndexKey, relid: pg_sys::Oid, text_config: u32, manifest: &Manifest, ready: bool) -> IndexHandle {
    let slots = &shmem::shared().indexes;
    // A flush of a stale registration of the same key must finish before its memtables go.
    let existing = {
        let lock = shmem::directory_lock(false);
        registry::find(slots, key, &lock)
    };
    let _manifest_lock = existing.map(shmem::manifest_lock);
    let lock = shmem::directory_lock(true);
    let registered =
        registry::register_locked(slots, shmem::slabs(), &lock, key, relid.to_u32(), text_config, manifest, ready);
    IndexHandle::from(
        registered.unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED, e.to_string())),
    )
}

/// The handle registered for `key` if recovery has made it ready.
pub fn find_ready(key: IndexKey) -> Option<IndexHandle> {
    let lock = shmem::directory_lock(false);
    registry::find_ready(&shmem::shared().indexes, key, &lock).map(IndexHandle::from)
}

/// Settles in the status pages the groups of memtables that have been flushed (their lists stay,
/// as the membership log), and publishes the set still open. Does nothing on a standby (no WAL
/// can be written there).
///
/// # Safety
/// `index` must be an open strata index; the caller holds no status page lock.
pub unsafe fn settle_flushed(index: pg_sys::Relation, handle: &IndexHandle) {
    if crate::fmgr::in_recovery() {
        return;
    }
    // Test builds can make a settle fail here (`strata_inject_fault('write', 'status')`).
    if let Err(e) = strata_lsm::directory::faults::check_settle(&handle.dir()) {
        error(PgSqlErrorCode::ERRCODE_IO_ERROR, format!("pg_strata: settling flushed memtables failed: {e}"));
    }
    // SAFETY: `index` is an open strata index (this function's contract: AM callbacks, `opening::open`,
    // the settler and strata_flush pass one) and no status page lock is held here, as `listed` requires.
    let listed = unsafe { status::listed(index) };
    let flushed = shmem::slabs().flushed_among(handle.slot, &listed);
    // Under the metadata lock, so no registration (which adds to the listed set while holding
    // it) can slip between reading the catalog and publishing the set.
    // SAFETY: `index` is an open strata index (this function's contract) and no status page lock
    // is held here (`listed` released its own); the metadata lock comes before the catalog's.
    let meta = unsafe { status::MetaLock::acquire(index, true) };
    handle.shared().listed.sync(&meta.settle(&flushed));
}

/// Settles the index's flushed groups if the index service raised its `release_pending` flag
/// since they were last settled (a writer's, or the settler worker's, turn). When settling raises
/// an error the flag is raised again ([`PendingSettle`]), so the next writer or the settler
/// worker settles instead of the groups staying open until another flush.
///
/// # Safety
/// As for [`settle_flushed`].
pub unsafe fn settle_if_pending(index: pg_sys::Relation, handle: &IndexHandle) {
    if let Some(pending) = PendingSettle::take(&handle.shared().release_pending) {
        // SAFETY: this function's contract is settle_flushed's.
        unsafe { settle_flushed(index, handle) };
        pending.settled();
    }
}

/// The memtables of an index that scans must read (active, sealed, flushing), with their reader
/// counts raised until the snapshot is dropped (also on unwinding: a slab a scan forgot would
/// never be freed), and the manifest generation read under the same lock, so the segment set and
/// the memtables form one consistent snapshot.
pub fn snapshot(handle: &IndexHandle) -> (ReadSnapshot<'static, SharedSlabs>, u64) {
    shmem::slabs().snapshot(handle.slot, || handle.shared().manifest_generation.load(Ordering::Acquire))
}

/// A memtable pinned by a writer (see `strata_lsm::slabs::WriterPin`); the pin is dropped with
/// this value, also when an error unwinds, and at exit when the backend exits without unwinding.
pub struct PinnedMemtable(Option<WriterPin<'static, SharedSlabs>>);

impl std::ops::Deref for PinnedMemtable {
    type Target = WriterPin<'static, SharedSlabs>;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("pinned until dropped")
    }
}

impl Drop for PinnedMemtable {
    fn drop(&mut self) {
        let pin = self.0.take().expect("pinned until dropped");
        let slab = pin.slab();
        let flush_may_start = pin.unpin();
        exit_pins::forget(slab);
        if flush_may_start {
            shmem::wake_service();
        }
    }
}

/// Pins left behind by a backend that exits without unwinding (FATAL) are dropped at exit, so a
/// memtable never waits forever for a writer that is gone.
mod exit_pins {
    use std::cell::RefCell;

    use pgrx::pg_sys;

    thread_local! {
        static PINNED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
        static REGISTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn drop_pins(_code: i32, _arg: pg_sys::Datum) {
        PINNED.with(|p| {
            for slab in p.borrow_mut().drain(..) {
                crate::shmem::slabs().release_lost_writer_pin(slab);
            }
        });
    }

    /// Records a pin of `slab`.
    pub fn remember(slab: usize) {
        if !REGISTERED.with(std::cell::Cell::get) {
            // SAFETY: registering a process-exit callback from the backend's main thread.
            unsafe { pg_sys::before_shmem_exit(Some(drop_pins), pg_sys::Datum::from(0)) };
            REGISTERED.with(|r| r.set(true));
        }
        PINNED.with(|p| p.borrow_mut().push(slab));
    }

    /// Forgets a pin of `slab` (dropped normally).
    pub fn forget(slab: usize) {
        PINNED.with(|p| {
            let mut pinned = p.borrow_mut();
            if let Some(at) = pinned.iter().position(|&s| s == slab) {
                pinned.swap_remove(at);
            }
        });
    }
}

/// Pins the active memtable of `handle`'s index, if it has one.
fn pin_active(handle: &IndexHandle) -> Option<PinnedMemtable> {
    let pin = shmem::slabs().pin_active(handle.slot)?;
    exit_pins::remember(pin.slab());
    Some(PinnedMemtable(Some(pin)))
}

/// A backend's writer of `handle`'s index, for [`strata_lsm::writer::active_memtable`].
struct Writer<'a> {
    index: pg_sys::Relation,
    handle: &'a IndexHandle,
}

impl MemtableWriter for Writer<'_> {
    type Pin = PinnedMemtable;
    type Stuck = String;

    fn pin_active(&mut self) -> Option<PinnedMemtable> {
        pin_active(self.handle)
    }

    /// Under the metadata page lock, so every memtable a writer can find is registered.
    fn allocate(&mut self) -> Allocated {
        // SAFETY: `index` is the open strata index of `handle` (the contract of active_memtable),
        // and no status page lock is held.
        let meta = unsafe { status::MetaLock::acquire(self.index, true) };
        let handle = self.handle;
        let next_id = || {
            let id = handle.shared().next_id.fetch_add(1, Ordering::AcqRel);
            // Listed from now on: the service must not merge this memtable's future segment until
            // a durable settle says so.
            handle.shared().listed.add(id);
            id
        };
        allocate_registered(
            shmem::slabs(),
            handle.slot,
            usize::try_from(crate::gucs::MAX_WAITING_MEMTABLES.get()).unwrap_or(0),
            || memtable_layout(handle),
            next_id,
            |id| {
                meta.register_memtable(id);
            },
        )
    }

    fn stuck_index(&mut self) -> Option<String> {
        failing_flush()
    }

    fn pause(&mut self) {
        // No slab free and none on its way: seal another index's active memtable for the service
        // to flush (a node with more written indexes than slabs, such as a Citus worker's shards).
        let slabs = shmem::slabs();
        if let Some(victim) = writer::memtable_to_evict(&slabs.infos(), self.handle.slot) {
            slabs.seal(victim.index, victim.slab, victim.segment_id);
        }
        shmem::wake_service();
        wait_a_moment();
    }
}

/// The active memtable of an index, pinned, allocating (and registering in the status pages) one
/// when there is none. Waits (interruptibly) while every slab is in use until the service frees
/// one; when that takes longer than [`strata_lsm::writer::STUCK_REPORT_AFTER`] because some
/// index's memtables cannot be flushed, raises an error naming that index and the fix.
///
/// # Safety
/// `index` must be the open strata index `handle` belongs to; no status page lock held.
pub unsafe fn active_memtable(index: pg_sys::Relation, handle: &IndexHandle) -> PinnedMemtable {
    writer::active_memtable(&mut Writer { index, handle }, &SystemClock).unwrap_or_else(|stuck| {
        error_with_detail(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES,
            format!("pg_strata: no free memtable memory: the memtables of index {stuck} cannot be flushed"),
            "Fix the cause of the last error shown by strata_index_stats() for that index (for example free \
             disk space); the index service retries by itself. Raising strata.memtable_memory gives writers \
             more room meanwhile.",
        )
    })
}

/// An index holding sealed memtables whose flushes fail, described for an error message with its
/// last error, if there is one.
fn failing_flush() -> Option<String> {
    let slot = writer::failing_flush(&shmem::slabs().infos())?;
    let entry = &shmem::shared().indexes[slot];
    let relid = pg_sys::Oid::from(entry.relid.load(Ordering::Acquire));
    let database = {
        let lock = shmem::directory_lock(false);
        entry.key.get(&lock).db
    };
    // SAFETY: MyDatabaseId is this backend's database; get_rel_name is a syscache lookup on the
    // backend's main thread (null when the OID is unknown). An OID of another database would
    // name an unrelated relation here, so it is not looked up.
    let name = unsafe {
        if database == pg_sys::MyDatabaseId.to_u32() {
            let raw = pg_sys::get_rel_name(relid);
            (!raw.is_null()).then(|| std::ffi::CStr::from_ptr(raw).to_string_lossy().into_owned())
        } else {
            None
        }
    };
    let last = entry.flush_failure.current(&shmem::directory_lock(false));
    Some(describe_stuck(name.as_deref(), relid.to_u32(), last.as_ref().map(|(retries, e)| (*retries, e.as_str()))))
}

/// The layout of a new memtable of `handle`'s index ([`MemtableLayout::for_slab`]).
pub fn memtable_layout(handle: &IndexHandle) -> MemtableLayout {
    let (words, rows) = (handle.config.row_words(), handle.config.memtable_rows as usize);
    MemtableLayout::for_slab(shmem::shared().slab_bytes as usize, words, rows)
        .unwrap_or_else(|e| error(PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED, e.to_string()))
}

/// Waits (interruptibly, holding no lock, at most [`strata_lsm::writer::FREE_SLABS_WAIT`]) until
/// at least `wanted` memtable slabs are free or the index service has nothing left to flush, so
/// that recovery rarely runs short.
pub fn wait_for_free_slabs(wanted: usize) {
    writer::wait_for_free_slabs(
        &SystemClock,
        wanted,
        || shmem::slabs().counts(),
        || {
            shmem::wake_service();
            wait_a_moment();
        },
    );
}

/// Seals memtable `segment_id` in slab `slab` if it is still the active one of `handle`'s index
/// (it may have been sealed, flushed and its slab reused since), and wakes the service.
pub fn seal(handle: &IndexHandle, slab: usize, segment_id: u64) {
    shmem::slabs().seal(handle.slot, slab, segment_id);
    shmem::wake_service();
}

/// Seals the active memtable of `handle`'s index, if it has one, and wakes the service.
pub fn seal_active(handle: &IndexHandle) {
    shmem::slabs().seal_active(handle.slot);
    shmem::wake_service();
}

/// Sleeps up to 10 ms on the process latch, handling interrupts (cancel, terminate).
pub fn wait_a_moment() {
    // SAFETY: called from a backend's main thread; WaitLatch on MyLatch with a timeout is the
    // standard interruptible wait, and CHECK_FOR_INTERRUPTS handles cancel/terminate.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            10,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pgrx::check_for_interrupts!();
}
