//! A [`SlabMemory`] in heap memory and a [`DirectoryLock`] over a shuttle `RwLock`, for the tests.
//!
//! Rows live in plain cells, whose races shuttle cannot see; so every row carries a `writing`
//! flag (a shuttle atomic) that `write_row` raises and `read_row` checks, and `write_row` yields
//! between the TID and the vector: two writers in one slot, or a read of a slot being written,
//! fail the test with a message instead of passing unseen.

use std::cell::UnsafeCell;

use shuttle::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use shuttle::thread::ThreadId;

use super::{ActiveSlab, Bitmap, DirectoryLock, LockMode, SlabHeader, SlabMemory};
use crate::memtable::MemtableLayout;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

struct Row {
    tid: UnsafeCell<u64>,
    vector: Box<[UnsafeCell<f32>]>,
    writing: AtomicU32,
}

/// `slabs` slabs of up to `max_capacity` rows of up to `max_dims` dimensions, and `indexes`
/// index slots. Make it inside a shuttle run (its atomics are shuttle's).
pub struct TestRegion {
    headers: Vec<SlabHeader>,
    ready: Vec<Vec<AtomicU64>>,
    deleted: Vec<Vec<AtomicU64>>,
    rows: Vec<Vec<Row>>,
    active: Vec<ActiveSlab>,
    max_dims: usize,
}

// SAFETY: the cells of a row are written only by `write_row`, whose caller has the slot to itself,
// and read only by `read_row`, whose caller observed the slot's ready bit after the write
// (SlabMemory's contracts); the flag `writing` turns a breach of either into a test failure.
// Every other field is an atomic.
unsafe impl Sync for TestRegion {}

impl TestRegion {
    pub fn new(slabs: usize, max_capacity: usize, max_dims: usize, indexes: usize) -> Self {
        let words = || (0..max_capacity.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        let row = || Row {
            tid: UnsafeCell::new(0),
            vector: (0..max_dims).map(|_| UnsafeCell::new(0.0)).collect(),
            writing: AtomicU32::new(0),
        };
        Self {
            headers: (0..slabs).map(|_| SlabHeader::default()).collect(),
            ready: (0..slabs).map(|_| words()).collect(),
            deleted: (0..slabs).map(|_| words()).collect(),
            rows: (0..slabs).map(|_| (0..max_capacity).map(|_| row()).collect()).collect(),
            active: (0..indexes).map(|_| ActiveSlab::default()).collect(),
            max_dims,
        }
    }

    fn row(&self, slab: usize, layout: &MemtableLayout, slot: usize) -> &Row {
        assert!(slot < layout.capacity && layout.dims <= self.max_dims, "row outside the layout");
        &self.rows[slab][slot]
    }
}

impl SlabMemory for TestRegion {
    fn slab_count(&self) -> usize {
        self.headers.len()
    }

    fn header(&self, slab: usize) -> &SlabHeader {
        &self.headers[slab]
    }

    fn bitmap_word(&self, slab: usize, layout: &MemtableLayout, bitmap: Bitmap, word: usize) -> &AtomicU64 {
        assert!(word < layout.capacity.div_ceil(64), "bitmap word outside the layout");
        match bitmap {
            Bitmap::Ready => &self.ready[slab][word],
            Bitmap::Deleted => &self.deleted[slab][word],
        }
    }

    fn index_count(&self) -> usize {
        self.active.len()
    }

    fn active_slab(&self, index: usize) -> &ActiveSlab {
        &self.active[index]
    }

    unsafe fn write_row(&self, slab: usize, layout: &MemtableLayout, slot: usize, tid: u64, vector: &[f32]) {
        let row = self.row(slab, layout, slot);
        assert_eq!(row.writing.swap(1, Ordering::AcqRel), 0, "two writers in slot {slot} of slab {slab}");
        // SAFETY: the caller has the slot to itself (write_row's contract), checked by `writing`.
        unsafe { *row.tid.get() = tid };
        shuttle::thread::yield_now();
        for (cell, &value) in row.vector.iter().zip(vector) {
            // SAFETY: the caller has the slot to itself (write_row's contract), checked by
            // `writing`: no other reference to this cell exists while it is written.
            unsafe { *cell.get() = value };
        }
        row.writing.store(0, Ordering::Release);
    }

    unsafe fn read_row(&self, slab: usize, layout: &MemtableLayout, slot: usize) -> (u64, &[f32]) {
        let row = self.row(slab, layout, slot);
        assert_eq!(row.writing.load(Ordering::Acquire), 0, "slot {slot} of slab {slab} read while it is written");
        // SAFETY: the row was written before the caller saw its ready bit and nothing writes it
        // while the caller reads (read_row's contract); `UnsafeCell<f32>` has f32's layout, so
        // the first `dims` cells are a slice of f32.
        unsafe { (*row.tid.get(), std::slice::from_raw_parts(row.vector.as_ptr().cast::<f32>(), layout.dims)) }
    }
}

/// A reader–writer lock that knows its holders, so that `is_held` can answer.
#[derive(Default)]
pub struct TestLock {
    lock: RwLock<()>,
    holders: Mutex<Vec<(ThreadId, LockMode)>>,
}

/// The lock held in one mode: kept for its drop, never read.
#[allow(dead_code)]
enum Held<'a> {
    Shared(RwLockReadGuard<'a, ()>),
    Exclusive(RwLockWriteGuard<'a, ()>),
}

/// A held [`TestLock`]; forgets its holder before releasing the lock.
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

/// A held [`TestLock`] is the directory lock of the index directory's [`HeldLock`] checks.
impl crate::index_slot::HeldLock for TestGuard<'_> {
    fn is_directory(&self) -> bool {
        true
    }

    fn is_exclusive(&self) -> bool {
        self.mode == LockMode::Exclusive
    }
}
