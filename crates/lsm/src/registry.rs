//! The shared index directory as a registry: which slot holds which index, registering an index
//! (or re-registering it, replacing stale state), and what a slot in use says. The slots are
//! [`IndexSlot`]s in the host's shared region; the directory lock is the host's (its guard is the
//! [`HeldLock`] proof every function here takes), and so is the order in which the host takes it
//! with the manifest locks.

use std::sync::atomic::Ordering;

use crate::index_slot::{HeldLock, IndexKey, IndexSlot, MAX_INDEXES};
use crate::manifest::{IndexConfig, Manifest};
use crate::slabs::{DirectoryLock, SlabMemory, Slabs};

/// Every slot of the directory is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("pg_strata supports at most {MAX_INDEXES} indexes in use at once")]
pub struct DirectoryFull;

/// An index registered in a slot: the slot, its storage key and its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    /// The slot.
    pub slot: usize,
    /// The storage key.
    pub key: IndexKey,
    /// The configuration.
    pub config: IndexConfig,
}

/// The configuration slot `slot` holds; `lock` is the directory lock (either mode).
///
/// # Panics
/// When the slot holds a code `PackedConfig::pack` does not write (shared memory is damaged).
fn config_of(slot: &IndexSlot, lock: &impl HeldLock) -> IndexConfig {
    slot.config.get(lock).unpack().expect("a directory slot holds the codes PackedConfig::pack wrote")
}

/// The slot in use registered for `key`; `lock` is the directory lock (either mode).
pub fn find(slots: &[IndexSlot], key: IndexKey, lock: &impl HeldLock) -> Option<usize> {
    slots.iter().position(|slot| slot.in_use.load(Ordering::Acquire) == 1 && slot.key.get(lock) == key)
}

/// What slot `slot` holds if it is in use; `lock` is the directory lock (either mode).
pub fn registered(slots: &[IndexSlot], slot: usize, lock: &impl HeldLock) -> Option<Registered> {
    let entry = &slots[slot];
    (entry.in_use.load(Ordering::Acquire) == 1).then(|| Registered {
        slot,
        key: entry.key.get(lock),
        config: config_of(entry, lock),
    })
}

/// The registration of `key` if its index is ready (recovered or built since the server
/// started); `lock` is the directory lock (either mode).
pub fn find_ready(slots: &[IndexSlot], key: IndexKey, lock: &impl HeldLock) -> Option<Registered> {
    let slot = find(slots, key, lock)?;
    let entry = &slots[slot];
    (entry.ready.load(Ordering::Acquire) == 1).then(|| Registered { slot, key, config: config_of(entry, lock) })
}

/// Registers `key` (index relation `relid`, tokenising with text search configuration
/// `text_config` when it is a bm25 index, else 0) with `manifest`'s configuration, generation and
/// id counter: in the slot that already holds it, else in a free one. Memtables of a previous
/// registration in that slot are released; failure states, the pending release and the
/// derivation flag are cleared. `ready` is true for a freshly built index (nothing listed), false
/// for one that recovery must reconcile first (everything may be listed). `lock` is the directory
/// lock held exclusively, by the caller, which also holds the manifest lock of a slot that held
/// `key` before (so that a flush of the stale registration finished).
///
/// # Panics
/// When `lock` is not the directory lock held exclusively.
#[allow(clippy::too_many_arguments)]
pub fn register_locked<M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized>(
    slots: &[IndexSlot],
    slabs: Slabs<'_, M, L>,
    lock: &impl HeldLock,
    key: IndexKey,
    relid: u32,
    text_config: u32,
    manifest: &Manifest,
    ready: bool,
) -> Result<Registered, DirectoryFull> {
    let slot = find(slots, key, lock)
        .or_else(|| slots.iter().position(|s| s.in_use.load(Ordering::Acquire) == 0))
        .ok_or(DirectoryFull)?;
    // Stale memtables of a previous registration of the key go; a free slot has none.
    slabs.release_index_locked(slot);
    let entry = &slots[slot];
    entry.key.set(lock, key);
    entry.config.set(lock, crate::packed_config::PackedConfig::pack(&manifest.config));
    entry.relid.store(relid, Ordering::Release);
    entry.text_config.store(text_config, Ordering::Release);
    entry.flush_failure.clear();
    entry.merge_failure.clear();
    entry.absorb_failure.clear();
    entry.manifest_generation.store(manifest.generation, Ordering::Release);
    entry.next_id.store(manifest.next_id, Ordering::Release);
    entry.release_pending.store(0, Ordering::Release);
    if ready {
        entry.listed.reset_empty();
    } else {
        entry.listed.reset_all_listed();
    }
    entry.derived.store(0, Ordering::Release);
    entry.ready.store(u32::from(ready), Ordering::Release);
    entry.in_use.store(1, Ordering::Release);
    Ok(Registered { slot, key, config: manifest.config })
}

