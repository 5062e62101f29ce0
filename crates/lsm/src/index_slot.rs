//! One index's entry in the shared index directory, as plain shared-memory-safe data: `#[repr(C)]`
//! types made of atomics and of fields read and written only under the directory lock, for which
//! all-zero bytes are a valid (free, healthy, empty) value.
//!
//! The host (pg_strata) places an array of [`IndexSlot`]s in its shared region and supplies the
//! directory lock; the types here say what each field means and check, through [`HeldLock`], that
//! plain fields are touched only under that lock.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::directory::faults::FaultPlan;
use crate::listed::ListedSet;
use crate::packed_config::PackedConfig;
use crate::slabs::{ActiveSlab, RegionLayout};

/// Most indexes that can be in use at once (across all databases).
pub const MAX_INDEXES: usize = 128;

/// Marks an initialised [`SharedHeader`].
const MAGIC: u64 = 0x5354_5241_5441_0001;

/// The header of the shared region (its slabs follow, as [`RegionLayout`] says): the slab
/// geometry, the index service's wake-up handle (`W`: the host's latch type), the index
/// directory and the fault plan. All-zero bytes are an uninitialised header.
#[repr(C)]
pub struct SharedHeader<W> {
    magic: u64,
    /// Bytes per slab.
    pub slab_bytes: u64,
    /// Number of slabs.
    pub slab_count: u32,
    /// The index service's latch (null while it does not run).
    pub service_latch: AtomicPtr<W>,
    /// The index directory.
    pub indexes: [IndexSlot; MAX_INDEXES],
    /// The fault to inject into file writes (test builds only: set by `strata_inject_fault`).
    pub fault: FaultPlan,
}

impl<W> SharedHeader<W> {
    /// Initialises a zeroed header for a region laid out as `layout`: every index slot free,
    /// healthy and empty, no fault, no service.
    pub fn init(&mut self, layout: &RegionLayout) {
        self.magic = MAGIC;
        self.slab_bytes = layout.slab_bytes as u64;
        self.slab_count = layout.slab_count as u32;
    }

    /// Whether [`SharedHeader::init`] initialised it.
    pub fn is_initialised(&self) -> bool {
        self.magic == MAGIC
    }
}

/// Identity of an index's storage: database, tablespace and relfilenode.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IndexKey {
    /// Database OID.
    pub db: u32,
    /// Tablespace OID.
    pub spc: u32,
    /// relfilenode of the index relation.
    pub relnode: u32,
}

/// Proof, passed by the caller, that it holds a lock of the shared region: which lock and in which
/// mode. [`DirectoryLocked`] checks it.
pub trait HeldLock {
    /// Whether it is the directory lock (not a manifest lock).
    fn is_directory(&self) -> bool;
    /// Whether it is held exclusively.
    fn is_exclusive(&self) -> bool;
}

