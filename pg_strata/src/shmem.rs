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

use std::ffi::CStr;
use std::sync::atomic::Ordering;

use pgrx::pg_sys;
use strata_lsm::index_slot::{HeldLock, SharedHeader};
pub use strata_lsm::index_slot::{IndexKey, IndexSlot, MAX_INDEXES};
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::slabs::{ActiveSlab, Bitmap, DirectoryLock, LockMode, RegionLayout, SlabHeader, SlabMemory};

use crate::gucs;

/// Name of the shared memory region and LWLock tranche.
pub const TRANCHE: &CStr = c"pg_strata";

/// The header of the shared region, with the service's latch.
pub type Shared = SharedHeader<pg_sys::Latch>;

static mut SHARED: *mut Shared = std::ptr::null_mut();
static mut SLABS: *mut u8 = std::ptr::null_mut();
/// This process's copy of the region's layout, set with `SLABS` at attach (the shared header holds
/// the same slab geometry): the memtable hot paths check row and bitmap offsets against it without
/// touching the shared header.
static mut LAYOUT: RegionLayout = RegionLayout { header_bytes: 0, slab_bytes: 0, slab_count: 0 };
static mut PREV_REQUEST_HOOK: pg_sys::shmem_request_hook_type = None;
static mut PREV_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

/// The region's layout under the server-start settings.
fn layout() -> RegionLayout {
    let mb = |setting: &pgrx::GucSetting<i32>| setting.get() as usize;
    RegionLayout::new(std::mem::size_of::<Shared>(), mb(&gucs::MEMTABLE_MEMORY_MB), mb(&gucs::MEMTABLE_SLAB_MB))
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn request_hook() {
    // SAFETY: called by the postmaster in the shmem-request phase, where these calls are allowed.
    unsafe {
        if let Some(previous) = PREV_REQUEST_HOOK {
            previous();
        }
        pg_sys::RequestAddinShmemSpace(layout().total_bytes());
        pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1 + MAX_INDEXES as i32);
    }
}

/// The slot of `AddinShmemInitLock` in `MainLWLockArray`. PostgreSQL defines that lock as a C
/// macro, `&MainLWLockArray[21].lock` (`storage/lwlocknames.h`, generated from `lwlocknames.txt`
/// in 15 and 16 and from `lwlocklist.h` in 17 and 18: slot 21 in every supported version), so
/// bindgen has no symbol for it; pgrx takes it the same way (`pgrx::lwlock`). It serialises the
/// find-or-initialise of add-in shared memory between processes attaching at once.
const ADDIN_SHMEM_INIT_LOCK: usize = 21;

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn startup_hook() {
    // SAFETY: called in every process at shared-memory attach; ShmemInitStruct returns the same
    // region in all of them, initialised once (found == false) under AddinShmemInitLock.
    unsafe {
        if let Some(previous) = PREV_STARTUP_HOOK {
            previous();
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(ADDIN_SHMEM_INIT_LOCK)).lock;
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let layout = layout();
        let region = pg_sys::ShmemInitStruct(TRANCHE.as_ptr(), layout.total_bytes(), &raw mut found).cast::<u8>();
        if !found {
            std::ptr::write_bytes(region, 0, layout.header_bytes);
            (*region.cast::<Shared>()).init(&layout);
            // All-zero slab headers are FREE slabs; all-zero active-slab markers say "none".
            for i in 0..layout.slab_count {
                let header = layout.header_bytes + layout.slab_offset(i, 0, strata_lsm::memtable::HEADER_BYTES);
                std::ptr::write_bytes(region.add(header), 0, strata_lsm::memtable::HEADER_BYTES);
            }
        }
        SHARED = region.cast::<Shared>();
        SLABS = region.add(layout.header_bytes);
        LAYOUT = RegionLayout {
            slab_count: (*SHARED).slab_count as usize,
            slab_bytes: (*SHARED).slab_bytes as usize,
            ..layout
        };
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
        if ptr.is_null() || !(*ptr).is_initialised() {
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
    // SAFETY: SHARED is set once at attach and points at a region that lives as long as the
    // process (a null pointer or a wrong magic number means not attached); the reference is
    // shared and every mutable field is atomic or lock-protected.
    unsafe {
        let ptr = SHARED;
        (!ptr.is_null() && (*ptr).is_initialised()).then(|| &*ptr)
    }
}

/// Raw pointer to byte `offset` of slab `index`, after checking that `bytes` bytes from there lie
/// inside the slab (against this process's copy of the geometry: this runs per memtable row).
#[inline]
fn slab_ptr(index: usize, offset: usize, bytes: usize) -> *mut u8 {
    // SAFETY: LAYOUT and SLABS are written once, in the startup hook, before any slab is used in
    // this process, and never again.
    let (layout, base) = unsafe { (LAYOUT, SLABS) };
    let at = layout.slab_offset(index, offset, bytes);
    // SAFETY: SLABS points at `slab_count` slabs of `slab_bytes` each, and the bytes lie inside
    // slab `index` (checked by slab_offset; a process without the region has no slabs and fails
    // there).
    unsafe { base.add(at) }
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

impl HeldLock for LockGuard {
    fn is_directory(&self) -> bool {
        self.number == 0
    }

    fn is_exclusive(&self) -> bool {
        self.exclusive
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
    // `then`, not `then_some`: a guard built while the lock is busy would release, on drop, a
    // lock this process does not hold (an ERROR that ended the index service).
    acquired.then(|| LockGuard { lock, number: 1 + slot, exclusive: true })
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
