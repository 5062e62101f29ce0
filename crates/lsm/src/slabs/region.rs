//! What the slab lifecycle and the memtable protocol need from their host: the region holding the
//! slabs ([`SlabMemory`]) and the lock ordering state changes ([`DirectoryLock`]). pg_strata
//! implements them over PostgreSQL shared memory and an LWLock; the tests over heap memory and a
//! shuttle lock.

use super::header::{ActiveSlab, SlabHeader};
use crate::memtable::MemtableLayout;
use crate::sync::AtomicU64;

/// One of a memtable's two bitmaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bitmap {
    /// Bit `i` is set (release) once slot `i`'s row is completely written; never cleared until
    /// the slab is taken for another memtable.
    Ready,
    /// Bit `i` is set when VACUUM deletes slot `i`'s row.
    Deleted,
}

/// The region holding the memtable slabs and, for every index slot, its [`ActiveSlab`] marker.
///
/// Implementors guarantee, for as long as `self` lives:
/// - the number of slabs and of index slots never changes;
/// - `header(s)` is the same object on every call, and distinct slabs have distinct headers;
/// - `bitmap_word` returns the same atomic for the same `(slab, bitmap, word)` under the same
///   layout, distinct atomics otherwise, none of them overlapping a header or a row;
/// - the rows of distinct `(slab, slot)` pairs occupy disjoint memory.
///
/// Callers ([`Memtable`](crate::memtable::Memtable), [`Slabs`](super::Slabs)) pass only layouts
/// that the slab's header describes, or that [`MemtableLayout::fitting`] chose for the region's
/// slab size.
pub trait SlabMemory {
    /// Number of slabs.
    fn slab_count(&self) -> usize;

    /// The header of slab `slab` (`< slab_count()`).
    fn header(&self, slab: usize) -> &SlabHeader;

    /// Word `word` (`< ⌈layout.capacity / 64⌉`) of `bitmap` in slab `slab` laid out as `layout`.
    fn bitmap_word(&self, slab: usize, layout: &MemtableLayout, bitmap: Bitmap, word: usize) -> &AtomicU64;

    /// Number of index slots.
    fn index_count(&self) -> usize;

    /// The active-slab marker of index slot `index` (`< index_count()`).
    fn active_slab(&self, index: usize) -> &ActiveSlab;

    /// Stores row `(tid, vector)` in slot `slot` of slab `slab` laid out as `layout`.
    ///
    /// # Safety
    /// The caller has the slot to itself for the duration of the call: it won the slot's
    /// reservation (the header's `fetch_add`) in the memtable the slab holds now, or it filled a
    /// slab it took from FREE and no one else can reach; the slot's ready bit is clear, so no
    /// reader reads the row. Also `slot < layout.capacity`, `vector.len() == layout.dims` and
    /// `layout` is the layout the slab was initialised with.
    unsafe fn write_row(&self, slab: usize, layout: &MemtableLayout, slot: usize, tid: u64, vector: &[f32]);

    /// The row `(tid, vector)` in slot `slot` of slab `slab` laid out as `layout`.
    ///
    /// # Safety
    /// The row was completely written and that write happens before this call: the caller loaded
    /// the slot's ready bit set with acquire ordering. Nothing writes the slot while the returned
    /// slice is used: the caller holds a reader count or a writer pin of the memtable, or the
    /// memtable is FLUSHING under the caller, so the slab is not freed and taken for another
    /// memtable meanwhile. Also `slot < layout.capacity` and `layout` is the layout the slab was
    /// initialised with.
    unsafe fn read_row(&self, slab: usize, layout: &MemtableLayout, slot: usize) -> (u64, &[f32]);
}

/// Which way the directory lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Readers of the slab states: pins, snapshots, queries.
    Shared,
    /// Every change of a slab's state.
    Exclusive,
}

/// The lock that orders slab state changes against pins and snapshots (pg_strata's directory
/// lock).
///
/// Implementors guarantee reader–writer exclusion across every thread and process sharing the
/// region, and that holding it orders memory: what one holder wrote is visible to the next. The
/// lock need not be reentrant; [`Slabs`](super::Slabs) documents which of its methods take it.
pub trait DirectoryLock {
    /// A held lock, released when dropped.
    type Guard<'a>
    where
        Self: 'a;

    /// Waits for the lock in `mode`.
    fn lock(&self, mode: LockMode) -> Self::Guard<'_>;

    /// Whether the calling thread holds the lock in `mode` (holding it exclusively counts for
    /// shared). Methods that require the caller to hold the lock assert this.
    fn is_held(&self, mode: LockMode) -> bool;
}
