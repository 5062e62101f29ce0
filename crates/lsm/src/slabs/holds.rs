//! The ways a thread holds a slab: a writer's pin, a scan's reader counts, a slab being allocated
//! and a slab being refilled by recovery. Each keeps the slab from being flushed, freed or reused
//! under its holder, and lets go when dropped (also when unwinding).

use super::header::SlabState;
use super::region::{DirectoryLock, LockMode, SlabMemory};
use super::Slabs;
use crate::memtable::{Insert, Memtable, SpanTooLong};

/// A writer's pin of its index's ACTIVE memtable, from [`Slabs::pin_active`].
///
/// While pinned, the memtable is not flushed ([`Slabs::begin_flush`] refuses pinned memtables),
/// so every row the writer appends and every TID it records elsewhere afterwards (pg_strata: in
/// the status pages) is there before the flush reads the memtable. The pin is dropped with this
/// value.
pub struct WriterPin<'r, M: SlabMemory + ?Sized> {
    pub(super) memtable: Memtable<'r, M>,
    pub(super) segment_id: u64,
}

impl<'r, M: SlabMemory + ?Sized> WriterPin<'r, M> {
    /// The pinned memtable.
    pub fn memtable(&self) -> &Memtable<'r, M> {
        &self.memtable
    }

    /// The slab number.
    pub fn slab(&self) -> usize {
        self.memtable.slab()
    }

    /// The memtable's SegmentID (stable while pinned).
    pub fn segment_id(&self) -> u64 {
        self.segment_id
    }

    /// Appends `(tid, vector)` (stored form, the index's dimensions); [`Insert::Full`] when the
    /// memtable is full: drop the pin, seal it ([`Slabs::seal`]) and pin the next one.
    pub fn insert(&self, tid: u64, vector: &[f32]) -> Insert {
        self.memtable.insert(tid, vector)
    }

    /// Appends span row `(tid, words)` ([`crate::memtable::spans`]); an error when the row
    /// does not fit in a memtable of this layout at all, [`Insert::Full`] as for
    /// [`WriterPin::insert`].
    pub fn insert_span(&self, tid: u64, words: &[u32]) -> Result<Insert, SpanTooLong> {
        self.memtable.layout().check_span(words.len())?;
        Ok(self.memtable.insert_span(tid, words))
    }

    /// Drops the pin; returns whether it was the last pin of a SEALED memtable (a flush may
    /// start now: wake the flusher).
    pub fn unpin(self) -> bool {
        let this = std::mem::ManuallyDrop::new(self);
        let left = this.memtable.header().drop_writer();
        left == 0 && this.memtable.header().state() == SlabState::Sealed
    }
}

impl<M: SlabMemory + ?Sized> Drop for WriterPin<'_, M> {
    fn drop(&mut self) {
        self.memtable.header().drop_writer();
    }
}

/// The searchable memtables of one index with their reader counts raised, from
/// [`Slabs::snapshot`]: none of them is freed (so none is reused) until this is dropped, which
/// lowers the counts (also when unwinding). Dereferences to the memtables.
pub struct ReadSnapshot<'r, M: SlabMemory + ?Sized> {
    pub(super) memtables: Vec<Memtable<'r, M>>,
}

impl<'r, M: SlabMemory + ?Sized> std::ops::Deref for ReadSnapshot<'r, M> {
    type Target = [Memtable<'r, M>];

    fn deref(&self) -> &Self::Target {
        &self.memtables
    }
}

impl<M: SlabMemory + ?Sized> ReadSnapshot<'_, M> {
    /// Leaves out (and stops reading) the memtables whose rows `held(segment_id)` says are held
    /// elsewhere. A reader pairs the snapshot, taken at published generation `g`, with a segment
    /// set of generation `g` *or newer* (a process's cached set, or the manifest on disk, which a
    /// flush writes before it publishes): a memtable flushed meanwhile is then in both, and
    /// reading it twice counts its rows twice (BM25 statistics, `strata_index_stats`) even where
    /// results are deduplicated by TID. With `held = |id| set.covers(id)` every row is in exactly
    /// one of the snapshot and the set again.
    pub fn release_held(&mut self, held: impl Fn(u64) -> bool) {
        self.memtables.retain(|memtable| {
            let keep = !held(memtable.segment_id());
            if !keep {
                memtable.header().drop_reader();
            }
            keep
        });
    }
}

impl<M: SlabMemory + ?Sized> Drop for ReadSnapshot<'_, M> {
    fn drop(&mut self) {
        for memtable in &self.memtables {
            memtable.header().drop_reader();
        }
    }
}

