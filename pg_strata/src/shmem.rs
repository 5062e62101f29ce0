//! Shared memory: the index directory and the pool of memtable slabs.
//!
//! ```text
//! ┌──────────────────────────────┐  ShmemInitStruct("pg_strata")
//! │ Shared header                │  slab geometry, the service's latch
//! │ IndexSlot × MAX_INDEXES      │  one per index in use: config, manifest generation, id counter
//! ├──────────────────────────────┤  (4 KiB aligned)
//! │ slab 0 │ slab 1 │ … │ slab n │  memtables; layout in strata_lsm::memtable
//! └──────────────────────────────┘
//! ```
//!
//! Locks (one named LWLock tranche): lock 0 guards the directory (registering indexes,
//! allocating, sealing and freeing slabs, publishing segment sets); lock `1 + i` serialises
//! manifest rewrites of index slot `i` (flush, vacuum), so file I/O never holds lock 0.
//!
//! The slabs' lifecycle and the memtable protocol are `strata_lsm::slabs` and
//! `strata_lsm::memtable`; this module gives them the region ([`SharedSlabs`]) and lock 0
//! ([`DirectoryLwLock`]): [`slabs`] is the lifecycle over them.

use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use pgrx::pg_sys;
use strata_lsm::listed::ListedSet;
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::packed_config::PackedConfig;
use strata_lsm::slabs::{ActiveSlab, Bitmap, DirectoryLock, LockMode, SlabHeader, SlabMemory};

use crate::gucs;

/// Most indexes that can be in use at once (across all databases).
pub const MAX_INDEXES: usize = 128;
/// Name of the shared memory region and LWLock tranche.
pub const TRANCHE: &CStr = c"pg_strata";
const MAGIC: u64 = 0x5354_5241_5441_0001;

/// Identity of an index's storage: database, tablespace and relfilenode.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IndexKey {
    /// Database OID.
    pub db: u32,
    /// Tablespace OID.
    pub spc: u32,
    /// relfilenode of the index relation.
    pub relnode: u32,
}

