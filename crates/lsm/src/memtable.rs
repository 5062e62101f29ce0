//! Memtables: append-only buffers of `(TID, vector)` rows in slabs of a [`SlabMemory`].
//!
//! The append protocol takes no lock: a writer reserves a slot with a `fetch_add` on the slab's
//! reservation counter; a slot at or past the capacity means the memtable is full (the writer
//! seals it and moves on to a new one). Otherwise it writes the TID and the vector, sets the
//! slot's ready bit with release ordering and counts the slot as written. Readers load the ready
//! bits with acquire ordering and skip unready slots, so they never see a half-written row; a
//! memtable is complete when every reserved slot is written. Vectors are kept in stored form
//! (L2-normalised for cosine), as segments keep them. Who may insert, read and reuse a slab is
//! the lifecycle's business ([`crate::slabs`]).

mod layout;
pub mod spans;

pub use layout::{MemtableLayout, NoRowFits, HEADER_BYTES};
pub use spans::SpanTooLong;

use crate::slabs::{Bitmap, SlabHeader, SlabMemory};
use crate::sync::Ordering;

/// Outcome of an insert attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// The row is stored.
    Done,
    /// The memtable is full; seal it and insert into a fresh one.
    Full,
}

/// How rows sit in a memtable's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowShape {
    /// One row per slot (vectors): slot `i` of an ABSORBING memtable is list position `i`.
    Fixed,
    /// Span rows of one or more slots ([`spans`], text documents): list position `i` of an
    /// ABSORBING memtable is its `i`-th row (`Memtable::span_heads`).
    Spans,
}

/// A view of the memtable in one slab, with the layout its header described when the view was
/// made. A view guarantees nothing about what the slab holds later: readers hold a reader count
/// ([`ReadSnapshot`](crate::slabs::ReadSnapshot)), writers a pin ([`WriterPin`](crate::slabs::WriterPin)).
pub struct Memtable<'r, M: ?Sized> {
    memory: &'r M,
    slab: usize,
    layout: MemtableLayout,
}

impl<M: ?Sized> Clone for Memtable<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M: ?Sized> Copy for Memtable<'_, M> {}

impl<M: ?Sized> std::fmt::Debug for Memtable<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memtable").field("slab", &self.slab).field("layout", &self.layout).finish()
    }
}

impl<'r, M: SlabMemory + ?Sized> Memtable<'r, M> {
    /// The memtable slab `slab` holds now, laid out as its header says.
    pub fn open(memory: &'r M, slab: usize) -> Self {
        let header = memory.header(slab);
        Self { memory, slab, layout: MemtableLayout::new(header.capacity(), header.dims()) }
    }

    /// The slab number.
    pub fn slab(&self) -> usize {
        self.slab
    }

    /// The layout.
    pub fn layout(&self) -> &MemtableLayout {
        &self.layout
    }

