//! The slab lifecycle: which memtable a slab holds, who may write and read it, when it is flushed
//! and when it is free again.
//!
//! A fixed pool of slabs lives in a region shared by every process ([`SlabMemory`]). Each slab is
//! in one [`SlabState`]; every state change is a method of [`Slabs`] made under the directory
//! lock ([`DirectoryLock`]) held exclusively, after checking its precondition there. Three
//! counters in the slab's header keep the transitions safe without a lock on the hot paths:
//!
//! - **writer pins** ([`Slabs::pin_active`]): taken under the shared lock while the memtable is
//!   ACTIVE, dropped after the writer has recorded its row elsewhere; [`Slabs::begin_flush`]
//!   starts only without pins, and a SEALED memtable takes no new ones, so a flush reads every
//!   row that was appended to the memtable;
//! - **written slots**: a flush also waits until every reserved slot is written
//!   ([`Memtable::is_complete`]);
//! - **readers** ([`Slabs::snapshot`]): raised under the shared lock with the snapshot, so a scan
//!   sees each memtable either searchable (and holds it) or flushed (and reads its segment);
//!   [`Slabs::free_unread`] frees only FLUSHED slabs without readers (and without writers), so a
//!   slab is never reused under a scan.
//!
//! The tests (`slabs/interleavings.rs`) run writers, sealers, flushers and scans against each
//! other under shuttle.

mod header;
mod holds;
mod query;
mod region;

// The tests run with the `shuttle` feature (this crate's dev-dependency on itself turns it on).
#[cfg(all(test, feature = "shuttle"))]
mod interleavings;
#[cfg(all(test, feature = "shuttle"))]
pub(crate) mod test_region;
#[cfg(all(test, feature = "shuttle"))]
mod tests;

pub use header::{ActiveSlab, SlabHeader, SlabState, UnknownSlabState};
pub use holds::{AbsorbingMemtable, Allocation, ReadSnapshot, RecoveringMemtable, WriterPin};
pub use query::{NotFlushable, SlabCounts, SlabInfo};
pub use region::{Bitmap, DirectoryLock, LockMode, RegionLayout, SlabMemory};

use crate::memtable::{Memtable, MemtableLayout};

/// No slab is FREE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no free memtable slab")]
pub struct NoFreeSlab;

/// An index's memtables waiting for their flush (SEALED or FLUSHING), as
/// [`Slabs::flush_backlog`] read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushBacklog {
    /// How many there are.
    pub memtables: usize,
    /// Whether the flush of any of them has failed (and not succeeded since).
    pub failing: bool,
}

impl FlushBacklog {
    /// Whether the index's writers wait at a backlog limit of `max_waiting` memtables: that many
    /// are waiting and no flush of theirs fails (a failing index is not stalled; see
    /// [`crate::writer::Allocated::Backlogged`]).
    /// `max_waiting` 0 is no limit.
    pub fn is_stalled_at(&self, max_waiting: usize) -> bool {
        max_waiting > 0 && self.memtables >= max_waiting && !self.failing
    }
}

/// The slabs of a region with the lock that orders their state changes: every transition of the
/// lifecycle, each with its precondition checked under the lock.
///
/// Methods say whether they take the directory lock; those ending in `_locked` require the
/// caller to hold it exclusively (asserted), and no method may be called with it held otherwise.
pub struct Slabs<'r, M: ?Sized, L: ?Sized> {
    memory: &'r M,
    lock: &'r L,
}

impl<M: ?Sized, L: ?Sized> Clone for Slabs<'_, M, L> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M: ?Sized, L: ?Sized> Copy for Slabs<'_, M, L> {}

impl<'r, M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized> Slabs<'r, M, L> {
    /// The slabs of `memory`, whose state changes `lock` orders.
    pub fn new(memory: &'r M, lock: &'r L) -> Self {
        Self { memory, lock }
    }

