//! A standby's index — vector or bm25 — derived from the membership log that WAL replay restores
//! (docs/ARCHITECTURE.md, "Replication"). The primary's segment files are never shipped: the
//! standby builds its own from its own heap. Before every scan on a standby, [`absorb`] runs
//! passes of [`strata_lsm::follower`] (which decides and executes what to do) until one
//! completes; this module supplies PostgreSQL's side: the manifest lock, the heap, the replay
//! position, builds (vector segments on a helper thread), the wait for slabs, and the errors.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use pgrx::bgworkers::BackgroundWorker;
use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::clock::SystemClock;
use strata_lsm::files::{write_node_marker, FileError, IndexFiles, NODE_MARKER};
use strata_lsm::follower::{drop_missing_segments, first_local_id, follow, FollowError, Follower, FollowerHost, Pass};
use strata_lsm::manifest::Manifest;
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::recovery::HeapRows;
use strata_lsm::segment_set::SegmentSet;

use super::dispatch;
use super::kind::{BuiltOf, Kind, RowsOf};
use super::publish::{self, raise};
use super::state::{self, IndexHandle};
use super::status;
use crate::fmgr::{error, in_recovery};
use crate::shmem;

/// Set once this process (an absorber) has received SIGTERM; pgrx's own flag resets when read.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process is an absorber worker (see the absorber module) asked to stop: its passes give up waiting for
/// memtable slabs then, so a shutdown stays bounded (a backend's wait is ended by PostgreSQL's
/// own interrupt handling instead).
pub fn stopping() -> bool {
    // SAFETY: reading a process-local pointer PostgreSQL sets in background workers.
    let in_worker = unsafe { !pg_sys::MyBgworkerEntry.is_null() };
    if in_worker && BackgroundWorker::sigterm_received() {
        STOPPING.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    STOPPING.load(std::sync::atomic::Ordering::Relaxed)
}

/// The status pages, slabs and files of `handle`'s index, for a follower pass.
fn follower<'a, T>(
    pages: &'a status::Pages,
    handle: &IndexHandle,
    files: &'a IndexFiles<T>,
) -> Follower<'a, status::Pages, shmem::SharedSlabs, shmem::DirectoryLwLock, T> {
    Follower { pages, slabs: shmem::slabs(), index: handle.slot, files, dims: handle.config.dims as usize }
}

/// Brings a standby's index up to date with the replayed membership log. Does nothing on a
/// primary. Serialised per index by the manifest lock (which the service's publications take too).
///
/// # Safety
/// `index` must be the open strata index of `handle`; the caller holds no status page lock and no
/// manifest lock.
pub unsafe fn absorb(index: pg_sys::Relation, handle: &IndexHandle) {
    if !in_recovery() {
        return;
    }
    // SAFETY: `index` is `handle`'s open strata index and no status page or manifest lock is held
    // (this function's contract; amrescan calls it with its scan's index), as `absorb_waiting` needs.
    unsafe { absorb_waiting(index, handle, || false) };
}

/// One pass of [`absorb`] that does not wait for memtable slabs (the absorber worker's: an
/// index short of slabs must not hold up the other indexes of its database). Returns whether the
/// pass completed; one that did not has woken the index service and is repeated later.
///
/// # Safety
/// As for [`absorb`].
pub unsafe fn absorb_once(index: pg_sys::Relation, handle: &IndexHandle) -> bool {
    if !in_recovery() {
        return true;
    }
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    // SAFETY: `index` is `handle`'s open strata index with no status page lock held (this function's
    // contract, met by the absorber opening it by OID); the manifest lock was just taken above.
    let complete = unsafe { absorb_locked(index, handle) } == Pass::Complete;
    if !complete {
        shmem::wake_service();
    }
    complete
}

