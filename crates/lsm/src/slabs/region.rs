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

/// The shared region's layout: a header of `header_bytes` (rounded up to 4 KiB, so that every
/// slab starts 4 KiB-aligned) followed by `slab_count` slabs of `slab_bytes` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionLayout {
    /// Bytes before the first slab (a multiple of 4096).
    pub header_bytes: usize,
    /// Bytes per slab.
    pub slab_bytes: usize,
    /// Number of slabs.
    pub slab_count: usize,
}

impl RegionLayout {
    /// The layout for a header struct of `header_size` bytes and `memory_mb` MB of slabs of
    /// `slab_mb` MB each (at least two slabs, so that one can be flushed while the other fills).
    pub fn new(header_size: usize, memory_mb: usize, slab_mb: usize) -> Self {
        let slab_bytes = slab_mb * 1024 * 1024;
        let slab_count = (memory_mb * 1024 * 1024 / slab_bytes).max(2);
        Self { header_bytes: header_size.div_ceil(4096) * 4096, slab_bytes, slab_count }
    }

    /// Bytes of the whole region.
    pub fn total_bytes(&self) -> usize {
        self.header_bytes + self.slab_bytes * self.slab_count
    }

    /// Offset, from the start of the first slab, of byte `offset` of slab `slab`, after checking
    /// that `bytes` bytes from there lie inside that slab.
    ///
    /// # Panics
    /// When slab `slab` does not exist or the bytes leave it.
    #[inline]
    pub fn slab_offset(&self, slab: usize, offset: usize, bytes: usize) -> usize {
        assert!(slab < self.slab_count, "slab {slab} out of range");
        assert!(
            offset.checked_add(bytes).is_some_and(|end| end <= self.slab_bytes),
            "{bytes} bytes at {offset} lie outside a slab"
        );
        slab * self.slab_bytes + offset
    }
}

#[cfg(test)]
mod layout_tests {
    use proptest::prelude::*;

    use super::RegionLayout;

    proptest! {
        /// Slabs start 4 KiB-aligned after the header, do not overlap, and end inside the region.
        #[test]
        fn slabs_are_aligned_disjoint_and_inside(header in 1usize..100_000, memory in 1usize..512, slab in 1usize..64) {
            let layout = RegionLayout::new(header, memory, slab);
            prop_assert!(layout.header_bytes >= header && layout.header_bytes.is_multiple_of(4096));
            prop_assert!(layout.header_bytes < header + 4096);
            prop_assert!(layout.slab_count >= 2 && layout.slab_count >= memory / slab);
            let last = layout.slab_count - 1;
            prop_assert_eq!(layout.slab_offset(last, 0, layout.slab_bytes), last * layout.slab_bytes);
            prop_assert_eq!(layout.header_bytes + (last + 1) * layout.slab_bytes, layout.total_bytes());
            prop_assert_eq!(layout.slab_offset(1, 0, 1) - layout.slab_offset(0, 0, 1), layout.slab_bytes);
            prop_assert!(layout.slab_offset(1, 0, 1).is_multiple_of(4096));
        }

        /// Bytes that leave their slab are refused.
        #[test]
        fn bytes_outside_a_slab_are_refused(offset in 0usize..(1 << 21), bytes in 1usize..4096) {
            let layout = RegionLayout::new(100, 4, 1);
            let inside = offset + bytes <= layout.slab_bytes;
            let checked = std::panic::catch_unwind(|| layout.slab_offset(0, offset, bytes));
            prop_assert_eq!(checked.is_ok(), inside);
        }
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn missing_slabs_are_refused() {
        RegionLayout::default().slab_offset(0, 0, 1);
    }
}
