//! What a slab records about itself: its state, the memtable it holds and the counters of the
//! protocol, all atomics so that every process and thread may read them at any time.

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// The lifecycle state of a slab. Transitions (each a method of [`Slabs`](super::Slabs), made
/// under the directory lock held exclusively):
///
/// ```text
/// FREE ─allocate─► ALLOCATING ─activate─► ACTIVE ─seal─► SEALED ─begin_flush─► FLUSHING ─finish_flush─► FLUSHED
///  ▲ │                                                    ▲  ▲                   │                        │
///  │ └─take_for_recovery─► RECOVERING ─finish_recovery────┘  └─── abort_flush ───┘                        │
///  └─────────────────────────────── free_unread (no readers, no writers) ─────────────────────────────────┘
/// ```
///
/// Also ALLOCATING → FREE when an allocation is dropped unactivated, and `release_index_locked`
/// returns every slab of an index to FREE (the index is dropped or rebuilt).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlabState {
    /// Unused: may be taken for a new memtable. All-zero shared memory reads as FREE.
    Free = 0,
    /// The memtable receiving its index's inserts: writers may pin it. Searched.
    Active = 1,
    /// Closed to new writers; flushed once its pins are gone and every reserved slot is written.
    /// Searched.
    Sealed = 2,
    /// Being built into a segment. Still searched (the segment is not published yet).
    Flushing = 3,
    /// Its rows are published in a segment: no longer searched, freed once no scan reads it.
    Flushed = 4,
    /// Being refilled by crash recovery: neither searched nor flushed until it is SEALED.
    Recovering = 5,
    /// Taken by a writer that is registering it (in the status pages): invisible to other writers
    /// and to scans until it is ACTIVE.
    Allocating = 6,
    /// On a standby (or a node deriving its index from the membership log): an open group's rows,
    /// appended by the absorber in list order (row `i` = list position `i`). Searched; sealed when
    /// the group settles, then flushed like any sealed memtable.
    Absorbing = 7,
}

/// A value that is not a [`SlabState`] (a damaged slab header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not a slab state")]
pub struct UnknownSlabState(pub u32);

impl TryFrom<u32> for SlabState {
    type Error = UnknownSlabState;

    fn try_from(value: u32) -> Result<Self, UnknownSlabState> {
        Self::ALL.into_iter().find(|&state| state as u32 == value).ok_or(UnknownSlabState(value))
    }
}

impl SlabState {
    /// Every state, in the order of their codes.
    pub const ALL: [SlabState; 8] = [
        SlabState::Free,
        SlabState::Active,
        SlabState::Sealed,
        SlabState::Flushing,
        SlabState::Flushed,
        SlabState::Recovering,
        SlabState::Allocating,
        SlabState::Absorbing,
    ];

    /// Whether scans read memtables in this state (ACTIVE, SEALED, FLUSHING, ABSORBING): exactly
    /// the states whose rows are not yet in a published segment and are visible to writers'
    /// transactions (or, ABSORBING, replayed from the primary's).
    pub fn is_searchable(self) -> bool {
        matches!(self, SlabState::Active | SlabState::Sealed | SlabState::Flushing | SlabState::Absorbing)
    }

    /// Whether a slab in this state holds rows that are not published in a segment yet (every
    /// state but FREE and FLUSHED).
    pub fn holds_unflushed_rows(self) -> bool {
        !matches!(self, SlabState::Free | SlabState::Flushed)
    }

    /// Whether a memtable in this state is waiting for the flusher (SEALED or FLUSHING).
    pub fn awaits_flush(self) -> bool {
        matches!(self, SlabState::Sealed | SlabState::Flushing)
    }
}

/// The header at the start of every slab (at most [`HEADER_BYTES`](crate::memtable::HEADER_BYTES)),
/// shared by every process.
///
/// The fields describing the memtable (index, SegmentID, capacity, dimensions) change only while
/// the slab is FREE and the directory lock is held exclusively ([`Slabs`](super::Slabs) does it);
/// the state changes only under that lock; the counters change without it, as the protocol says
/// at each of them. All-zero bytes are a FREE slab.
#[repr(C)]
#[derive(Default)]
pub struct SlabHeader {
    /// A [`SlabState`] code.
    state: AtomicU32,
    /// Directory slot of the index owning the memtable.
    index: AtomicU32,
    /// SegmentID of the memtable.
    segment_id: AtomicU64,
    /// Slots in the memtable.
    capacity: AtomicU32,
    /// Dimensions per vector.
    dims: AtomicU32,
    /// Slots handed out by `fetch_add` (may pass `capacity`: those writers find it full).
    reserved: AtomicU32,
    /// Slots whose row is completely written.
    written: AtomicU32,
    /// Scans holding the memtable (raised under the directory lock with the snapshot).
    readers: AtomicU32,
    /// Writers holding a pin (raised under the directory lock while ACTIVE, dropped after the
    /// writer has recorded its row's TID).
    writers: AtomicU32,
    /// Failed flush attempts of this memtable (0 when none failed).
    flush_failures: AtomicU32,
}