#[cfg(all(test, feature = "shuttle"))]
mod tests {

    use strata_engine::metric::Metric;
    use strata_engine::segment::IndexKind;
    use strata_engine::store::ElementKind;

    use super::*;
    use crate::memtable::MemtableLayout;
    use crate::slabs::test_region::{TestLock, TestRegion};
    use crate::slabs::{LockMode, SlabState};

    fn manifest(dims: u32, generation: u64) -> Manifest {
        let config = IndexConfig {
            dims,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind: IndexKind::Flat.into(),
            memtable_rows: 8,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        };
        Manifest { generation, next_id: 10 * generation, ..Manifest::new(config) }
    }

    fn key(relnode: u32) -> IndexKey {
        IndexKey { db: 1, spc: 2, relnode }
    }

    /// Registrations take free slots in order, a re-registration takes the key's own slot back
    /// (releasing its memtables and clearing its state), readiness is as asked, and a full
    /// directory is an error.
    #[test]
    fn registrations_find_their_slots_and_replace_stale_state() {
        shuttle::check_random(
            || {
                let slots: Vec<IndexSlot> = (0..3).map(|_| IndexSlot::free()).collect();
                let (region, lock) = (TestRegion::new(2, 4, 2, 3), TestLock::default());
                let slabs = Slabs::new(&region, &lock);
                let register = |relnode, generation, ready| {
                    let guard = lock.lock(LockMode::Exclusive);
                    register_locked(&slots, slabs, &guard, key(relnode), relnode, 0, &manifest(2, generation), ready)
                };
                assert_eq!(register(7, 1, true).map(|r| r.slot), Ok(0));
                assert_eq!(register(8, 1, false).map(|r| r.slot), Ok(1));
                {
                    let guard = lock.lock(LockMode::Shared);
                    assert_eq!(find(&slots, key(8), &guard), Some(1));
                    assert_eq!(find(&slots, key(9), &guard), None);
                    assert_eq!(find_ready(&slots, key(7), &guard).map(|r| r.slot), Some(0));
                    assert_eq!(find_ready(&slots, key(8), &guard), None, "recovery has not run");
                    assert_eq!(registered(&slots, 1, &guard).map(|r| (r.key, r.config.dims)), Some((key(8), 2)));
                    assert_eq!(registered(&slots, 2, &guard), None);
                }
                assert!(slots[1].listed.contains(1000), "before recovery, any id may be listed");
                assert!(!slots[0].listed.contains(1000), "a fresh index lists nothing");
                // A memtable and a failure of index 8, then it is registered again.
                let allocation = slabs.allocate(1, MemtableLayout::new(4, 2), || 5).unwrap();
                allocation.activate();
                slots[1].flush_failure.record(&lock.lock(LockMode::Exclusive), "disk full");
                slots[1].derived.store(1, Ordering::Release);
                assert_eq!(register(8, 4, true).map(|r| r.slot), Ok(1));
                assert!(slabs.infos().iter().all(|i| i.state == SlabState::Free), "its memtables were released");
                assert_eq!(slots[1].flush_failure.retries.load(Ordering::Acquire), 0);
                assert_eq!(slots[1].derived.load(Ordering::Acquire), 0);
                assert_eq!(slots[1].manifest_generation.load(Ordering::Acquire), 4);
                assert_eq!(slots[1].next_id.load(Ordering::Acquire), 40);
                assert!(!slots[1].listed.contains(5), "registered ready again: nothing listed");
                assert_eq!(register(9, 1, true).map(|r| r.slot), Ok(2));
                assert_eq!(register(10, 1, true), Err(DirectoryFull));
                slots[0].in_use.store(0, Ordering::Release);
                assert_eq!(register(10, 1, true).map(|r| r.slot), Ok(0), "a freed slot is taken again");
            },
            1,
        );
    }
}