    /// The region.
    pub fn memory(&self) -> &'r M {
        self.memory
    }

    /// The lock that orders the slabs' state changes (for callers that publish something in the
    /// same exclusive hold as a transition, as a flush does).
    pub fn lock(&self) -> &'r L {
        self.lock
    }

    /// A view of the memtable slab `slab` holds now (no lock; holds nothing).
    pub fn memtable(&self, slab: usize) -> Memtable<'r, M> {
        Memtable::open(self.memory, slab)
    }

    /// Slab `slab`'s header as it is now (no lock).
    pub fn info(&self, slab: usize) -> SlabInfo {
        SlabInfo::read(slab, self.memory.header(slab))
    }

    /// Every slab's header, read under the shared lock: states and memtable identities are those
    /// of one moment.
    pub fn infos(&self) -> Vec<SlabInfo> {
        let _lock = self.lock.lock(LockMode::Shared);
        (0..self.memory.slab_count()).map(|slab| self.info(slab)).collect()
    }

    /// How many slabs are in each state (under the shared lock).
    pub fn counts(&self) -> SlabCounts {
        SlabCounts::of(&self.infos())
    }

    /// The first FREE slab; the caller holds the lock exclusively.
    fn free_slab(&self) -> Result<usize, NoFreeSlab> {
        (0..self.memory.slab_count())
            .find(|&slab| self.memory.header(slab).state() == SlabState::Free)
            .ok_or(NoFreeSlab)
    }

    /// FREE → ALLOCATING: takes a free slab for a new memtable of index `index` laid out as
    /// `layout`, whose SegmentID `segment_id` hands out under the lock. Takes the lock
    /// exclusively. Register the memtable, then [`Allocation::activate`] it; dropping the
    /// allocation frees the slab.
    pub fn allocate(
        &self,
        index: usize,
        layout: MemtableLayout,
        segment_id: impl FnOnce() -> u64,
    ) -> Result<Allocation<'r, M, L>, NoFreeSlab> {
        let _lock = self.lock.lock(LockMode::Exclusive);
        let slab = self.free_slab()?;
        let segment_id = segment_id();
        let memtable = Memtable::initialise(self.memory, slab, index, segment_id, layout, SlabState::Allocating);
        Ok(Allocation { slabs: *self, index, memtable, segment_id, settled: false })
    }

    /// FREE → RECOVERING: takes a free slab to refill memtable `segment_id` of index `index`
    /// after a crash. Takes the lock exclusively. Hand it over with [`Slabs::finish_recovery`].
    pub fn take_for_recovery(
        &self,
        index: usize,
        layout: MemtableLayout,
        segment_id: u64,
    ) -> Result<RecoveringMemtable<'r, M>, NoFreeSlab> {
        let _lock = self.lock.lock(LockMode::Exclusive);
        let slab = self.free_slab()?;
        let memtable = Memtable::initialise(self.memory, slab, index, segment_id, layout, SlabState::Recovering);
        Ok(RecoveringMemtable { memtable })
    }

    /// FREE → ABSORBING: an empty memtable for open group `group` of index `index`, which the
    /// absorber fills in list order. Takes the lock exclusively.
    pub fn take_for_absorb(
        &self,
        index: usize,
        layout: MemtableLayout,
        group: u64,
    ) -> Result<AbsorbingMemtable<'r, M>, NoFreeSlab> {
        let _lock = self.lock.lock(LockMode::Exclusive);
        let slab = self.free_slab()?;
        let memtable = Memtable::initialise(self.memory, slab, index, group, layout, SlabState::Absorbing);
        Ok(AbsorbingMemtable { memtable })
    }

    /// The ABSORBING memtable of index `index` holding group `group`, if any. The caller is the
    /// absorber (it holds the index's manifest lock), so the slab stays ABSORBING while it uses it.
    pub fn absorbing(&self, index: usize, group: u64) -> Option<AbsorbingMemtable<'r, M>> {
        let _lock = self.lock.lock(LockMode::Shared);
        (0..self.memory.slab_count())
            .find(|&slab| {
                let info = self.info(slab);
                info.state == SlabState::Absorbing && info.holds(index, group)
            })
            .map(|slab| AbsorbingMemtable { memtable: self.memtable(slab) })
    }

    /// ABSORBING → SEALED: the group settled (or left the log); the flusher takes it from here.
    /// Takes the lock exclusively.
    pub fn seal_absorbed(&self, memtable: &AbsorbingMemtable<'r, M>) {
        let _lock = self.lock.lock(LockMode::Exclusive);
        let header = memtable.memtable.header();
        assert_eq!(header.state(), SlabState::Absorbing, "sealing a memtable that is not ABSORBING");
        header.set_state(SlabState::Sealed);
    }

    /// RECOVERING → SEALED for each of `memtables`: refilled, they wait for the flusher like any
    /// sealed memtable. Takes the lock exclusively.
    pub fn finish_recovery(&self, memtables: &[RecoveringMemtable<'r, M>]) {
        let _lock = self.lock.lock(LockMode::Exclusive);
        for recovering in memtables {
            let header = recovering.memtable.header();
            if header.state() == SlabState::Recovering {
                header.set_state(SlabState::Sealed);
            }
        }
    }

    /// Index `index`'s memtables waiting for their flush (under the shared lock).
    pub fn flush_backlog(&self, index: usize) -> FlushBacklog {
        let infos = self.infos();
        let waiting: Vec<&SlabInfo> =
            infos.iter().filter(|info| info.index == index && info.state.awaits_flush()).collect();
        FlushBacklog { memtables: waiting.len(), failing: waiting.iter().any(|info| info.flush_is_failing()) }
    }

    /// Whether index `index` has an ACTIVE memtable (under the shared lock).
    pub fn has_active(&self, index: usize) -> bool {
        let _lock = self.lock.lock(LockMode::Shared);
        self.memory.active_slab(index).get().is_some()
    }

    /// Pins index `index`'s ACTIVE memtable for a writer, if it has one. Takes the lock shared:
    /// state changes out of ACTIVE take it exclusively, so the memtable is ACTIVE and still the
    /// index's when the pin is taken, and no flush can begin until the pin is dropped.
    pub fn pin_active(&self, index: usize) -> Option<WriterPin<'r, M>> {
        let _lock = self.lock.lock(LockMode::Shared);
        let slab = self.memory.active_slab(index).get()?;
        let header = self.memory.header(slab);
        if header.state() != SlabState::Active || header.index() != index {
            return None;
        }
        header.add_writer();
        Some(WriterPin { memtable: self.memtable(slab), segment_id: header.segment_id() })
    }

    /// Drops a writer pin of slab `slab` whose [`WriterPin`] is never dropped (its process exits
    /// without unwinding), so that the memtable does not wait for it forever. No lock.
    pub fn release_lost_writer_pin(&self, slab: usize) {
        self.memory.header(slab).drop_writer();
    }

    /// ACTIVE → SEALED for memtable `segment_id` of index `index` in slab `slab`, if the slab
    /// still holds it ACTIVE (it may have been sealed, flushed and reused since the caller saw
    /// it); the index then has no active memtable. Takes the lock exclusively. Returns whether it
    /// sealed.
    pub fn seal(&self, index: usize, slab: usize, segment_id: u64) -> bool {
        let _lock = self.lock.lock(LockMode::Exclusive);
        self.info(slab).holds(index, segment_id) && self.seal_if_active_locked(slab)
    }

    /// Seals index `index`'s ACTIVE memtable, if it has one (ACTIVE → SEALED). Takes the lock
    /// exclusively. Returns whether it sealed.
    pub fn seal_active(&self, index: usize) -> bool {
        let _lock = self.lock.lock(LockMode::Exclusive);
        self.memory.active_slab(index).get().is_some_and(|slab| self.seal_if_active_locked(slab))
    }

    /// Seals every ACTIVE memtable (at shutdown, so that everything gets flushed); returns how
    /// many. Takes the lock exclusively.
    pub fn seal_all(&self) -> usize {
        let _lock = self.lock.lock(LockMode::Exclusive);
        (0..self.memory.slab_count()).filter(|&slab| self.seal_if_active_locked(slab)).count()
    }

    /// ACTIVE → SEALED for slab `slab`, clearing its index's active-slab marker (which points at
    /// no other state); the caller holds the lock exclusively.
    fn seal_if_active_locked(&self, slab: usize) -> bool {
        let header = self.memory.header(slab);
        if header.state() != SlabState::Active {
            return false;
        }
        header.set_state(SlabState::Sealed);
        let marker = self.memory.active_slab(header.index());
        if marker.get() == Some(slab) {
            marker.set(None);
        }
        true
    }

    /// SEALED → FLUSHING for memtable `segment_id` of index `index` in slab `slab`, if it is
    /// [flushable](SlabInfo::flushable) (sealed, unpinned, complete). Takes the lock exclusively.
    /// The flusher then reads its rows, publishes them and calls [`Slabs::finish_flush_locked`]
    /// (or [`Slabs::finish_flush`]), or [`Slabs::abort_flush`] when that fails.
    pub fn begin_flush(&self, slab: usize, index: usize, segment_id: u64) -> Result<Memtable<'r, M>, NotFlushable> {
        let _lock = self.lock.lock(LockMode::Exclusive);
        let info = self.info(slab);
        if !info.holds(index, segment_id) {
            return Err(NotFlushable::Gone);
        }
        info.flushable()?;
        self.memory.header(slab).set_state(SlabState::Flushing);
        Ok(self.memtable(slab))
    }

    /// FLUSHING → FLUSHED for `memtable`, whose rows were just published: scans taking a snapshot
    /// from now on read the segment instead. The caller holds the lock exclusively and publishes
    /// the segment under the same hold, so that no snapshot sees both or neither.
    ///
    /// # Panics
    /// When the caller does not hold the lock exclusively.
    pub fn finish_flush_locked(&self, memtable: &Memtable<'r, M>) {
        assert!(self.lock.is_held(LockMode::Exclusive), "finish_flush_locked without the exclusive directory lock");
        let header = memtable.header();
        debug_assert_eq!(header.state(), SlabState::Flushing, "finish_flush of a memtable not being flushed");
        if header.state() == SlabState::Flushing {
            header.set_state(SlabState::Flushed);
        }
    }

    /// [`Slabs::finish_flush_locked`] taking the lock itself: for a memtable without live rows,
    /// whose flush publishes nothing.
    pub fn finish_flush(&self, memtable: &Memtable<'r, M>) {
        let _lock = self.lock.lock(LockMode::Exclusive);
        self.finish_flush_locked(memtable);
    }

    /// FLUSHING → SEALED for `memtable` after its flush failed: its rows stay searchable and it
    /// is flushed again later. Takes the lock exclusively. Returns whether it changed the state
    /// (not when the flush had already finished).
    pub fn abort_flush(&self, memtable: &Memtable<'r, M>) -> bool {
        let _lock = self.lock.lock(LockMode::Exclusive);
        let header = memtable.header();
        let flushing = header.state() == SlabState::Flushing;
        if flushing {
            header.set_state(SlabState::Sealed);
        }
        flushing
    }

    /// FLUSHED → FREE for every slab that no scan and no writer holds any more; returns how many.
    /// Takes the lock exclusively.
    pub fn free_unread(&self) -> usize {
        let _lock = self.lock.lock(LockMode::Exclusive);
        let mut freed = 0;
        for slab in 0..self.memory.slab_count() {
            if self.info(slab).is_unread_flushed() {
                self.memory.header(slab).set_state(SlabState::Free);
                freed += 1;
            }
        }
        freed
    }

    /// Returns every slab of index `index` to FREE, whatever its state, and clears its
    /// active-slab marker: the index is being dropped or rebuilt, so no scan or writer of it
    /// runs. The caller holds the lock exclusively.
    ///
    /// # Panics
    /// When the caller does not hold the lock exclusively.
    pub fn release_index_locked(&self, index: usize) {
        assert!(self.lock.is_held(LockMode::Exclusive), "release_index_locked without the exclusive directory lock");
        for slab in 0..self.memory.slab_count() {
            let header = self.memory.header(slab);
            if header.state() != SlabState::Free && header.index() == index {
                header.set_state(SlabState::Free);
            }
        }
        self.memory.active_slab(index).set(None);
    }

    /// The [searchable](SlabState::is_searchable) memtables of index `index`, each with its
    /// reader count raised until the snapshot is dropped, and `under_lock()`'s value computed
    /// under the same shared hold of the lock (pg_strata reads the published segment set's
    /// generation there): every row is then in exactly one of the two.
    pub fn snapshot<T>(&self, index: usize, under_lock: impl FnOnce() -> T) -> (ReadSnapshot<'r, M>, T) {
        let _lock = self.lock.lock(LockMode::Shared);
        let mut memtables = Vec::new();
        for slab in 0..self.memory.slab_count() {
            let header = self.memory.header(slab);
            if header.state().is_searchable() && header.index() == index {
                header.add_reader();
                memtables.push(self.memtable(slab));
            }
        }
        (ReadSnapshot { memtables }, under_lock())
    }

    /// Whether memtable `segment_id` of index `index` has been flushed: no slab holds it with
    /// [unflushed rows](SlabState::holds_unflushed_rows). Takes the lock shared.
    pub fn is_flushed(&self, index: usize, segment_id: u64) -> bool {
        !self.unflushed(index).contains(&segment_id)
    }

    /// Of the memtables `listed` (the status pages' open groups of index `index`), those no slab
    /// holds with unflushed rows, in `listed`'s order: their rows are in published segments and
    /// their groups may be settled. One hold of the shared lock.
    pub fn flushed_among(&self, index: usize, listed: &[u64]) -> Vec<u64> {
        let unflushed = self.unflushed(index);
        listed.iter().copied().filter(|id| !unflushed.contains(id)).collect()
    }

    /// The SegmentIDs of index `index`'s memtables that some slab holds with
    /// [unflushed rows](SlabState::holds_unflushed_rows), read in one hold of the shared lock.
    pub fn unflushed(&self, index: usize) -> std::collections::BTreeSet<u64> {
        self.infos()
            .iter()
            .filter(|info| info.index == index && info.state.holds_unflushed_rows())
            .map(|info| info.segment_id)
            .collect()
    }
}