/// A plain-data field of shared memory that is written only while holding the directory lock
/// (lock 0) exclusively and read only while holding it in either mode, so no read can overlap a
/// write. The accessors take the lock guard as proof.
#[repr(transparent)]
pub struct DirectoryLocked<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get`/`set`, which require the directory lock (shared for
// reads, exclusive for writes); the LWLock orders them across processes and threads.
unsafe impl<T: Copy + Send> Sync for DirectoryLocked<T> {}

impl<T: Copy> DirectoryLocked<T> {
    /// The value, read under the directory lock.
    ///
    /// # Panics
    /// When `lock` is not the directory lock.
    pub fn get(&self, lock: &LockGuard) -> T {
        assert_eq!(lock.number, 0, "DirectoryLocked read without the directory lock");
        // SAFETY: writers hold the directory lock exclusively and we hold it (in some mode), so
        // no write overlaps this read.
        unsafe { *self.0.get() }
    }

    /// Replaces the value, under the exclusive directory lock.
    ///
    /// # Panics
    /// When `lock` is not the directory lock held exclusively.
    pub fn set(&self, lock: &LockGuard, value: T) {
        assert!(lock.number == 0 && lock.exclusive, "DirectoryLocked write without the exclusive directory lock");
        // SAFETY: we hold the directory lock exclusively: no other reader or writer is inside.
        unsafe { *self.0.get() = value };
    }
}

/// Length of the error text kept for a failing flush or merge.
pub const ERROR_TEXT_BYTES: usize = 240;

/// The state of one kind of background work (flushes or merges) of an index that fails: a failure
/// episode begins with the first failed attempt and ends with the next success.
#[repr(C)]
pub struct FailureState {
    /// Failed attempts in the current episode (0: healthy).
    pub retries: AtomicU32,
    /// The most recent error of the episode (NUL-padded UTF-8, cut at [`ERROR_TEXT_BYTES`]).
    message: DirectoryLocked<[u8; ERROR_TEXT_BYTES]>,
}

impl FailureState {
    /// Records a failed attempt with `message`; returns the attempt's number in its episode
    /// (1 = the episode begins).
    pub fn record(&self, message: &str) -> u32 {
        let mut text = [0u8; ERROR_TEXT_BYTES];
        let mut end = message.len().min(ERROR_TEXT_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].copy_from_slice(&message.as_bytes()[..end]);
        let lock = directory_lock(true);
        self.message.set(&lock, text);
        self.retries.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Ends the episode; returns how many attempts had failed in it.
    pub fn clear(&self) -> u32 {
        self.retries.swap(0, Ordering::AcqRel)
    }

    /// Failed attempts so far and the last error, `None` when healthy.
    pub fn current(&self) -> Option<(u32, String)> {
        let lock = directory_lock(false);
        let retries = self.retries.load(Ordering::Acquire);
        if retries == 0 {
            return None;
        }
        let text = self.message.get(&lock);
        let end = text.iter().position(|&b| b == 0).unwrap_or(ERROR_TEXT_BYTES);
        Some((retries, String::from_utf8_lossy(&text[..end]).into_owned()))
    }
}

/// One index's entry in the directory.
#[repr(C)]
pub struct IndexSlot {
    /// 0 = free, 1 = in use.
    pub in_use: AtomicU32,
    /// Which index (set when the slot is registered).
    pub key: DirectoryLocked<IndexKey>,
    /// Its configuration (set with `key`).
    pub config: DirectoryLocked<PackedConfig>,
    /// OID of the index relation (in database `key.db`), for messages.
    pub relid: AtomicU32,
    /// Flushes of this index's memtables that fail.
    pub flush_failure: FailureState,
    /// Merges and rebuilds of this index's segments that fail.
    pub merge_failure: FailureState,
    /// Set by `strata_flush` / `strata_wait_for_merges`: retry this index's failing work now
    /// instead of at the end of its backoff (the service clears it).
    pub retry_requested: AtomicU32,
    /// Generation of the manifest last published.
    pub manifest_generation: AtomicU64,
    /// Next segment/memtable id to hand out.
    pub next_id: AtomicU64,
    /// The slab receiving inserts (see `strata_lsm::slabs`).
    pub active_slab: ActiveSlab,
    /// 1 once the index has been recovered (or built) since the server started; until then
    /// only the recovering backend and the service's flushes touch it.
    pub ready: AtomicU32,
    /// Set by the service when a memtable was flushed, so the next writer releases its list
    /// from the status pages.
    pub release_pending: AtomicU32,
    /// The memtables the status pages may still list (see [`ListedSet`]): the service merges
    /// only segments none of whose memtables is listed.
    pub listed: ListedSet,
    /// What the last recovery of this index did (since the server started).
    pub recovery: RecoveryCounters,
}

/// Counters of one index recovery, for `strata_index_recovery()`.
#[repr(C)]
#[derive(Default)]
pub struct RecoveryCounters {
    /// When it finished (PostgreSQL timestamp, µs since 2000-01-01); 0 = not recovered.
    pub finished_at: AtomicU64,
    /// How long it took, µs.
    pub micros: AtomicU64,
    /// Memtables the status pages listed.
    pub listed_memtables: AtomicU64,
    /// Status list pages read.
    pub status_pages: AtomicU64,
    /// Segments dropped (newer than `max_memtable_id`).
    pub dropped_segments: AtomicU64,
    /// Rows marked deleted in segment bitmaps.
    pub invalidated_rows: AtomicU64,
    /// Memtables rebuilt from the heap.
    pub rebuilt_memtables: AtomicU64,
    /// Rows re-read from the heap into rebuilt memtables.
    pub reinserted_rows: AtomicU64,
}

/// The header of the shared region.
#[repr(C)]
pub struct Shared {
    magic: u64,
    /// Bytes per slab.
    pub slab_bytes: u64,
    /// Number of slabs.
    pub slab_count: u32,
    /// The index service's latch (null until it starts).
    pub service_latch: AtomicPtr<pg_sys::Latch>,
    /// The index directory.
    pub indexes: [IndexSlot; MAX_INDEXES],
    /// The fault to inject into file writes (test builds only: set by `strata_inject_fault`).
    pub fault: FaultPlan,
}

/// A fault to inject into pg_strata's file writes, shared by every process (set by the test-only
/// SQL function `strata_inject_fault`; all zero means none).
#[repr(C)]
#[derive(Default)]
pub struct FaultPlan {
    /// The `WriteStep` that fails (`0`: none, `255`: every step).
    pub step: AtomicU32,
    /// Which files: 0 = any, 1 = segments, 2 = deletion bitmaps, 3 = the manifest.
    pub file_kind: AtomicU32,
    /// Only files of the index with this relfilenode (0: every index).
    pub relnode: AtomicU32,
    /// The raw OS error to fail with (ENOSPC, EIO, …).
    pub errno: AtomicI32,
    /// Faults left to inject (`-1`: until cleared).
    pub remaining: AtomicI64,
    /// Faults injected since the plan was set.
    pub injected: AtomicU64,
}

static mut SHARED: *mut Shared = std::ptr::null_mut();
static mut SLABS: *mut u8 = std::ptr::null_mut();
/// This process's copy of the slab geometry `(count, bytes per slab)`, set with `SLABS` at attach
/// (the shared header holds the same values): the memtable hot paths check row and bitmap
/// offsets against it without touching the shared header.
static mut SLAB_GEOMETRY: (usize, usize) = (0, 0);
static mut PREV_REQUEST_HOOK: pg_sys::shmem_request_hook_type = None;
static mut PREV_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

fn geometry() -> (usize, usize) {
    let slab_bytes = gucs::MEMTABLE_SLAB_MB.get() as usize * 1024 * 1024;
    let total = gucs::MEMTABLE_MEMORY_MB.get() as usize * 1024 * 1024;
    (slab_bytes, (total / slab_bytes).max(2))
}

fn header_bytes() -> usize {
    std::mem::size_of::<Shared>().div_ceil(4096) * 4096
}

fn region_bytes() -> usize {
    let (slab_bytes, count) = geometry();
    header_bytes() + slab_bytes * count
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn request_hook() {
    // SAFETY: called by the postmaster in the shmem-request phase, where these calls are allowed.
    unsafe {
        if let Some(previous) = PREV_REQUEST_HOOK {
            previous();
        }
        pg_sys::RequestAddinShmemSpace(region_bytes());
        pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1 + MAX_INDEXES as i32);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn startup_hook() {
    // SAFETY: called in every process at shared-memory attach; ShmemInitStruct returns the same
    // region in all of them, initialised once (found == false) under AddinShmemInitLock.
    unsafe {
        if let Some(previous) = PREV_STARTUP_HOOK {
            previous();
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let region = pg_sys::ShmemInitStruct(TRANCHE.as_ptr(), region_bytes(), &raw mut found).cast::<u8>();
        let (slab_bytes, count) = geometry();
        if !found {
            std::ptr::write_bytes(region, 0, header_bytes());
            let shared = region.cast::<Shared>();
            (*shared).magic = MAGIC;
            (*shared).slab_bytes = slab_bytes as u64;
            (*shared).slab_count = count as u32;
            // All-zero slab headers are FREE slabs; all-zero active-slab markers say "none".
            for i in 0..count {
                std::ptr::write_bytes(
                    region.add(header_bytes() + i * slab_bytes),
                    0,
                    strata_lsm::memtable::HEADER_BYTES,
                );
            }
        }
        SHARED = region.cast::<Shared>();
        SLABS = region.add(header_bytes());
        SLAB_GEOMETRY = ((*SHARED).slab_count as usize, (*SHARED).slab_bytes as usize);
        pg_sys::LWLockRelease(lock);
    }
}

/// Installs the shared-memory hooks; called from `_PG_init` during `shared_preload_libraries`.
pub fn install_hooks() {
    // SAFETY: _PG_init runs single-threaded in the postmaster before any hook fires.
    unsafe {
        PREV_REQUEST_HOOK = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request_hook);
        PREV_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(startup_hook);
    }
}

/// The shared header.
///
/// # Panics
/// When pg_strata was not loaded through `shared_preload_libraries`.
pub fn shared() -> &'static Shared {
    // SAFETY: SHARED is set once at attach and points at a region that lives as long as the
    // process; every mutable field is atomic or written only under lock 0 while unused.
    unsafe {
        let ptr = SHARED;
        if ptr.is_null() || (*ptr).magic != MAGIC {
            crate::fmgr::error(
                pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "pg_strata must be loaded via shared_preload_libraries",
            );
        }
        &*ptr
    }
}

/// The shared header if pg_strata's shared memory is attached, without raising an error: callable
/// from helper threads (it never calls PostgreSQL).
#[cfg(feature = "fault-injection")]
pub fn try_shared() -> Option<&'static Shared> {
    // SAFETY: as for `shared`; a null pointer or a wrong magic number means not attached.
    unsafe {
        let ptr = SHARED;
        (!ptr.is_null() && (*ptr).magic == MAGIC).then(|| &*ptr)
    }
}

/// Raw pointer to byte `offset` of slab `index`, after checking that `bytes` bytes from there lie
/// inside the slab (against this process's copy of the geometry: this runs per memtable row).
#[inline]
fn slab_ptr(index: usize, offset: usize, bytes: usize) -> *mut u8 {
    // SAFETY: SLAB_GEOMETRY and SLABS are written once, in the startup hook, before any slab is
    // used in this process, and never again.
    let ((count, slab_bytes), base) = unsafe { (SLAB_GEOMETRY, SLABS) };
    assert!(index < count, "slab {index} out of range");
    assert!(offset + bytes <= slab_bytes, "{bytes} bytes at {offset} lie outside a slab");
    // SAFETY: SLABS points at `count` slabs of `slab_bytes` each, and `offset` lies inside slab
    // `index` (both checked above; a process without the region has count 0 and fails there).
    unsafe { base.add(index * slab_bytes + offset) }
}

/// A word of a memtable bitmap: the atomic `strata_lsm` reads and writes it with.
type BitmapWord = strata_lsm::sync::AtomicU64;

/// The memtable slabs of the shared region, for `strata_lsm`'s lifecycle and memtable protocol.
pub struct SharedSlabs;

/// Lock 0 (the directory), for `strata_lsm`'s lifecycle.
pub struct DirectoryLwLock;

/// The slab lifecycle over the shared region and lock 0.
pub type Slabs = strata_lsm::slabs::Slabs<'static, SharedSlabs, DirectoryLwLock>;

/// The slabs of the shared region with their lifecycle (every state change of a slab).
pub fn slabs() -> Slabs {
    Slabs::new(&SharedSlabs, &DirectoryLwLock)
}

impl SlabMemory for SharedSlabs {
    fn slab_count(&self) -> usize {
        shared().slab_count as usize
    }

    fn header(&self, slab: usize) -> &SlabHeader {
        let header = slab_ptr(slab, 0, strata_lsm::memtable::HEADER_BYTES).cast::<SlabHeader>();
        // SAFETY: every slab starts with HEADER_BYTES for its SlabHeader (which fits, checked in
        // strata_lsm), zeroed at startup (a FREE slab); it is made of atomics, so shared references
        // are sound across processes, and the region lives as long as the process.
        unsafe { &*header }
    }

    fn bitmap_word(&self, slab: usize, layout: &MemtableLayout, bitmap: Bitmap, word: usize) -> &BitmapWord {
        assert!(word < layout.capacity.div_ceil(64), "bitmap word {word} outside a memtable");
        let start = match bitmap {
            Bitmap::Ready => layout.ready_offset,
            Bitmap::Deleted => layout.deleted_offset,
        };
        let word = slab_ptr(slab, start + 8 * word, 8).cast::<BitmapWord>();
        // SAFETY: the word lies inside the slab (checked by slab_ptr) at a multiple of 8 from its
        // 4 KiB-aligned start (bitmaps start at HEADER_BYTES and are whole words); bitmap words
        // are only ever accessed as atomics, and the region lives as long as the process.
        unsafe { &*word }
    }

    fn index_count(&self) -> usize {
        MAX_INDEXES
    }

    fn active_slab(&self, index: usize) -> &ActiveSlab {
        &shared().indexes[index].active_slab
    }

    unsafe fn write_row(&self, slab: usize, layout: &MemtableLayout, slot: usize, tid: u64, vector: &[f32]) {
        let tid_at = slab_ptr(slab, layout.tids_offset + 8 * slot, 8).cast::<u64>();
        let vector_at = slab_ptr(slab, layout.vector_offset(slot), 4 * vector.len()).cast::<f32>();
        // SAFETY: both lie inside the slab (checked by slab_ptr), 8- and 4-aligned (64-aligned
        // arrays); the caller has the slot to itself (write_row's contract), so no one else
        // reads or writes these bytes meanwhile.
        unsafe {
            tid_at.write(tid);
            std::ptr::copy_nonoverlapping(vector.as_ptr(), vector_at, vector.len());
        }
    }

    unsafe fn read_row(&self, slab: usize, layout: &MemtableLayout, slot: usize) -> (u64, &[f32]) {
        let tid_at = slab_ptr(slab, layout.tids_offset + 8 * slot, 8).cast::<u64>();
        let vector_at = slab_ptr(slab, layout.vector_offset(slot), 4 * layout.dims).cast::<f32>();
        // SAFETY: both lie inside the slab (checked by slab_ptr), aligned as in write_row; the
        // row was written before the caller saw its ready bit and is not written while the
        // caller reads it (read_row's contract); the region lives as long as the process.
        unsafe { (tid_at.read(), std::slice::from_raw_parts(vector_at, layout.dims)) }
    }
}

impl DirectoryLock for DirectoryLwLock {
    type Guard<'a> = LockGuard;

    fn lock(&self, mode: LockMode) -> LockGuard {
        directory_lock(mode == LockMode::Exclusive)
    }

    fn is_held(&self, mode: LockMode) -> bool {
        let lock = lock_ptr(0);
        // SAFETY: both only search this process's array of held LWLocks.
        unsafe {
            match mode {
                LockMode::Shared => pg_sys::LWLockHeldByMe(lock),
                LockMode::Exclusive => pg_sys::LWLockHeldByMeInMode(lock, pg_sys::LWLockMode::LW_EXCLUSIVE),
            }
        }
    }
}

/// An acquired LWLock, released on drop.
pub struct LockGuard {
    lock: *mut pg_sys::LWLock,
    /// Which lock of the tranche (0 = the directory).
    number: usize,
    /// Held exclusively.
    exclusive: bool,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // SAFETY: the lock was acquired by this guard in this process.
        unsafe { pg_sys::LWLockRelease(self.lock) };
    }
}

fn lock_ptr(n: usize) -> *mut pg_sys::LWLock {
    // Without preloading, the tranche does not exist: raise the error that names the fix.
    shared();
    // SAFETY: the tranche was requested with 1 + MAX_INDEXES locks; n is below that.
    unsafe {
        assert!(n <= MAX_INDEXES);
        let base = pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr());
        &raw mut (*base.add(n)).lock
    }
}

fn acquire(n: usize, exclusive: bool) -> LockGuard {
    let lock = lock_ptr(n);
    let mode = if exclusive { pg_sys::LWLockMode::LW_EXCLUSIVE } else { pg_sys::LWLockMode::LW_SHARED };
    // SAFETY: a valid LWLock of our tranche; released by the guard.
    unsafe { pg_sys::LWLockAcquire(lock, mode) };
    LockGuard { lock, number: n, exclusive }
}

/// Lock 0 (the directory), shared or exclusive.
pub fn directory_lock(exclusive: bool) -> LockGuard {
    acquire(0, exclusive)
}

/// The manifest lock of directory slot `slot` (exclusive).
pub fn manifest_lock(slot: usize) -> LockGuard {
    acquire(1 + slot, true)
}

/// The manifest lock of directory slot `slot` (exclusive) if it is free now, without waiting.
pub fn try_manifest_lock(slot: usize) -> Option<LockGuard> {
    let lock = lock_ptr(1 + slot);
    // SAFETY: a valid LWLock of our tranche; released by the guard when acquired.
    let acquired = unsafe { pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
    acquired.then_some(LockGuard { lock, number: 1 + slot, exclusive: true })
}

/// Wakes the index service, if it runs.
pub fn wake_service() {
    let latch = shared().service_latch.load(Ordering::Acquire);
    if !latch.is_null() {
        // SAFETY: the service stores its own PGPROC latch, which lives in shared memory for the
        // life of the cluster; SetLatch is safe to call on another process's latch.
        unsafe { pg_sys::SetLatch(latch) };
    }
}