#[cfg(not(feature = "shuttle"))]
const _: () = assert!(std::mem::size_of::<SlabHeader>() <= crate::memtable::HEADER_BYTES);

impl SlabHeader {
    /// The state.
    ///
    /// # Panics
    /// When the header holds no state code (shared memory is damaged).
    pub fn state(&self) -> SlabState {
        let code = self.state.load(Ordering::Acquire);
        SlabState::try_from(code).expect("slab headers hold only SlabState codes")
    }

    /// Directory slot of the index owning the memtable (meaningless while FREE).
    pub fn index(&self) -> usize {
        self.index.load(Ordering::Acquire) as usize
    }

    /// SegmentID of the memtable (meaningless while FREE).
    pub fn segment_id(&self) -> u64 {
        self.segment_id.load(Ordering::Acquire)
    }

    /// Slots in the memtable.
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Acquire) as usize
    }

    /// Dimensions per vector.
    pub fn dims(&self) -> usize {
        self.dims.load(Ordering::Acquire) as usize
    }

    /// Slots that may hold a row: those reserved, at most the capacity.
    pub fn filled(&self) -> usize {
        (self.reserved.load(Ordering::Acquire) as usize).min(self.capacity())
    }

    /// Slots whose row is completely written.
    pub fn written(&self) -> usize {
        self.written.load(Ordering::Acquire) as usize
    }

    /// Scans reading the memtable now.
    pub fn readers(&self) -> u32 {
        self.readers.load(Ordering::Acquire)
    }

    /// Writers pinning the memtable now.
    pub fn writers(&self) -> u32 {
        self.writers.load(Ordering::Acquire)
    }

    /// Failed flush attempts of this memtable.
    pub fn flush_failures(&self) -> u32 {
        self.flush_failures.load(Ordering::Acquire)
    }

    /// Records that flushing this memtable has failed `attempts` times (shown to users; reset
    /// when the slab is taken for another memtable).
    pub fn record_flush_failures(&self, attempts: u32) {
        self.flush_failures.store(attempts, Ordering::Release);
    }

    pub(crate) fn set_state(&self, state: SlabState) {
        self.state.store(state as u32, Ordering::Release);
    }

    /// Describes a new memtable; the caller holds the directory lock exclusively and the slab is
    /// FREE, so nothing reads these fields until `set_state` publishes them with release ordering.
    pub(crate) fn describe(&self, index: usize, segment_id: u64, capacity: usize, dims: usize) {
        self.index.store(index as u32, Ordering::Relaxed);
        self.segment_id.store(segment_id, Ordering::Relaxed);
        self.capacity.store(capacity as u32, Ordering::Relaxed);
        self.dims.store(dims as u32, Ordering::Relaxed);
        for counter in [&self.reserved, &self.written, &self.readers, &self.writers, &self.flush_failures] {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// Hands out the next slot (maybe past the capacity).
    pub(crate) fn reserve(&self) -> usize {
        self.reserved.fetch_add(1, Ordering::AcqRel) as usize
    }

    /// Counts a slot whose row is now completely written (after its ready bit is set).
    pub(crate) fn count_written(&self) {
        self.written.fetch_add(1, Ordering::AcqRel);
    }

    /// Reserves `slots` consecutive slots at once (a span row, [`crate::memtable::spans`]);
    /// returns the first. Like [`SlabHeader::reserve`], the run may reach past the capacity.
    pub(crate) fn reserve_run(&self, slots: usize) -> usize {
        let slots = u32::try_from(slots).expect("a span row is shorter than a slab");
        self.reserved.fetch_add(slots, Ordering::AcqRel) as usize
    }

    pub(crate) fn add_reader(&self) {
        self.readers.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn drop_reader(&self) {
        self.readers.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn add_writer(&self) {
        self.writers.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops a writer's pin; returns the number of pins left.
    pub(crate) fn drop_writer(&self) -> u32 {
        self.writers.fetch_sub(1, Ordering::AcqRel) - 1
    }
}

/// Which slab holds an index's ACTIVE memtable: the writers' way to it without scanning every
/// slab. Kept in the shared region with the index's other fields; all-zero bytes mean "none", so
/// zeroed shared memory needs no initialisation. Set by `activate`, cleared by every transition
/// out of ACTIVE, all under the directory lock held exclusively.
#[repr(transparent)]
#[derive(Default)]
pub struct ActiveSlab(AtomicU32);

impl ActiveSlab {
    /// The slab of the index's ACTIVE memtable, if there is one.
    pub fn get(&self) -> Option<usize> {
        (self.0.load(Ordering::Acquire) as usize).checked_sub(1)
    }

    pub(crate) fn set(&self, slab: Option<usize>) {
        self.0.store(slab.map_or(0, |slab| slab as u32 + 1), Ordering::Release);
    }
}