/// A plain-data field of shared memory that is written only while holding the directory lock
/// exclusively and read only while holding it in either mode, so no read can overlap a write. The
/// accessors take the lock guard as proof.
#[repr(transparent)]
pub struct DirectoryLocked<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get`/`set`, which require the directory lock (shared for
// reads, exclusive for writes); the lock orders them across processes and threads.
unsafe impl<T: Copy + Send> Sync for DirectoryLocked<T> {}

impl<T: Copy> DirectoryLocked<T> {
    /// A field holding `value` (for values not placed in zeroed shared memory).
    pub const fn new(value: T) -> Self {
        Self(UnsafeCell::new(value))
    }

    /// The value, read under the directory lock.
    ///
    /// # Panics
    /// When `lock` is not the directory lock.
    pub fn get(&self, lock: &impl HeldLock) -> T {
        assert!(lock.is_directory(), "DirectoryLocked read without the directory lock");
        // SAFETY: writers hold the directory lock exclusively and we hold it (in some mode), so
        // no write overlaps this read.
        unsafe { *self.0.get() }
    }

    /// Replaces the value, under the exclusive directory lock.
    ///
    /// # Panics
    /// When `lock` is not the directory lock held exclusively.
    pub fn set(&self, lock: &impl HeldLock, value: T) {
        assert!(
            lock.is_directory() && lock.is_exclusive(),
            "DirectoryLocked write without the exclusive directory lock"
        );
        // SAFETY: we hold the directory lock exclusively: no other reader or writer is inside.
        unsafe { *self.0.get() = value };
    }
}

/// Length of the error text kept for a failing flush or merge.
pub const ERROR_TEXT_BYTES: usize = 240;

/// The state of one kind of background work (flushes, merges, a standby's absorbing) of an index that fails: a failure
/// episode begins with the first failed attempt and ends with the next success.
#[repr(C)]
pub struct FailureState {
    /// Failed attempts in the current episode (0: healthy).
    pub retries: AtomicU32,
    /// The most recent error of the episode (NUL-padded UTF-8, cut at [`ERROR_TEXT_BYTES`]).
    message: DirectoryLocked<[u8; ERROR_TEXT_BYTES]>,
}

impl Default for FailureState {
    fn default() -> Self {
        Self { retries: AtomicU32::new(0), message: DirectoryLocked::new([0; ERROR_TEXT_BYTES]) }
    }
}

impl FailureState {
    /// Records a failed attempt with `message` (cut at a character boundary to at most
    /// [`ERROR_TEXT_BYTES`]); `lock` is the directory lock held exclusively. Returns the attempt's
    /// number in its episode (1 = the episode begins).
    ///
    /// # Panics
    /// When `lock` is not the directory lock held exclusively.
    pub fn record(&self, lock: &impl HeldLock, message: &str) -> u32 {
        let mut text = [0u8; ERROR_TEXT_BYTES];
        let mut end = message.len().min(ERROR_TEXT_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].copy_from_slice(&message.as_bytes()[..end]);
        self.message.set(lock, text);
        self.retries.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Ends the episode; returns how many attempts had failed in it.
    pub fn clear(&self) -> u32 {
        self.retries.swap(0, Ordering::AcqRel)
    }

    /// Failed attempts so far and the last error, `None` when healthy; `lock` is the directory
    /// lock (either mode).
    ///
    /// # Panics
    /// When `lock` is not the directory lock.
    pub fn current(&self, lock: &impl HeldLock) -> Option<(u32, String)> {
        let retries = self.retries.load(Ordering::Acquire);
        if retries == 0 {
            return None;
        }
        let text = self.message.get(lock);
        let end = text.iter().position(|&b| b == 0).unwrap_or(ERROR_TEXT_BYTES);
        Some((retries, String::from_utf8_lossy(&text[..end]).into_owned()))
    }
}

/// One index's entry in the directory.
#[repr(C)]
pub struct IndexSlot {
    /// 0 = free, 1 = in use.
    pub in_use: AtomicU32,
    /// Which index (set when the slot is registered).
    pub key: DirectoryLocked<IndexKey>,
    /// Its configuration (set with `key`).
    pub config: DirectoryLocked<PackedConfig>,
    /// OID of the index relation (in database `key.db`), for messages.
    pub relid: AtomicU32,
    /// Flushes of this index's memtables that fail.
    pub flush_failure: FailureState,
    /// Merges and rebuilds of this index's segments that fail.
    pub merge_failure: FailureState,
    /// On a standby: the absorber worker's passes over this index (following the replayed
    /// membership log) that fail.
    pub absorb_failure: FailureState,
    /// Set by `strata_flush` / `strata_wait_for_merges`: retry this index's failing work now
    /// instead of at the end of its backoff (the service clears it).
    pub retry_requested: AtomicU32,
    /// Generation of the manifest last published.
    pub manifest_generation: AtomicU64,
    /// Next segment/memtable id to hand out.
    pub next_id: AtomicU64,
    /// The slab receiving inserts (see [`crate::slabs`]).
    pub active_slab: ActiveSlab,
    /// 1 once the index has been recovered (or built) since the server started; until then
    /// only the recovering backend and the service's flushes touch it.
    pub ready: AtomicU32,
    /// Set by the service when a memtable was flushed, so the next writer releases its list
    /// from the status pages.
    pub release_pending: AtomicU32,
    /// The memtables the status pages may still list (see [`ListedSet`]): the service merges
    /// only segments none of whose memtables is listed.
    pub listed: ListedSet,
    /// What the last recovery of this index did (since the server started).
    pub recovery: RecoveryCounters,
    /// 1 while the index is derived from the replayed membership log (opened on a standby): the
    /// first use after promotion finishes the derivation and clears it.
    pub derived: AtomicU32,
    /// The text search configuration (a `regconfig` OID) a bm25 index tokenises with, as its
    /// status pages store it (0: a vector index, or a bm25 index built before it was stored).
    pub text_config: AtomicU32,
}

#[cfg(test)]
impl IndexSlot {
    /// A free slot outside shared memory.
    pub(crate) fn free() -> Self {
        Self {
            in_use: AtomicU32::new(0),
            key: DirectoryLocked::new(IndexKey::default()),
            config: DirectoryLocked::new(PackedConfig::default()),
            relid: AtomicU32::new(0),
            flush_failure: FailureState::default(),
            merge_failure: FailureState::default(),
            absorb_failure: FailureState::default(),
            retry_requested: AtomicU32::new(0),
            manifest_generation: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            active_slab: ActiveSlab::default(),
            ready: AtomicU32::new(0),
            release_pending: AtomicU32::new(0),
            listed: ListedSet::default(),
            recovery: RecoveryCounters::default(),
            derived: AtomicU32::new(0),
            text_config: AtomicU32::new(0),
        }
    }
}

/// Counters of one index recovery, for `strata_index_recovery()`.
#[repr(C)]
#[derive(Default)]
pub struct RecoveryCounters {
    /// When it finished (PostgreSQL timestamp, µs since 2000-01-01); 0 = not recovered.
    pub finished_at: AtomicU64,
    /// How long it took, µs.
    pub micros: AtomicU64,
    /// Memtables the status pages listed.
    pub listed_memtables: AtomicU64,
    /// Status list pages read.
    pub status_pages: AtomicU64,
    /// Segments dropped (newer than `max_memtable_id`).
    pub dropped_segments: AtomicU64,
    /// Rows marked deleted in segment bitmaps.
    pub invalidated_rows: AtomicU64,
    /// Memtables rebuilt from the heap.
    pub rebuilt_memtables: AtomicU64,
    /// Rows re-read from the heap into rebuilt memtables.
    pub reinserted_rows: AtomicU64,
}

/// The counters of [`RecoveryCounters`] read at one moment, as `strata_index_recovery()` shows
/// them (SQL `bigint`s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecoveryReport {
    /// When it finished (PostgreSQL timestamp, µs since 2000-01-01); `None` = not recovered.
    pub finished_at: Option<i64>,
    /// How long it took, ms.
    pub duration_ms: f64,
    /// Memtables the status pages listed.
    pub listed_memtables: i64,
    /// Status list pages read.
    pub status_pages: i64,
    /// Segments dropped.
    pub dropped_segments: i64,
    /// Rows marked deleted in segment bitmaps.
    pub invalidated_rows: i64,
    /// Memtables rebuilt from the heap.
    pub rebuilt_memtables: i64,
    /// Rows re-read from the heap.
    pub reinserted_rows: i64,
}

impl RecoveryCounters {
    /// The counters now (each loaded relaxed: they are written once, by the recovering backend).
    pub fn report(&self) -> RecoveryReport {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed) as i64;
        let finished = load(&self.finished_at);
        RecoveryReport {
            finished_at: (finished != 0).then_some(finished),
            duration_ms: load(&self.micros) as f64 / 1000.0,
            listed_memtables: load(&self.listed_memtables),
            status_pages: load(&self.status_pages),
            dropped_segments: load(&self.dropped_segments),
            invalidated_rows: load(&self.invalidated_rows),
            rebuilt_memtables: load(&self.rebuilt_memtables),
            reinserted_rows: load(&self.reinserted_rows),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock proof for the tests.
    struct Held {
        directory: bool,
        exclusive: bool,
    }

    impl HeldLock for Held {
        fn is_directory(&self) -> bool {
            self.directory
        }
        fn is_exclusive(&self) -> bool {
            self.exclusive
        }
    }

    const EXCLUSIVE: Held = Held { directory: true, exclusive: true };
    const SHARED: Held = Held { directory: true, exclusive: false };

    #[test]
    fn failure_episodes_count_attempts_and_keep_the_last_error() {
        let state = FailureState::default();
        assert_eq!(state.current(&SHARED), None);
        assert_eq!(state.record(&EXCLUSIVE, "disk full"), 1);
        assert_eq!(state.record(&EXCLUSIVE, "I/O error"), 2);
        assert_eq!(state.current(&SHARED), Some((2, "I/O error".to_owned())));
        assert_eq!(state.clear(), 2);
        assert_eq!(state.current(&SHARED), None);
        assert_eq!(state.record(&EXCLUSIVE, "again"), 1, "a new episode starts at 1");
    }

    #[test]
    fn long_errors_are_cut_at_a_character_boundary() {
        let state = FailureState::default();
        // 239 ASCII bytes, then a 2-byte character that would straddle the limit.
        let message = format!("{}é and more", "x".repeat(ERROR_TEXT_BYTES - 1));
        state.record(&EXCLUSIVE, &message);
        let (_, kept) = state.current(&SHARED).unwrap();
        assert_eq!(kept, "x".repeat(ERROR_TEXT_BYTES - 1));
        assert!(message.starts_with(&kept));
    }

    #[test]
    #[should_panic(expected = "without the exclusive directory lock")]
    fn writes_need_the_exclusive_directory_lock() {
        FailureState::default().record(&SHARED, "x");
    }

    #[test]
    #[should_panic(expected = "without the directory lock")]
    fn reads_need_the_directory_lock() {
        let state = FailureState::default();
        state.record(&EXCLUSIVE, "x");
        state.current(&Held { directory: false, exclusive: true });
    }

    #[test]
    fn a_recovery_report_reads_every_counter() {
        let counters = RecoveryCounters::default();
        assert_eq!(counters.report().finished_at, None);
        let values = [7_000_123, 2_500, 3, 4, 5, 6, 7, 8];
        let fields = [
            &counters.finished_at,
            &counters.micros,
            &counters.listed_memtables,
            &counters.status_pages,
            &counters.dropped_segments,
            &counters.invalidated_rows,
            &counters.rebuilt_memtables,
            &counters.reinserted_rows,
        ];
        for (field, value) in fields.into_iter().zip(values) {
            field.store(value, Ordering::Relaxed);
        }
        let expected = RecoveryReport {
            finished_at: Some(7_000_123),
            duration_ms: 2.5,
            listed_memtables: 3,
            status_pages: 4,
            dropped_segments: 5,
            invalidated_rows: 6,
            rebuilt_memtables: 7,
            reinserted_rows: 8,
        };
        assert_eq!(counters.report(), expected);
    }
}
