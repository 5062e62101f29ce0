//! What the slabs hold, read in one place: [`SlabInfo`] per slab, [`SlabCounts`] by state, and
//! the conditions of the transitions that depend on counters ([`NotFlushable`]).

use super::header::{SlabHeader, SlabState};

/// One slab's header, its fields loaded one by one. Under the directory lock (as
/// [`Slabs::infos`](super::Slabs::infos) reads them) the state and the memtable's identity are
/// stable; the counters may move on right after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlabInfo {
    /// The slab number.
    pub slab: usize,
    /// Its state.
    pub state: SlabState,
    /// Directory slot of the owning index (meaningless while FREE).
    pub index: usize,
    /// SegmentID of its memtable (meaningless while FREE).
    pub segment_id: u64,
    /// Slots in the memtable.
    pub capacity: usize,
    /// Slots that may hold a row (reserved, at most the capacity).
    pub filled: usize,
    /// Slots completely written.
    pub written: usize,
    /// Scans reading it.
    pub readers: u32,
    /// Writers pinning it.
    pub writers: u32,
    /// Failed flush attempts.
    pub flush_failures: u32,
}

/// Why a memtable may not be flushed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotFlushable {
    /// The slab no longer holds that memtable of that index (flushed, released, reused).
    #[error("the slab no longer holds that memtable")]
    Gone,
    /// Only SEALED memtables are flushed.
    #[error("the memtable is {0:?}, not sealed")]
    NotSealed(SlabState),
    /// Writers still pin it: their rows' TIDs may not be recorded yet.
    #[error("{0} writers still pin the memtable")]
    Pinned(u32),
    /// A reserved slot is not written yet.
    #[error("{written} of {filled} reserved slots are written")]
    Incomplete {
        /// Slots written.
        written: usize,
        /// Slots reserved (at most the capacity).
        filled: usize,
    },
}

impl SlabInfo {
    /// Reads slab `slab`'s header.
    pub(crate) fn read(slab: usize, header: &SlabHeader) -> Self {
        Self {
            slab,
            state: header.state(),
            index: header.index(),
            segment_id: header.segment_id(),
            capacity: header.capacity(),
            filled: header.filled(),
            written: header.written(),
            readers: header.readers(),
            writers: header.writers(),
            flush_failures: header.flush_failures(),
        }
    }

    /// Whether the slab holds memtable `segment_id` of index `index` (in any state but FREE).
    pub fn holds(&self, index: usize, segment_id: u64) -> bool {
        self.state != SlabState::Free && self.index == index && self.segment_id == segment_id
    }

    /// Whether every reserved slot is written.
    pub fn is_complete(&self) -> bool {
        self.written >= self.filled
    }

    /// Whether [`Slabs::begin_flush`](super::Slabs::begin_flush) may start flushing it: SEALED,
    /// no writer pins it, and every reserved slot is written; `Err` says what is missing.
    pub fn flushable(&self) -> Result<(), NotFlushable> {
        if self.state != SlabState::Sealed {
            Err(NotFlushable::NotSealed(self.state))
        } else if self.writers > 0 {
            Err(NotFlushable::Pinned(self.writers))
        } else if !self.is_complete() {
            Err(NotFlushable::Incomplete { written: self.written, filled: self.filled })
        } else {
            Ok(())
        }
    }

    /// Whether it holds a memtable waiting for the flusher (SEALED or FLUSHING) whose flushes
    /// have failed: its index's flushes are stuck until their cause is fixed.
    pub fn flush_is_failing(&self) -> bool {
        self.state.awaits_flush() && self.flush_failures > 0
    }

    /// Whether [`Slabs::free_unread`](super::Slabs::free_unread) frees it: FLUSHED (its rows are
    /// in a published segment) and neither a scan nor a writer holds it.
    pub fn is_unread_flushed(&self) -> bool {
        self.state == SlabState::Flushed && self.readers == 0 && self.writers == 0
    }
}

/// How many slabs are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlabCounts([usize; SlabState::ALL.len()]);

impl SlabCounts {
    /// Counts `infos` by state.
    pub fn of(infos: &[SlabInfo]) -> Self {
        let mut counts = Self::default();
        for info in infos {
            counts.0[info.state as usize] += 1;
        }
        counts
    }

    /// Slabs in `state`.
    pub fn get(&self, state: SlabState) -> usize {
        self.0[state as usize]
    }

    /// Slabs in any of `states`.
    pub fn sum(&self, states: &[SlabState]) -> usize {
        states.iter().map(|&state| self.get(state)).sum()
    }

    /// Whether at least `wanted` slabs are free, or none is sealed, flushing or flushed: then
    /// waiting for the index service frees no more (what recovery waits for before it refills).
    pub fn free_or_settled(&self, wanted: usize) -> bool {
        self.get(SlabState::Free) >= wanted
            || self.sum(&[SlabState::Sealed, SlabState::Flushing, SlabState::Flushed]) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slab(state: SlabState, flush_failures: u32) -> SlabInfo {
        SlabInfo {
            slab: 0,
            state,
            index: 0,
            segment_id: 1,
            capacity: 4,
            filled: 4,
            written: 4,
            readers: 0,
            writers: 0,
            flush_failures,
        }
    }

    #[test]
    fn failing_flushes_and_settled_counts() {
        assert!(slab(SlabState::Sealed, 1).flush_is_failing());
        assert!(slab(SlabState::Flushing, 2).flush_is_failing());
        assert!(!slab(SlabState::Sealed, 0).flush_is_failing());
        assert!(!slab(SlabState::Flushed, 3).flush_is_failing(), "flushed at last");
        let counts = |states: &[SlabState]| SlabCounts::of(&states.iter().map(|&s| slab(s, 0)).collect::<Vec<_>>());
        assert!(counts(&[SlabState::Free, SlabState::Free, SlabState::Sealed]).free_or_settled(2));
        assert!(!counts(&[SlabState::Free, SlabState::Sealed]).free_or_settled(2), "a flush may free one");
        assert!(!counts(&[SlabState::Free, SlabState::Flushed]).free_or_settled(2), "freed once unread");
        assert!(counts(&[SlabState::Free, SlabState::Active]).free_or_settled(2), "nothing to wait for");
    }
}
