//! Memtables: append-only vector buffers in shared-memory slabs.
//!
//! Insert protocol (no global lock): reserve a slot with `fetch_add` on `reserved`; a slot beyond
//! `capacity` means the memtable is full (the writer seals it and moves on); otherwise write the
//! TID and vector, then set the slot's ready bit (release) and bump `written`. Readers skip slots
//! whose ready bit (acquire) is clear, so they never see a half-written vector. Vectors are kept
//! in stored form (L2-normalised for cosine), as segments keep them.

use std::sync::atomic::{AtomicU64, Ordering};

use strata_engine::store::Query;
use strata_lsm::memtable::MemtableLayout;

use crate::shmem::{self, slab_state, SlabHeader};

/// A heap TID packed into 64 bits: block number in the high 32 bits, offset in the low 16.
pub type PackedTid = u64;

/// A view of one slab as a memtable.
#[derive(Clone, Copy)]
pub struct Memtable {
    slab: usize,
    layout: MemtableLayout,
}

/// Outcome of an insert attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// Stored.
    Done,
    /// The memtable is full; seal it and insert into a fresh one.
    Full,
}

impl Memtable {
    /// The memtable in `slab` (whose header says how it is laid out).
    pub fn open(slab: usize) -> Self {
        let header = shmem::slab_header(slab);
        let layout = MemtableLayout::new(
            header.capacity.load(Ordering::Acquire) as usize,
            header.dims.load(Ordering::Acquire) as usize,
        );
        Self { slab, layout }
    }

    /// The slab index.
    pub fn slab(&self) -> usize {
        self.slab
    }

    /// The memtable's SegmentID.
    pub fn segment_id(&self) -> u64 {
        self.header().segment_id.load(Ordering::Acquire)
    }