/// A slab taken for a new memtable that is being registered (state ALLOCATING), from
/// [`Slabs::allocate`]: invisible to writers and scans until [`Allocation::activate`]; returned to
/// FREE when dropped without being activated (registration failed).
pub struct Allocation<'r, M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized> {
    pub(super) slabs: Slabs<'r, M, L>,
    pub(super) index: usize,
    pub(super) memtable: Memtable<'r, M>,
    pub(super) segment_id: u64,
    pub(super) settled: bool,
}

impl<M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized> Allocation<'_, M, L> {
    /// The new memtable's SegmentID.
    pub fn segment_id(&self) -> u64 {
        self.segment_id
    }

    /// The slab number.
    pub fn slab(&self) -> usize {
        self.memtable.slab()
    }

    /// ALLOCATING → ACTIVE: the memtable becomes its index's active one, which writers pin.
    /// Takes the directory lock exclusively. Returns false (and changes nothing) when the slab no
    /// longer holds it (the index was released meanwhile).
    pub fn activate(mut self) -> bool {
        self.settled = true;
        let _lock = self.slabs.lock.lock(LockMode::Exclusive);
        let header = self.memtable.header();
        let ours = self.slabs.info(self.slab()).holds(self.index, self.segment_id);
        if !ours || header.state() != SlabState::Allocating {
            return false;
        }
        header.set_state(SlabState::Active);
        self.slabs.memory.active_slab(self.index).set(Some(self.slab()));
        true
    }
}

impl<M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized> Drop for Allocation<'_, M, L> {
    /// ALLOCATING → FREE unless activated (takes the directory lock exclusively).
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let _lock = self.slabs.lock.lock(LockMode::Exclusive);
        let header = self.memtable.header();
        if self.slabs.info(self.slab()).holds(self.index, self.segment_id) && header.state() == SlabState::Allocating {
            header.set_state(SlabState::Free);
        }
    }
}

/// A slab crash recovery took from FREE (state RECOVERING) to refill a lost memtable, from
/// [`Slabs::take_for_recovery`]: only its taker writes it, nothing reads it, and
/// [`Slabs::finish_recovery`] hands it to the flusher.
pub struct RecoveringMemtable<'r, M: SlabMemory + ?Sized> {
    pub(super) memtable: Memtable<'r, M>,
}

impl<'r, M: SlabMemory + ?Sized> RecoveringMemtable<'r, M> {
    /// The memtable.
    pub fn memtable(&self) -> &Memtable<'r, M> {
        &self.memtable
    }

    /// Appends a recovered row; [`Insert::Full`] past the capacity.
    pub fn insert(&self, tid: u64, vector: &[f32]) -> Insert {
        self.memtable.insert(tid, vector)
    }

    /// Appends a recovered span row, as [`WriterPin::insert_span`].
    pub fn insert_span(&self, tid: u64, words: &[u32]) -> Result<Insert, SpanTooLong> {
        self.memtable.layout().check_span(words.len())?;
        Ok(self.memtable.insert_span(tid, words))
    }
}

/// An ABSORBING memtable (see [`SlabState::Absorbing`](super::SlabState::Absorbing)): only the
/// absorber, which holds its index's manifest lock, appends to it.
pub struct AbsorbingMemtable<'r, M: SlabMemory + ?Sized> {
    pub(super) memtable: Memtable<'r, M>,
}

impl<'r, M: SlabMemory + ?Sized> AbsorbingMemtable<'r, M> {
    /// The memtable.
    pub fn memtable(&self) -> &Memtable<'r, M> {
        &self.memtable
    }

    /// Appends the row of the next list position; [`Insert::Full`] past the capacity.
    pub fn insert(&self, tid: u64, vector: &[f32]) -> Insert {
        self.memtable.insert(tid, vector)
    }

    /// Appends span row `(tid, words)` at the next list position, as [`WriterPin::insert_span`].
    pub fn insert_span(&self, tid: u64, words: &[u32]) -> Result<Insert, SpanTooLong> {
        let layout = self.memtable.layout();
        layout.check_span(words.len())?;
        // The only writer: a row that does not fit is refused before it takes any slot, so no
        // row is cut at the capacity (positions stay the rows of `span_heads`).
        if self.memtable.header().filled() + layout.span_slots(words.len()) > layout.capacity {
            return Ok(Insert::Full);
        }
        Ok(self.memtable.insert_span(tid, words))
    }

    /// Appends a deleted placeholder for a list position whose TID was removed or whose heap
    /// tuple is gone: one slot with TID 0, so slot = position for fixed rows, and a one-slot row
    /// between span rows (`Memtable::span_heads`); [`Insert::Full`] past the
    /// capacity.
    pub fn insert_placeholder(&self) -> Insert {
        let slot = self.memtable.header().filled();
        let inserted = self.memtable.insert(0, &vec![0.0; self.memtable.layout().dims]);
        if inserted == Insert::Done {
            self.memtable.delete_slots(&[slot]);
        }
        inserted
    }
}