    /// The slab's header.
    pub fn header(&self) -> &'r SlabHeader {
        self.memory.header(self.slab)
    }

    /// The SegmentID of the memtable the slab holds now.
    pub fn segment_id(&self) -> u64 {
        self.header().segment_id()
    }

    fn word(&self, bitmap: Bitmap, word: usize) -> &'r crate::sync::AtomicU64 {
        self.memory.bitmap_word(self.slab, &self.layout, bitmap, word)
    }

    /// Appends `(tid, vector)` (`vector` in stored form, with the memtable's dimensions).
    /// The caller may append: it pins the ACTIVE memtable, or refills a RECOVERING one it took.
    pub(crate) fn insert(&self, tid: u64, vector: &[f32]) -> Insert {
        assert_eq!(vector.len(), self.layout.dims, "vector dimensions differ from the memtable's");
        let header = self.header();
        let slot = header.reserve();
        if slot >= self.layout.capacity {
            return Insert::Full;
        }
        self.write_reserved(slot, tid, vector);
        Insert::Done
    }

    /// Writes `(tid, vector)` into `slot`, which this writer reserved (`SlabHeader::reserve`
    /// handed it out, below the capacity), and publishes it (its ready bit). `vector` has the
    /// memtable's dimensions.
    pub(crate) fn write_reserved(&self, slot: usize, tid: u64, vector: &[f32]) {
        assert!(slot < self.layout.capacity, "slot {slot} past the capacity");
        assert_eq!(vector.len(), self.layout.dims, "vector dimensions differ from the memtable's");
        // SAFETY: the reservation's fetch_add handed `slot` (< capacity, checked) to this writer
        // alone; its ready bit is clear (bitmaps are zeroed when the slab is taken and only the
        // slot's writer sets the bit, below), so no reader reads the row before the release store
        // publishes it; the layout is the one the header described, the dimensions are checked.
        unsafe { self.memory.write_row(self.slab, &self.layout, slot, tid, vector) };
        self.word(Bitmap::Ready, slot / 64).fetch_or(1 << (slot % 64), Ordering::Release);
        self.header().count_written();
    }

    /// Calls `visit(slot, tid, vector)` for every ready row not marked deleted, skipping slots
    /// whose TID is 0 (a span row's continuation slots, [`spans`], and absorbers' placeholders).
    fn for_each_live_slot(&self, visit: impl FnMut(usize, u64, &[f32])) {
        self.for_each_ready_slot(false, visit);
    }

    /// Rows written (ready, TID not 0), deleted or not: a span row counts once.
    pub fn written_rows(&self) -> u64 {
        let mut count = 0;
        self.for_each_ready_slot(true, |_, _, _| count += 1);
        count
    }

    /// [`Memtable::for_each_live_slot`], also visiting rows marked deleted when `with_deleted`.
    fn for_each_ready_slot(&self, with_deleted: bool, mut visit: impl FnMut(usize, u64, &[f32])) {
        let filled = self.header().filled();
        for word in 0..filled.div_ceil(64) {
            let ready = self.word(Bitmap::Ready, word).load(Ordering::Acquire);
            let deleted = if with_deleted { 0 } else { self.word(Bitmap::Deleted, word).load(Ordering::Acquire) };
            let mut live = ready & !deleted;
            while live != 0 {
                let slot = word * 64 + live.trailing_zeros() as usize;
                live &= live - 1;
                if slot >= self.layout.capacity {
                    break;
                }
                // SAFETY: the slot's ready bit was loaded set with acquire ordering, so its row
                // is completely written and never written again while the slab holds this
                // memtable; callers read only memtables they hold (a reader count, a pin, or a
                // flush), which keeps the slab from being reused; slot < capacity.
                let (tid, vector) = unsafe { self.memory.read_row(self.slab, &self.layout, slot) };
                if tid != 0 {
                    visit(slot, tid, vector);
                }
            }
        }
    }

    /// The TID and stored row of `slot` when it is ready, not marked deleted and not TID 0
    /// (`None` otherwise, and for a slot past the capacity). The caller holds the memtable, as for
    /// [`Memtable::for_each_live`].
    pub fn live_row(&self, slot: usize) -> Option<(u64, &'r [f32])> {
        if slot >= self.layout.capacity || slot >= self.header().filled() {
            return None;
        }
        let bit = 1u64 << (slot % 64);
        let ready = self.word(Bitmap::Ready, slot / 64).load(Ordering::Acquire) & bit != 0;
        if !ready || self.word(Bitmap::Deleted, slot / 64).load(Ordering::Acquire) & bit != 0 {
            return None;
        }
        // SAFETY: as in `for_each_live_slot`: the ready bit was loaded set with acquire ordering,
        // so the row is completely written and never written again while the slab holds this
        // memtable, which the caller's hold keeps; slot < capacity.
        let (tid, row) = unsafe { self.memory.read_row(self.slab, &self.layout, slot) };
        (tid != 0).then_some((tid, row))
    }

    /// The end of the run of ready slots from `from`: the first slot at or after `from` (and
    /// below the filled count) that a writer reserved and has not finished, or the filled count
    /// when every slot from `from` is ready. Every slot in `from..end` holds a complete row (live
    /// or deleted) that will not change but for its deleted bit.
    pub fn ready_through(&self, from: usize) -> usize {
        let filled = self.header().filled().min(self.layout.capacity);
        let mut slot = from;
        while slot < filled {
            let word = self.word(Bitmap::Ready, slot / 64).load(Ordering::Acquire);
            // Not-ready bits of this word from `slot` on.
            let missing = !word & (u64::MAX << (slot % 64));
            if missing != 0 {
                return (slot / 64 * 64 + missing.trailing_zeros() as usize).min(filled);
            }
            slot = (slot / 64 + 1) * 64;
        }
        filled
    }

    /// Calls `visit(tid, vector)` for every ready row not marked deleted. The caller holds the
    /// memtable (a reader count, a writer pin, or a flush it began).
    pub fn for_each_live(&self, mut visit: impl FnMut(u64, &[f32])) {
        self.for_each_live_slot(|_, tid, vector| visit(tid, vector));
    }

    /// Marks deleted every live row whose TID `dead` reports; returns how many it marked. The
    /// caller holds the memtable, as for [`Memtable::for_each_live`].
    pub fn delete_where(&self, mut dead: impl FnMut(u64) -> bool) -> u64 {
        let mut marked = Vec::new();
        self.for_each_live_slot(|slot, tid, _| {
            if dead(tid) {
                marked.push(slot);
            }
        });
        for &slot in &marked {
            self.word(Bitmap::Deleted, slot / 64).fetch_or(1 << (slot % 64), Ordering::AcqRel);
        }
        marked.len() as u64
    }

    /// Marks deleted the rows whose first slots are `slots` (absorbers' placeholders and the rows
    /// of list positions). The caller holds the memtable.
    pub fn delete_slots(&self, slots: &[usize]) {
        for &slot in slots {
            self.word(Bitmap::Deleted, slot / 64).fetch_or(1 << (slot % 64), Ordering::AcqRel);
        }
    }

    /// Per written slot, in slot order, the TID of its row, or 0 where the row is deleted (or a
    /// slot is reserved but not written). The caller holds the memtable.
    pub fn slot_tids(&self) -> Vec<u64> {
        let mut tids = vec![0; self.header().filled().min(self.layout.capacity)];
        self.for_each_live_slot(|slot, tid, _| tids[slot] = tid);
        tids
    }

    /// The slot of every list position of an ABSORBING memtable whose rows have `shape` (a row's
    /// first slot; see [`Memtable::span_heads`] for who may call it with span rows).
    pub(crate) fn position_slots(&self, shape: RowShape) -> Vec<usize> {
        match shape {
            RowShape::Fixed => (0..self.header().filled().min(self.layout.capacity)).collect(),
            RowShape::Spans => self.span_heads(),
        }
    }

    /// Per list position of an ABSORBING memtable whose rows have `shape`, the TID of its row, or
    /// 0 where the row is deleted or a placeholder ([`Memtable::slot_tids`] by position).
    pub(crate) fn position_tids(&self, shape: RowShape) -> Vec<u64> {
        match shape {
            RowShape::Fixed => self.slot_tids(),
            RowShape::Spans => {
                self.span_heads().into_iter().map(|slot| self.live_row(slot).map_or(0, |(tid, _)| tid)).collect()
            }
        }
    }

    /// Marks deleted the rows of list positions `positions` of an ABSORBING memtable whose rows
    /// have `shape` (every position a row the memtable holds, as the follower passes them).
    pub(crate) fn delete_positions(&self, shape: RowShape, positions: &[usize]) {
        let slots = match shape {
            RowShape::Fixed => positions.to_vec(),
            RowShape::Spans => {
                let heads = self.span_heads();
                positions.iter().filter_map(|&p| heads.get(p).copied()).collect()
            }
        };
        self.delete_slots(&slots);
    }

    /// Live rows counted now.
    pub fn live_rows(&self) -> u64 {
        let mut count = 0;
        self.for_each_live(|_, _| count += 1);
        count
    }

    /// Whether every reserved slot below the capacity is written: a sealed memtable that is
    /// complete holds all the rows it will ever hold.
    pub fn is_complete(&self) -> bool {
        let header = self.header();
        header.written() >= header.filled()
    }

    /// Makes the FREE slab `slab` an empty memtable of index `index` with SegmentID `segment_id`
    /// laid out as `layout`, in state `state`. The caller holds the directory lock exclusively
    /// and found the slab FREE under it, so no one else reads or writes the slab: its last
    /// readers and writers are gone (a slab becomes FREE only without them).
    pub(crate) fn initialise(
        memory: &'r M,
        slab: usize,
        index: usize,
        segment_id: u64,
        layout: MemtableLayout,
        state: crate::slabs::SlabState,
    ) -> Self {
        let header = memory.header(slab);
        debug_assert_eq!(header.state(), crate::slabs::SlabState::Free);
        for word in 0..layout.capacity.div_ceil(64) {
            for bitmap in [Bitmap::Ready, Bitmap::Deleted] {
                memory.bitmap_word(slab, &layout, bitmap, word).store(0, Ordering::Relaxed);
            }
        }
        header.describe(index, segment_id, layout.capacity, layout.dims);
        header.set_state(state);
        Self { memory, slab, layout }
    }
}