/// Passes until one completes ([`strata_lsm::follower::follow`]): a pass that finds no free
/// memtable slab for an open group stops there (what it did stays done), and the next one starts
/// after the service has had a moment to flush — the manifest lock released meanwhile. Errors
/// after [`strata_lsm::follower::SLAB_WAIT`]. `finished` is asked under the manifest lock before
/// each pass (true: stop). Returns whether a pass completed.
///
/// # Safety
/// As for [`absorb`].
unsafe fn absorb_waiting(index: pg_sys::Relation, handle: &IndexHandle, finished: impl Fn() -> bool) -> bool {
    let pass = || {
        let _manifest_lock = shmem::manifest_lock(handle.slot);
        // SAFETY: `index` is `handle`'s open strata index with no status page lock held (the
        // contract of `absorb`, which callers meet); `_manifest_lock` above holds the manifest lock.
        (!finished()).then(|| unsafe { absorb_locked(index, handle) })
    };
    let pause = || {
        shmem::wake_service();
        state::wait_a_moment();
    };
    follow(&SystemClock, pass, stopping, pause).unwrap_or_else(|_| {
        error(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            "pg_strata: no free memtable slab on this standby to follow the primary's inserts; raise \
             strata.memtable_memory",
        )
    })
}

/// A standby pass's PostgreSQL side: the heap (opened once the pass is about to write), builds,
/// and the index's shared state.
struct Standby<'a, K: Kind> {
    index: pg_sys::Relation,
    handle: &'a IndexHandle,
    table: Option<K::Table<'a>>,
}

impl<K: Kind> HeapRows for Standby<'_, K> {
    type Row = K::Row;

    fn fetch(&mut self, tid: u64) -> Option<K::Row> {
        self.table.as_mut().expect("the heap is opened before the pass writes").fetch(tid)
    }
}

impl<K: Kind> FollowerHost<K::Segment> for Standby<'_, K> {
    fn segments(&mut self) -> Arc<SegmentSet<K::Segment>> {
        // From this backend's cache (publications take the manifest lock, which the caller holds,
        // so the shared generation is the manifest's).
        K::segment_set(self.handle, self.handle.shared().manifest_generation.load(Ordering::Acquire))
    }

    fn memtable_layout(&mut self) -> MemtableLayout {
        state::memtable_layout(self.handle)
    }

    fn next_id_floor(&self) -> u64 {
        publish::next_id_floor(self.handle)
    }

    fn publish_generation(&self, manifest: &Manifest) {
        let _directory = shmem::directory_lock(true);
        publish::store_generation_locked(self.handle, manifest);
    }

    fn open_groups(&mut self, open: &[u64]) {
        self.handle.shared().listed.sync(open);
    }

    fn before_writes(&mut self) {
        // WAL before data: what is written reflects the log (and heap) replayed so far, so after a
        // crash no query may run before replay is back here. In recovery XLogFlush raises
        // minRecoveryPoint instead of flushing.
        // SAFETY: plain calls on the startup process's shared state; the table is opened on the
        // index of `handle` (the contract of `absorb_locked`) and ended in this transaction.
        unsafe {
            pg_sys::XLogFlush(pg_sys::GetXLogReplayRecPtr(std::ptr::null_mut()));
            self.table = Some(K::open_table(self.index, self.handle));
        }
    }

    fn build(&mut self, rows: RowsOf<K>) -> Result<BuiltOf<K>, FileError> {
        K::build(self.handle, rows, &mut |_| state::wait_a_moment())
    }

    fn wake_flusher(&mut self) {
        shmem::wake_service();
    }
}

/// One pass of [`absorb`] ([`Follower::pass`]); the caller holds the index's manifest lock.
///
/// # Safety
/// As for [`absorb`].
unsafe fn absorb_locked(index: pg_sys::Relation, handle: &IndexHandle) -> Pass {
    // SAFETY: `index` is the open strata index of `handle` and no status page lock is held (the
    // contract `absorb` passes on).
    dispatch::dispatch!(handle.access_kind, K => unsafe { absorb_locked_as::<K>(index, handle) })
}

