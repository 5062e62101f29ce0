//! Slabs in heap memory and a directory lock, for tests that run inside shuttle (strata-text's
//! tests turn strata-lsm's `shuttle` feature on, so the slab atomics are shuttle's and shuttle
//! schedules writers, flushes and scans against each other).
//!
//! Rows live in plain cells, which shuttle cannot see: every slot has a `writing` flag (a
//! shuttle atomic) that `write_row` raises — yielding in the middle of the write — and
//! `read_row` checks, so a read of a slot being written, or two writers in one slot, fail the
//! test instead of passing unseen.

use std::cell::UnsafeCell;

use shuttle::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use shuttle::thread::ThreadId;
use strata_lsm::memtable::MemtableLayout;
use strata_lsm::slabs::{ActiveSlab, Bitmap, DirectoryLock, LockMode, SlabHeader, SlabMemory};
use strata_lsm::sync::{AtomicU32, AtomicU64, Ordering};

/// `slabs` slabs laid out as `layout`, one index slot.
pub struct HeapRegion {
    headers: Vec<SlabHeader>,
    bitmaps: Vec<[Vec<AtomicU64>; 2]>,
    tids: Vec<Vec<UnsafeCell<u64>>>,
    words: Vec<Vec<UnsafeCell<f32>>>,
    writing: Vec<Vec<AtomicU32>>,
    active: Vec<ActiveSlab>,
    layout: MemtableLayout,
}

// SAFETY: the cells of a slot are written only by `write_row`, whose caller has the slot to
// itself, and read only by `read_row`, whose caller saw the slot's ready bit after the write
// (SlabMemory's contracts); the `writing` flags turn a breach of either into a test failure, and
// shuttle runs one thread at a time. Every other field is an atomic.
unsafe impl Sync for HeapRegion {}

impl HeapRegion {
    /// Make it inside a shuttle run (its atomics are shuttle's).
    pub fn new(slabs: usize, layout: MemtableLayout) -> Self {
        let per_slot = |make: &dyn Fn() -> AtomicU32| (0..layout.capacity).map(|_| make()).collect::<Vec<_>>();
        let bits = || (0..layout.capacity.div_ceil(64)).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Self {
            headers: (0..slabs).map(|_| SlabHeader::default()).collect(),
            bitmaps: (0..slabs).map(|_| [bits(), bits()]).collect(),
            tids: (0..slabs).map(|_| (0..layout.capacity).map(|_| UnsafeCell::new(0)).collect()).collect(),
            words: (0..slabs)
                .map(|_| (0..layout.capacity * layout.dims).map(|_| UnsafeCell::new(0.0)).collect())
                .collect(),
            writing: (0..slabs).map(|_| per_slot(&|| AtomicU32::new(0))).collect(),
            active: vec![ActiveSlab::default()],
            layout,
        }
    }
}

impl SlabMemory for HeapRegion {
    fn slab_count(&self) -> usize {
        self.headers.len()
    }

    fn header(&self, slab: usize) -> &SlabHeader {
        &self.headers[slab]
    }

    fn bitmap_word(&self, slab: usize, _: &MemtableLayout, bitmap: Bitmap, word: usize) -> &AtomicU64 {
        &self.bitmaps[slab][usize::from(bitmap == Bitmap::Deleted)][word]
    }

    fn index_count(&self) -> usize {
        self.active.len()
    }

    fn active_slab(&self, index: usize) -> &ActiveSlab {
        &self.active[index]
    }

    unsafe fn write_row(&self, slab: usize, layout: &MemtableLayout, slot: usize, tid: u64, vector: &[f32]) {
        assert_eq!(*layout, self.layout);
        let flag = &self.writing[slab][slot];
        assert_eq!(flag.swap(1, Ordering::AcqRel), 0, "two writers in slot {slot} of slab {slab}");
        // SAFETY: the caller has the slot to itself (the contract), checked by `writing`.
        unsafe { *self.tids[slab][slot].get() = tid };
        shuttle::thread::yield_now();
        for (cell, &word) in self.words[slab][slot * layout.dims..(slot + 1) * layout.dims].iter().zip(vector) {
            // SAFETY: the caller has the slot to itself (the contract), checked by `writing`: no
            // other reference to this cell exists while it is written.
            unsafe { *cell.get() = word };
        }
        flag.store(0, Ordering::Release);
    }

    unsafe fn read_row(&self, slab: usize, layout: &MemtableLayout, slot: usize) -> (u64, &[f32]) {
        assert_eq!(
            self.writing[slab][slot].load(Ordering::Acquire),
            0,
            "slot {slot} of slab {slab} read while written"
        );
        let row = &self.words[slab][slot * layout.dims..(slot + 1) * layout.dims];
        // SAFETY: the row was written before the caller saw its ready bit and nothing writes it
        // while the caller reads (the contract); `UnsafeCell<f32>` has f32's layout.
        unsafe { (*self.tids[slab][slot].get(), std::slice::from_raw_parts(row.as_ptr().cast::<f32>(), row.len())) }
    }
}

/// A reader–writer lock that knows its holders, so that `is_held` can answer.
#[derive(Default)]
pub struct TestLock {
    lock: RwLock<()>,
    holders: Mutex<Vec<(ThreadId, LockMode)>>,
}

#[allow(dead_code)]
enum Held<'a> {
    Shared(RwLockReadGuard<'a, ()>),
    Exclusive(RwLockWriteGuard<'a, ()>),
}

/// A held [`TestLock`].
pub struct TestGuard<'a> {
    _held: Held<'a>,
    lock: &'a TestLock,
    mode: LockMode,
}

impl Drop for TestGuard<'_> {
    fn drop(&mut self) {
        let me = (shuttle::thread::current().id(), self.mode);
        let mut holders = self.lock.holders.lock().unwrap();
        let at = holders.iter().position(|holder| *holder == me).expect("a guard's holder is recorded");
        holders.swap_remove(at);
    }
}

impl DirectoryLock for TestLock {
    type Guard<'a> = TestGuard<'a>;

    fn lock(&self, mode: LockMode) -> TestGuard<'_> {
        let held = match mode {
            LockMode::Shared => Held::Shared(self.lock.read().unwrap()),
            LockMode::Exclusive => Held::Exclusive(self.lock.write().unwrap()),
        };
        self.holders.lock().unwrap().push((shuttle::thread::current().id(), mode));
        TestGuard { _held: held, lock: self, mode }
    }

    fn is_held(&self, mode: LockMode) -> bool {
        let me = shuttle::thread::current().id();
        self.holders
            .lock()
            .unwrap()
            .iter()
            .any(|&(holder, held)| holder == me && (held == mode || held == LockMode::Exclusive))
    }
}

/// Runs `test` under shuttle's random scheduler and its PCT scheduler (depth 3, which finds
/// interleavings where one thread stalls for long, e.g. a writer between reserve and ready),
/// `schedules` schedules each, with 8 MiB stacks (segment builds need more than shuttle's
/// default 32 KiB).
pub fn explore(test: impl Fn() + Send + Sync + 'static, schedules: usize) {
    let config = || {
        let mut config = shuttle::Config::new();
        config.stack_size = 8 << 20;
        config
    };
    let test = std::sync::Arc::new(test);
    let random = test.clone();
    shuttle::Runner::new(shuttle::scheduler::RandomScheduler::new(schedules), config()).run(move || random());
    shuttle::Runner::new(shuttle::scheduler::PctScheduler::new(3, schedules), config()).run(move || test());
}