    /// The slab header.
    pub fn header(&self) -> &'static SlabHeader {
        shmem::slab_header(self.slab)
    }

    fn base(&self) -> *mut u8 {
        shmem::slab_ptr(self.slab)
    }

    fn word(&self, offset: usize, slot: usize) -> &AtomicU64 {
        debug_assert!(slot < self.layout.capacity);
        // SAFETY: bitmaps hold ⌈capacity/64⌉ 8-byte-aligned words at `offset` inside the slab.
        unsafe { &*self.base().add(offset + 8 * (slot / 64)).cast::<AtomicU64>() }
    }

    /// Appends `(tid, vector)`; `vector` is in stored form with the memtable's dimensions.
    pub fn insert(&self, tid: PackedTid, vector: &[f32]) -> Insert {
        assert_eq!(vector.len(), self.layout.dims, "vector dimensions differ from the memtable's");
        let header = self.header();
        let slot = header.reserved.fetch_add(1, Ordering::AcqRel) as usize;
        if slot >= self.layout.capacity {
            return Insert::Full;
        }
        // SAFETY: `slot` was handed to this writer alone by the fetch_add; its TID word and
        // vector bytes lie inside the slab (layout arithmetic) and no reader looks at them before
        // the ready bit is set below with release ordering.
        unsafe {
            let base = self.base();
            base.add(self.layout.tids_offset + 8 * slot).cast::<u64>().write(tid);
            std::ptr::copy_nonoverlapping(
                vector.as_ptr(),
                base.add(self.layout.vector_offset(slot)).cast::<f32>(),
                vector.len(),
            );
        }
        self.word(self.layout.ready_offset, slot).fetch_or(1 << (slot % 64), Ordering::Release);
        header.written.fetch_add(1, Ordering::AcqRel);
        Insert::Done
    }

    /// Slots that may hold data (reserved, capped at capacity).
    fn filled(&self) -> usize {
        (self.header().reserved.load(Ordering::Acquire) as usize).min(self.layout.capacity)
    }

    fn is_ready(&self, slot: usize) -> bool {
        self.word(self.layout.ready_offset, slot).load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    fn is_deleted(&self, slot: usize) -> bool {
        self.word(self.layout.deleted_offset, slot).load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    fn tid(&self, slot: usize) -> PackedTid {
        // SAFETY: slot < capacity and its ready bit was observed (acquire), so the TID is written.
        unsafe { self.base().add(self.layout.tids_offset + 8 * slot).cast::<u64>().read() }
    }

    fn vector(&self, slot: usize) -> &[f32] {
        // SAFETY: as for `tid`; the vector occupies `dims` floats at the slot's offset and is
        // never written again.
        unsafe {
            std::slice::from_raw_parts(self.base().add(self.layout.vector_offset(slot)).cast::<f32>(), self.layout.dims)
        }
    }

    /// Calls `visit(tid, vector)` for every ready, undeleted row.
    pub fn for_each_live(&self, mut visit: impl FnMut(PackedTid, &[f32])) {
        for slot in 0..self.filled() {
            if self.is_ready(slot) && !self.is_deleted(slot) {
                visit(self.tid(slot), self.vector(slot));
            }
        }
    }

    /// Distances from `query` to every live row.
    pub fn distances(&self, query: &Query, mut visit: impl FnMut(PackedTid, f32)) {
        self.for_each_live(|tid, vector| visit(tid, query.distance_f32(vector)));
    }

    /// Marks deleted every live row whose TID `dead` reports; returns how many were marked.
    pub fn delete_where(&self, mut dead: impl FnMut(PackedTid) -> bool) -> u64 {
        let mut removed = 0;
        for slot in 0..self.filled() {
            if self.is_ready(slot) && !self.is_deleted(slot) && dead(self.tid(slot)) {
                self.word(self.layout.deleted_offset, slot).fetch_or(1 << (slot % 64), Ordering::AcqRel);
                removed += 1;
            }
        }
        removed
    }

    /// Live rows counted now.
    pub fn live_rows(&self) -> u64 {
        let mut count = 0;
        self.for_each_live(|_, _| count += 1);
        count
    }

    /// Whether every reserved slot below capacity has been written (a sealed memtable is then
    /// complete and can be flushed).
    pub fn is_complete(&self) -> bool {
        self.header().written.load(Ordering::Acquire) as usize >= self.filled()
    }

    /// Initialises a FREE slab for a new memtable in state `state` (ACTIVE, or RECOVERING for
    /// one refilled by crash recovery). Caller holds the directory lock exclusively.
    pub fn initialise(slab: usize, index_slot: usize, segment_id: u64, layout: MemtableLayout, state: u32) -> Self {
        let header = shmem::slab_header(slab);
        debug_assert_eq!(header.state.load(Ordering::Acquire), slab_state::FREE);
        // SAFETY: the slab is FREE and the caller holds the directory lock exclusively, so no
        // other process reads or writes it; the bitmaps lie inside the slab.
        unsafe {
            let base = shmem::slab_ptr(slab);
            std::ptr::write_bytes(base.add(layout.ready_offset), 0, layout.tids_offset - layout.ready_offset);
        }
        header.index_slot.store(index_slot as u32, Ordering::Relaxed);
        header.segment_id.store(segment_id, Ordering::Relaxed);
        header.capacity.store(layout.capacity as u32, Ordering::Relaxed);
        header.dims.store(layout.dims as u32, Ordering::Relaxed);
        header.reserved.store(0, Ordering::Relaxed);
        header.written.store(0, Ordering::Relaxed);
        header.readers.store(0, Ordering::Relaxed);
        header.writers.store(0, Ordering::Relaxed);
        header.flush_failures.store(0, Ordering::Relaxed);
        header.state.store(state, Ordering::Release);
        Self { slab, layout }
    }
}

/// Packs a heap TID.
pub fn pack_tid(tid: pgrx::pg_sys::ItemPointerData) -> PackedTid {
    let block = (u64::from(tid.ip_blkid.bi_hi) << 16) | u64::from(tid.ip_blkid.bi_lo);
    (block << 16) | u64::from(tid.ip_posid)
}

/// Unpacks a TID packed by [`pack_tid`].
pub fn unpack_tid(packed: PackedTid) -> pgrx::pg_sys::ItemPointerData {
    let block = packed >> 16;
    pgrx::pg_sys::ItemPointerData {
        ip_blkid: pgrx::pg_sys::BlockIdData { bi_hi: (block >> 16) as u16, bi_lo: (block & 0xFFFF) as u16 },
        ip_posid: (packed & 0xFFFF) as u16,
    }
}