/// [`absorb_locked`] for an index of kind `K`.
///
/// # Safety
/// As for [`absorb`].
unsafe fn absorb_locked_as<K: Kind>(index: pg_sys::Relation, handle: &IndexHandle) -> Pass {
    let files = K::files(handle);
    // SAFETY: `index` is `handle`'s open strata index (the contract of `absorb`, passed through by
    // `absorb_once`/`absorb_waiting`), and `pages` is dropped before this function returns.
    let pages = unsafe { status::Pages::of(index) };
    let mut host = Standby::<K> { index, handle, table: None };
    let passed = follower(&pages, handle, &files).pass(&mut host);
    if let Some(table) = host.table.take() {
        K::close_table(table);
    }
    passed.unwrap_or_else(|e| match e {
        FollowError::Status(e) => status::raise_status(e),
        FollowError::MemtableTooLarge => error(
            PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            "pg_strata: a memtable of the primary does not fit in this standby's memtable slabs; set \
             strata.memtable_slab_size at least as large as the primary's",
        ),
        FollowError::Segments(e) => raise(&publish::panic_on_unsynced(e)),
        FollowError::Generations(e) => raise(&e),
    })
}

/// The first use on a standby of an index since the server started (instead of crash recovery,
/// which would refill open groups by TID and lose their positions): segments whose files are
/// missing leave the manifest ([`drop_missing_segments`]) and the next [`absorb`] rebuilds their
/// groups from the heap. Then the index is ready.
///
/// # Safety
/// `meta` is the index's exclusively locked metadata page; the caller holds no manifest lock.
pub unsafe fn open(handle: &IndexHandle, meta: &status::MetaLock) {
    let contents = meta.read();
    {
        let _manifest_lock = shmem::manifest_lock(handle.slot);
        let (floor, publisher) = (publish::next_id_floor(handle), publish::generation_publisher(handle));
        let dropped =
            dispatch::dispatch!(handle.access_kind, K => drop_missing_segments(&K::files(handle), floor, publisher));
        let missing = dropped.unwrap_or_else(|e| raise(&e));
        if !missing.is_empty() {
            pgrx::log!("pg_strata: index {:?}: segments {missing:?} are missing here; rebuilding them", handle.key);
        }
    }
    let entry = handle.shared();
    entry.next_id.fetch_max(first_local_id(contents.meta.max_memtable_id), Ordering::AcqRel);
    entry.derived.store(1, Ordering::Release);
    entry.ready.store(1, Ordering::Release);
}

/// Ends the derivation of an index that is no longer replaying (after promotion, or at the first
/// open of files inherited from another node once recovery ended): one last [`absorb`], then every
/// ABSORBING memtable is sealed for the service to flush (their groups are settled once flushed,
/// as on any primary), the node marker is written, and the index becomes an ordinary primary
/// index. Concurrent callers wait for the first on the manifest lock.
///
/// # Safety
/// `index` must be the open strata index of `handle`; no status page lock or manifest lock held.
pub unsafe fn finish(index: pg_sys::Relation, handle: &IndexHandle) {
    let derived = || handle.shared().derived.load(Ordering::Acquire) == 1;
    // SAFETY: `index` is `handle`'s open strata index (this function's contract; `opening::open`
    // passes the relation whose key found or registered `handle`) and neither lock is held. A
    // concurrent caller that finished first makes the remaining passes stop.
    if !unsafe { absorb_waiting(index, handle, || !derived()) } {
        return;
    }
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    if !derived() {
        return;
    }
    // SAFETY: `index` is `handle`'s open strata index (this function's contract), and `pages` is
    // used only within this call, while the relation stays open.
    let pages = unsafe { status::Pages::of(index) };
    dispatch::dispatch!(handle.access_kind, K => follower(&pages, handle, &K::files(handle)).seal_absorbing());
    write_marker_in(&handle.dir());
    handle.shared().derived.store(0, Ordering::Release);
    shmem::wake_service();
    pgrx::log!("pg_strata: index {:?} is now maintained as on a primary", handle.key);
}

/// Writes the node marker into `dir` ([`strata_lsm::files::NODE_MARKER`]); a failure is a
/// warning (without it, the next start derives the index in full from the log).
pub fn write_marker_in(dir: &std::path::Path) {
    if let Err(e) = write_node_marker(dir) {
        pgrx::warning!("pg_strata: cannot write {}: {e}", dir.join(NODE_MARKER).display());
    }
}
