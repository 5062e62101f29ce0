//! Byte layout of a memtable slab.
//!
//! A memtable is one fixed-size slab of shared memory. Its layout is computed here so that the
//! extension's [`SlabMemory`](crate::slabs::SlabMemory) only maps these offsets:
//!
//! ```text
//! offset                      size                 contents
//! 0                           HEADER_BYTES (128)   header (`strata_lsm::slabs::SlabHeader`)
//! ready_offset                8 · ⌈cap/64⌉         ready bits: slot i is fully written once bit i is set
//! deleted_offset              8 · ⌈cap/64⌉         deleted bits: set by VACUUM
//! tids_offset                 8 · cap              heap TIDs, one u64 per slot
//! vectors_offset              4 · dims · cap       f32 vectors, row-major, 64-byte aligned start
//! ```
//!
//! The protocol over these bytes is [`Memtable`](super::Memtable)'s.

/// Bytes reserved for the slab header.
pub const HEADER_BYTES: usize = 128;

fn align64(offset: usize) -> usize {
    offset.div_ceil(64) * 64
}

/// Offsets of a memtable slab holding `capacity` vectors of `dims` dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemtableLayout {
    /// Vectors per memtable.
    pub capacity: usize,
    /// Dimensions per vector.
    pub dims: usize,
    /// Offset of the ready bitmap (`u64` words).
    pub ready_offset: usize,
    /// Offset of the deleted bitmap (`u64` words).
    pub deleted_offset: usize,
    /// Offset of the TID array (`u64` per slot).
    pub tids_offset: usize,
    /// Offset of the vectors (`f32`, row-major).
    pub vectors_offset: usize,
    /// Total bytes used (≤ the slab size).
    pub total_bytes: usize,
}

impl MemtableLayout {
    /// The layout for `capacity` slots of `dims` dimensions.
    pub fn new(capacity: usize, dims: usize) -> Self {
        let words = capacity.div_ceil(64) * 8;
        let ready_offset = HEADER_BYTES;
        let deleted_offset = ready_offset + words;
        let tids_offset = align64(deleted_offset + words);
        let vectors_offset = align64(tids_offset + 8 * capacity);
        let total_bytes = vectors_offset + 4 * dims * capacity;
        Self { capacity, dims, ready_offset, deleted_offset, tids_offset, vectors_offset, total_bytes }
    }

    /// The most slots of `dims` dimensions that fit in `slab_bytes`, capped at `max_rows`
    /// (0 when not even one fits).
    pub fn fitting(slab_bytes: usize, dims: usize, max_rows: usize) -> Self {
        // The layout's size grows monotonically with capacity: binary-search the largest that fits.
        let (mut fits, mut too_big) = (0usize, max_rows.saturating_add(1));
        while too_big - fits > 1 {
            let mid = fits + (too_big - fits) / 2;
            if Self::new(mid, dims).total_bytes <= slab_bytes {
                fits = mid;
            } else {
                too_big = mid;
            }
        }
        Self::new(fits, dims)
    }

    /// [`MemtableLayout::fitting`] for a new memtable of an index of `dims` dimensions and at
    /// most `max_rows` rows per memtable; an error when not even one row fits in a slab.
    pub fn for_slab(slab_bytes: usize, dims: usize, max_rows: usize) -> Result<Self, NoRowFits> {
        let layout = Self::fitting(slab_bytes, dims, max_rows);
        if layout.capacity == 0 {
            return Err(NoRowFits { dims });
        }
        Ok(layout)
    }

    /// Byte offset of slot `slot`'s vector.
    pub fn vector_offset(&self, slot: usize) -> usize {
        self.vectors_offset + 4 * self.dims * slot
    }
}

/// Not even one row of an index fits in a memtable slab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {dims}-dimension vector does not fit in a memtable slab; raise strata.memtable_slab_size")]
pub struct NoRowFits {
    /// The index's dimensions.
    pub dims: usize,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn regions_are_disjoint_aligned_and_fit(slab in 4096usize..(64 << 20), dims in 1usize..2000, max_rows in 1usize..1_000_000) {
            let layout = MemtableLayout::fitting(slab, dims, max_rows);
            prop_assert!(layout.total_bytes <= slab || layout.capacity == 0);
            prop_assert!(layout.capacity <= max_rows);
            let words = layout.capacity.div_ceil(64) * 8;
            prop_assert!(layout.ready_offset >= HEADER_BYTES);
            prop_assert!(layout.deleted_offset >= layout.ready_offset + words);
            prop_assert!(layout.tids_offset >= layout.deleted_offset + words);
            prop_assert!(layout.vectors_offset >= layout.tids_offset + 8 * layout.capacity);
            prop_assert_eq!(layout.tids_offset % 64, 0);
            prop_assert_eq!(layout.vectors_offset % 64, 0);
            // Nearly full: one more slot would not fit (or the row cap binds).
            let bigger = MemtableLayout::new(layout.capacity + 1, dims);
            prop_assert!(bigger.total_bytes > slab || layout.capacity == max_rows);
            prop_assert_eq!(MemtableLayout::for_slab(slab, dims, max_rows).ok(), (layout.capacity > 0).then_some(layout));
        }
    }

    #[test]
    fn a_slab_too_small_for_one_row_is_an_error_naming_the_fix() {
        let error = MemtableLayout::for_slab(4096, 2000, 100).unwrap_err();
        assert_eq!(
            error.to_string(),
            "a 2000-dimension vector does not fit in a memtable slab; raise strata.memtable_slab_size"
        );
        assert_eq!(MemtableLayout::for_slab(1 << 20, 2000, 100).map(|l| l.capacity), Ok(100));
    }
}
